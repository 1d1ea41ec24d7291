//go:build !linux

package cas

import (
	"os"
	"time"
)

func syncfs(*os.File) error { return errSyncFSUnsupported }

func datasync(f file) error { return f.Sync() }

// birthTime is unknown here: every durable hit syncs.
func birthTime(file) (time.Time, bool) { return time.Time{}, false }

// identify cannot tell a file from one made later at its inode here.
func identify(file) (fileID, bool) { return fileID{}, false }
