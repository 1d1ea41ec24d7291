//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

// platformErr is nil: the bench measures with sync(2) and st_blocks, which
// Unix has.
func platformErr() error { return nil }

// syncAll flushes every file system's unwritten bytes, with sync(2), so
// that a measurement starts with none left by the one before.
func syncAll() { syscall.Sync() }

// diskBytes returns the bytes of the blocks fi's file occupies: st_blocks
// counts 512-byte units.
func diskBytes(fi fs.FileInfo) (int64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Blocks * 512, true
}
