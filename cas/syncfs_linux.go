package cas

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncfs flushes the whole file system holding f to stable storage, data and
// metadata, and reports write-back errors (Linux 5.8 and later).
func syncfs(f *os.File) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.Syncfs(int(fd)) }); err != nil {
		return err
	}
	return serr
}
