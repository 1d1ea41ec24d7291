package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ReserveFile is a file of reserved space at the store root. gc and prune
// release it, so that on a full disk the index can open and space can be
// freed; they make it again once there is room.
const ReserveFile = "reserve"

// DefaultReserve is the largest reserve file a store keeps unless
// WithReserve sets its size: the reserve of an index of 8 MiB or more.
const DefaultReserve = 1 << 20

// MinReserve is the smallest reserve file a store keeps unless WithReserve
// sets its size. It covers what maintenance on a full disk needs whatever
// the index's size: the index's shared-memory file (32 KiB) when it opens,
// then the log of a prune of one run of up to 32 parts (31 KiB, measured
// with TestDiskFullGCAndPrune's store) and of gc's first batch, which frees
// space, with room to spare.
const MinReserve = 128 << 10

// autoReserve sizes the reserve from the index (reserveFor).
const autoReserve = -1

// reserveFor returns the reserve of a store whose index takes indexBytes:
// an eighth of it rounded up to a power of two, between MinReserve and
// DefaultReserve. A prune logs every page it changes before it commits, so
// the reserve grows with the index to let a full disk's prune remove a
// share of it: at the cap, an index of 8 MiB, a sixteenth of its parts at
// once. A larger prune on a full disk fails, losing nothing; a narrower
// one (a run, an earlier date) gets through. The powers of two keep the
// file from being made again at every open while the index grows: it is
// made again each time the index doubles, four times in a store's life.
func reserveFor(indexBytes int64) int64 {
	r := int64(MinReserve)
	for r < indexBytes/8 && r < DefaultReserve {
		r *= 2
	}
	return r
}

// reservePath returns the reserve file's path under dir.
func reservePath(dir string) string { return filepath.Join(dir, ReserveFile) }

// releaseReserve deletes the reserve file, reporting whether there was one.
func releaseReserve(dir string) bool {
	err := os.Remove(reservePath(dir))
	return err == nil
}

// makeReserve makes the reserve file of size bytes (autoReserve: as
// reserveFor the index beside it), or brings the one there to that size:
// a larger one is cut down, giving the rest back; a smaller one is made
// again at the new size, and only when the file system has room for it
// and as much again: a writer never takes the last bytes for it. It is
// best effort: a store without its reserve works.
func makeReserve(dir string, size int64) {
	if size == autoReserve {
		size = reserveFor(indexFileBytes(dir))
	}
	if size <= 0 {
		return
	}
	path := reservePath(dir)
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Size() >= size {
		if fi.Size() > size {
			os.Truncate(path, size)
		}
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

// indexFileBytes returns the size of the index database under dir, 0 when
// there is none there (an index on PostgreSQL).
func indexFileBytes(dir string) int64 {
	fi, err := os.Stat(filepath.Join(dir, IndexFile))
	if err != nil {
		return 0
	}
	return fi.Size()
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
