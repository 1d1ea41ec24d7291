package store

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// The operations of flockNB: take a shared lock, take the exclusive lock,
// drop the lock.
const (
	lockSH = iota
	lockEX
	lockUN
)

// errWouldBlock is flockNB's error when another open file holds a lock
// that excludes the one asked for.
var errWouldBlock error = windows.ERROR_LOCK_VIOLATION

// flockNB locks f without waiting, with LockFileEx: Windows has no
// flock(2). It locks the file's first byte, the range that
// github.com/gofrs/flock locks on Windows, so that the locks taken here (a
// writer's share of gc.lock, a store's marker) and those taken through
// gofrs/flock (gc's hold of gc.lock and gc.intent) exclude each other as
// flocks do on Unix. Like a flock, the lock belongs to the open file (its
// handle), and ends when the file is closed or the process dies. Unlike a
// flock it is mandatory: no other handle reads or writes the locked byte,
// which none of these files needs.
func flockNB(f *os.File, how int) error {
	h := windows.Handle(f.Fd())
	if how == lockUN {
		return windows.UnlockFileEx(h, 0, 1, 0, new(windows.Overlapped))
	}
	flags := uint32(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if how == lockEX {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	err := windows.LockFileEx(h, flags, 0, 1, 0, new(windows.Overlapped))
	if errors.Is(err, windows.ERROR_IO_PENDING) {
		return errWouldBlock
	}
	return err
}
