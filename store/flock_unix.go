//go:build unix

package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// The operations of flockNB: take a shared lock, take the exclusive lock,
// drop the lock.
const (
	lockSH = unix.LOCK_SH
	lockEX = unix.LOCK_EX
	lockUN = unix.LOCK_UN
)

// errWouldBlock is flockNB's error when another open file holds a lock
// that excludes the one asked for.
var errWouldBlock error = unix.EWOULDBLOCK

// flockNB applies flock(2) without blocking, retrying on EINTR. The lock
// belongs to the open file: it ends when the file is closed, or when the
// process dies.
func flockNB(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err != unix.EINTR {
			return err
		}
	}
}
