//go:build unix

package store

import (
	"os"
	"syscall"
)

// killSelf ends the test process at once, with SIGKILL, as a crash would.
func killSelf() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }

// stopProcess stops process pid with SIGSTOP, as a debugger or a job
// control stop would, holding whatever it holds.
func stopProcess(pid int) error { return syscall.Kill(pid, syscall.SIGSTOP) }

// continueProcess lets a stopped process pid go on, with SIGCONT.
func continueProcess(pid int) { syscall.Kill(pid, syscall.SIGCONT) }
