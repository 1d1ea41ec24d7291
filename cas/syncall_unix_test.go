//go:build unix

package cas

import "syscall"

// syncAll flushes every file system's unwritten bytes, with sync(2).
func syncAll() { syscall.Sync() }
