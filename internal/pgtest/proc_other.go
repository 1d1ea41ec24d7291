//go:build !unix

package pgtest

import (
	"os"
	"runtime"
	"syscall"
)

// credential is the user the server would run as when the tests run as
// root: there is no root here (on Windows os.Geteuid is -1), and it is
// never set.
type credential struct{ Uid, Gid uint32 }

// platformErr says clusters do not run here (Windows): pgtest stops its
// server with Unix signals (SIGINT, SIGQUIT), which a Windows process
// cannot be sent, and reaches it through a Unix socket directory. FindBin
// and Start return it, so that the tests that need PostgreSQL skip (or
// fail, with $TOOLCAS_REQUIRE_SERVERS set to 1) with a message naming the
// platform.
func platformErr() error { return unsupportedError{} }

// unsupportedError is platformErr's error: it is ErrNoServer, so that the
// callers that skip without a server skip here too.
type unsupportedError struct{}

func (unsupportedError) Error() string {
	return "pgtest: PostgreSQL test clusters are not supported on " + runtime.GOOS +
		" (the server is stopped with Unix signals and reached through a Unix socket)"
}

func (unsupportedError) Is(target error) bool { return target == ErrNoServer }

// alive reports whether a process pid exists: os.FindProcess opens a
// handle to it on Windows, and fails when there is none.
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}

// sysProcAttr is empty: a process is started as another user by a
// credential on Unix only.
func sysProcAttr(*credential) *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
