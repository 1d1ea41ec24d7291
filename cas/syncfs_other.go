//go:build !linux

package cas

import "os"

// haveSyncFS says whether syncfs flushes a file system in one call.
const haveSyncFS = false

func syncfs(*os.File) error { return errSyncFSUnsupported }

func datasync(f file) error { return f.Sync() }

// writebackErr has no check cheaper than a sync here: it syncs f. (No
// barrier precedes it here: syncfs is unsupported, so nothing calls it
// after one.)
func writebackErr(f file) error {
	if c, ok := f.(writebackChecker); ok {
		return c.writebackErr()
	}
	return f.Sync()
}

// identify cannot tell a file from one made later at its inode, nor when
// it was born, here: every durable hit syncs.
func identify(file) (fileID, bool) { return fileID{}, false }
