package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// fallocate gives f size bytes of real blocks without writing them.
func fallocate(f *os.File, size int64) error {
	return unix.Fallocate(int(f.Fd()), 0, 0, size)
}
