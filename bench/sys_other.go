//go:build !unix

package main

import (
	"fmt"
	"io/fs"
	"runtime"
)

// platformErr says the bench does not run here (Windows): it reports the
// blocks a store occupies (st_blocks) and flushes the file systems between
// measurements (sync(2)), which Windows does not have, and a report without
// them would mislead. run returns it, and the tests skip.
func platformErr() error {
	return fmt.Errorf("not supported on %s: the bench measures with st_blocks and sync(2), which only Unix has", runtime.GOOS)
}

// syncAll is never called here: run refuses first (see platformErr).
func syncAll() {}

// diskBytes knows no blocks here (see platformErr).
func diskBytes(fs.FileInfo) (int64, bool) { return 0, false }
