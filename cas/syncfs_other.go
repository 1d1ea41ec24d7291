//go:build !linux

package cas

import "os"

func syncfs(*os.File) error { return errSyncFSUnsupported }
