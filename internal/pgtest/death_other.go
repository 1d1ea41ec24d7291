//go:build !linux

package pgtest

import "syscall"

func setDeathSignal(*syscall.SysProcAttr) {}
