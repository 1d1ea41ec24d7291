//go:build !linux

package mcp

import (
	"errors"
	"os/exec"
	"syscall"
)

// setDeathSignal does nothing outside Linux, which alone has a parent-death
// signal; the proxy still ends its child on every orderly way out.
func setDeathSignal(*exec.Cmd) {}

func signalGroup(int, syscall.Signal) error { return errors.ErrUnsupported }
