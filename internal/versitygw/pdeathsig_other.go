//go:build !linux

package versitygw

import "os/exec"

// setPdeathsig does nothing where the kernel cannot kill a child with its
// parent: a killed test binary may leave its server running.
func setPdeathsig(*exec.Cmd) {}
