//go:build unix

package mcp_test

import "syscall"

// exists reports whether a process has this pid, where there is no /proc
// to look in.
func exists(pid int) bool { return syscall.Kill(pid, 0) != syscall.ESRCH }
