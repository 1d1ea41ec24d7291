package s3blob

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// staleTemp is how old a temp file in the cache must be before a scan
// removes it where temp files cannot be locked: its writer has surely died.
// Where they can (cas.TempLocking), a scan removes exactly the temp files no
// live writer holds locked, whatever their age.
const staleTemp = time.Hour

// Cache is a bounded local directory of blob files, laid out as a store's
// blobs/ is (DIR/blobs/3f/3fa9….txt), so that the path a pointer shows names
// a file any tool can open. Only checked bytes enter it: a file is written
// under a temp name, hashed, and renamed into place. Its total size is kept
// at most its bound by evicting the least recently used files (a hit
// refreshes a file's modification time) down to lowWater of it, so that the
// directory is walked once per tenth of the bound filled, not at every fill.
// Nothing is walked until the first fill: opening a cache costs nothing.
// Many processes may share one directory: every change is a rename or an
// unlink, each process scans the directory before it evicts, and a process
// may exceed the bound by what other processes added since its last scan.
type Cache struct {
	dir string
	max int64
	now func() time.Time

	mu        sync.Mutex
	scanned   bool  // a scan has run, so total means something
	total     int64 // bytes in the cache, as of the last scan plus this process's fills
	sinceScan int64 // bytes this process added since its last scan
	scans     int   // scans run, for tests
}

// lowWater is the share of its bound an eviction brings the cache down to.
const lowWater = 0.9

// NewCache opens (making it if needed) the cache directory dir, bounded to
// maxBytes. now is the clock that orders files by last use; nil is the
// system clock.
func NewCache(dir string, maxBytes int64, now func() time.Time) (*Cache, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("s3blob: cache size %d: want a positive number of bytes", maxBytes)
	}
	if now == nil {
		now = time.Now
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("s3blob: cache %s: %w", dir, err)
	}
	for _, d := range []string{abs, filepath.Join(abs, cas.BlobsDir), filepath.Join(abs, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("s3blob: make cache directory: %w", err)
		}
	}
	return &Cache{dir: abs, max: maxBytes, now: now}, nil
}

// Dir returns the cache directory's absolute path.
func (c *Cache) Dir() string { return c.dir }

// MaxBytes returns the cache's bound.
func (c *Cache) MaxBytes() int64 { return c.max }

// Path returns the absolute path of a blob's cached file.
func (c *Cache) Path(b cas.Blob) string {
	return filepath.Join(c.dir, filepath.FromSlash(b.RelPath()))
}

// Size returns the total size of the cached files, scanning the directory,
// so that it counts what every process sharing it has added.
func (c *Cache) Size() (int64, error) {
	var total int64
	err := filepath.WalkDir(filepath.Join(c.dir, cas.BlobsDir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	return total, err
}

// open opens a blob's cached file once its bytes are checked, refreshing its
// last use. A hit so reads the file twice: once here, whole, so that damage
// is found before anything is handed out and the blob is fetched again
// instead; and once more by the caller through a cas.Reader, which re-hashes
// as it reads, as every read is checked (the file may change in between). A missing file, or one that does not hash to the blob's digest
// (which is then removed), gives cas.ErrNotFound: the caller fetches it.
func (c *Cache) open(ctx context.Context, b cas.Blob) (*os.File, int64, error) {
	p := c.Path(b)
	f, err := openNoFollow(p, os.O_RDONLY)
	if err != nil {
		return nil, 0, fmt.Errorf("s3blob: cache: %s: %w", b.FileName(), cas.ErrNotFound)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		os.Remove(p)
		return nil, 0, fmt.Errorf("s3blob: cache: %s: %w", b.FileName(), cas.ErrNotFound)
	}
	h := cas.NewHashingReader(f)
	if _, err := cas.CopyContext(ctx, io.Discard, h); err != nil {
		f.Close()
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		return nil, 0, fmt.Errorf("s3blob: cache: read %s: %w", p, err)
	}
	if h.Digest() != b.Digest {
		// Damaged behind our back: drop it and fetch the blob again.
		f.Close()
		os.Remove(p)
		return nil, 0, fmt.Errorf("s3blob: cache: %s damaged: %w", b.FileName(), cas.ErrNotFound)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, 0, err
	}
	now := c.now()
	os.Chtimes(p, now, now)
	return f, h.Size(), nil
}

// createTemp creates a temp file in the cache's tmp/ directory, on the same
// file system as its blobs, for a rename into place.
func (c *Cache) createTemp() (*os.File, error) {
	var rb [8]byte
	for range 10 {
		rand.Read(rb[:])
		name := filepath.Join(c.dir, "tmp", ".tmp-"+hex.EncodeToString(rb[:]))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if errors.Is(err, fs.ErrNotExist) {
			// Someone removed tmp/: make it again.
			if err := os.MkdirAll(filepath.Join(c.dir, "tmp"), 0o755); err != nil {
				return nil, fmt.Errorf("s3blob: cache: %w", err)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("s3blob: cache: create temp file: %w", err)
		}
		// A scan removes a temp file only while it holds its lock: one a
		// scan removed between its creation and this lock is made anew.
		if err := cas.LockTempFile(f); err != nil {
			c.discard(f)
			return nil, fmt.Errorf("s3blob: cache: lock temp file: %w", err)
		}
		if cas.TempFileUnlinked(f) {
			f.Close()
			continue
		}
		return f, nil
	}
	return nil, fmt.Errorf("s3blob: cache: create temp file in %s: no free name", c.dir)
}

// discard closes and removes a temp file.
func (c *Cache) discard(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

// install renames a temp file holding a blob's checked bytes into place and
// returns it open at its start; the open file reads the bytes even if an
// eviction removes the name at once. The caller has checked the bytes: a put
// hashed them to name the blob, a fetch read them through a cas.Reader, which
// fails at the end on a mismatch. Then the cache evicts what is over its
// bound, never this blob.
func (c *Cache) install(f *os.File, b cas.Blob, size int64) (*os.File, int64, error) {
	p := c.Path(b)
	var replaced int64
	if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
		replaced = fi.Size()
	}
	if err := f.Chmod(0o444); err != nil {
		c.discard(f)
		return nil, 0, fmt.Errorf("s3blob: cache: %w", err)
	}
	err := os.Rename(f.Name(), p)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			err = os.Rename(f.Name(), p)
		}
	}
	if err != nil {
		c.discard(f)
		return nil, 0, fmt.Errorf("s3blob: cache: install %s: %w", b.FileName(), err)
	}
	now := c.now()
	os.Chtimes(p, now, now)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, 0, err
	}
	c.mu.Lock()
	c.total += size - replaced
	c.sinceScan += size
	if !c.scanned || c.total > c.max || c.sinceScan > c.max/4 {
		// A failed scan leaves the cache over its bound until the next
		// one; the blob's file is in place all the same.
		c.scanLocked(&b)
	}
	c.mu.Unlock()
	return f, size, nil
}

// remove drops a blob's cached file.
func (c *Cache) remove(b cas.Blob) error {
	err := os.Remove(c.Path(b))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("s3blob: cache: remove %s: %w", b.FileName(), err)
	}
	return nil
}

type cached struct {
	path  string
	size  int64
	mtime time.Time
}

// scanLocked lists the cache, removes the temp files of dead writers, and
// when the total is over the bound evicts the least recently used files
// (never keep) until it is at most lowWater of it. c.mu is held.
func (c *Cache) scanLocked(keep *cas.Blob) error {
	c.scans++
	var files []cached
	var total int64
	keepPath := ""
	if keep != nil {
		keepPath = c.Path(*keep)
	}
	err := filepath.WalkDir(filepath.Join(c.dir, cas.BlobsDir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		total += fi.Size()
		if p != keepPath {
			files = append(files, cached{p, fi.Size(), fi.ModTime()})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("s3blob: cache: scan %s: %w", c.dir, err)
	}
	if tmps, err := os.ReadDir(filepath.Join(c.dir, "tmp")); err == nil {
		for _, t := range tmps {
			c.removeDeadTemp(filepath.Join(c.dir, "tmp", t.Name()))
		}
	}
	if total > c.max {
		low := int64(float64(c.max) * lowWater)
		slices.SortFunc(files, func(a, b cached) int { return a.mtime.Compare(b.mtime) })
		for _, f := range files {
			if total <= low {
				break
			}
			if err := os.Remove(f.path); err == nil || errors.Is(err, fs.ErrNotExist) {
				total -= f.size
			}
		}
	}
	c.total, c.sinceScan, c.scanned = total, 0, true
	return nil
}

// removeDeadTemp removes a temp file whose writer is gone: one whose lock it
// can take (a live writer holds its lock until it renames or removes the
// file), or where files are not locked, one older than staleTemp.
func (c *Cache) removeDeadTemp(p string) {
	if !cas.TempLocking {
		if fi, err := os.Lstat(p); err == nil && c.now().Sub(fi.ModTime()) > staleTemp {
			os.Remove(p)
		}
		return
	}
	f, err := openNoFollow(p, os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			// Not a file this cache made (a symlink, a fifo): remove it.
			os.Remove(p)
		}
		return
	}
	defer f.Close()
	if cas.TryLockTempFile(f) != nil {
		return
	}
	os.Remove(p)
}
