//go:build !unix

package store

import (
	"fmt"
	"os"
	"runtime"
)

// killSelf ends the test process at once, with TerminateProcess, as a
// crash would: Windows has no SIGKILL to send.
func killSelf() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Kill()
	}
}

// stopProcess fails: Windows has no SIGSTOP, and the tests that stop a
// process skip there.
func stopProcess(int) error {
	return fmt.Errorf("stopping a process: not supported on %s", runtime.GOOS)
}

// continueProcess does nothing: no process was stopped (see stopProcess).
func continueProcess(int) {}
