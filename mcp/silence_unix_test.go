//go:build unix

package mcp_test

import (
	"os"

	"golang.org/x/sys/unix"
)

// silenceStdout points the process's standard output at /dev/null, so that
// nothing the upstream's SDK writes after a half message (a notification
// it sends on its own) completes the line the test means to leave half
// written. A copy of the old descriptor stays open, and with it the pipe:
// the reader sees a writer that went quiet, not one that closed.
func silenceStdout() {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return
	}
	if _, err := unix.Dup(int(os.Stdout.Fd())); err != nil {
		return
	}
	unix.Dup2(int(null.Fd()), int(os.Stdout.Fd()))
}
