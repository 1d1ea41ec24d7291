//go:build unix

package main

import "golang.org/x/sys/unix"

// canWrite asks the system, with access(2), whether this process may
// write to dir: a read-only mount or a lack of permission fails.
func canWrite(dir string) error { return unix.Access(dir, unix.W_OK) }
