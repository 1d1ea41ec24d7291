//go:build unix

package pgtest

import (
	"errors"
	"syscall"
)

// credential is the user the server runs as when the tests run as root.
type credential = syscall.Credential

// platformErr is nil: clusters run on Unix, where the server is a process
// stopped by signals and reached through a Unix socket.
func platformErr() error { return nil }

// alive reports whether a process pid exists: kill(2) with no signal finds
// it, or finds it belongs to another user.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// sysProcAttr has a command run as cred, or as the test process's user
// when cred is nil.
func sysProcAttr(cred *credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
