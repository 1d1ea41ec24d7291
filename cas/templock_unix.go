//go:build unix

package cas

import (
	"errors"
	"syscall"
)

// tempLocking says temp files are locked here.
const tempLocking = true

// lockTemp takes an exclusive lock on a temp file the store is writing, so
// that gc, which removes only the temp files it can lock, leaves it alone
// however long the content takes to arrive. The lock goes with the file
// descriptor: it ends when the file is closed, or when the process dies.
func lockTemp(f file) error {
	return flockFile(f, syscall.LOCK_EX)
}

// tryLockTemp takes the lock without waiting; ErrTempInUse means the temp
// file is being written.
func tryLockTemp(f file) error {
	err := flockFile(f, syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrTempInUse
	}
	return err
}

func flockFile(f file, how int) error {
	sc, ok := f.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Flock(int(fd), how)
			if !errors.Is(ferr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// unlinked reports whether a file's name was removed since it was opened.
func unlinked(f file) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
