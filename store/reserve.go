package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ReserveFile is a file of reserved space at the store root. gc and prune
// release it, so that on a full disk the index can open and space can be
// freed; they make it again once there is room.
const ReserveFile = "reserve"

// DefaultReserve is the reserve file's size.
const DefaultReserve = 1 << 20

// WithReserve sets the size of the reserve file (DefaultReserve); zero
// keeps none.
func WithReserve(bytes int64) Option {
	return func(c *config) error {
		if bytes < 0 {
			return fmt.Errorf("store: negative reserve %d", bytes)
		}
		c.reserve = bytes
		return nil
	}
}

// Maintenance opens the store to free space: when the index cannot be
// opened for want of space, the reserve file is released first. gc and
// prune open the store so; GC and Prune make the reserve again when done.
func Maintenance() Option {
	return func(c *config) error {
		c.maintenance = true
		return nil
	}
}

// reservePath returns the reserve file's path under dir.
func reservePath(dir string) string { return filepath.Join(dir, ReserveFile) }

// releaseReserve deletes the reserve file, reporting whether there was one.
func releaseReserve(dir string) bool {
	err := os.Remove(reservePath(dir))
	return err == nil
}

// makeReserve makes the reserve file unless it exists, and only when the
// file system has room for it and as much again: a writer never takes the
// last bytes for it. It is best effort: a store without its reserve works.
func makeReserve(dir string, size int64) {
	if size <= 0 {
		return
	}
	path := reservePath(dir)
	if fi, err := os.Lstat(path); err == nil && fi.Size() >= size {
		return
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return
	}
	if free, ok := freeBytes(dir); !ok || free < 2*size {
		return
	}
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	err = allocate(f, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
}

// allocate gives f size bytes of real blocks: fallocate where the file
// system has it, written bytes elsewhere.
func allocate(f *os.File, size int64) error {
	if err := fallocate(f, size); err == nil {
		return f.Sync()
	}
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = 0xa5
	}
	for left := size; left > 0; {
		n, err := f.Write(buf[:min(int64(len(buf)), left)])
		if err != nil {
			return err
		}
		left -= int64(n)
	}
	return f.Sync()
}

// freeBytes returns the bytes an unprivileged user may still write on the
// file system holding dir.
func freeBytes(dir string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
