// Package cas stores blobs by the BLAKE3-256 digest of their bytes in a
// sharded directory, durably and safely for many processes at once.
//
// A blob lives at blobs/<first byte of digest in hex>/<64 hex digits><ext>
// under the store root. A blob becomes visible under its final name only once
// its bytes are durable, every read checks the bytes against the name, and
// nothing outside the root is ever read or written. The package knows files
// only; the index of logical keys lives elsewhere.
//
// Most programs never import cas: store.Open joins it to the index, and
// hook.New writes through the store. Its types (Digest, Blob) appear in
// what store returns.
package cas

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/toolcas/toolcas/internal/option"
)

// MarkerFile is the layout marker at the store root.
const MarkerFile = "toolcas.json"

// Format is the on-disk layout version this build writes and reads.
const Format = 1

// Durability says whether writes wait for stable storage.
type Durability int

const (
	// SyncFull makes every put durable before it returns: file fsync before
	// the rename, directory fsync after. It is the default.
	SyncFull Durability = iota
	// SyncNone skips every fsync, for bulk loads and benchmarks. A crash may
	// lose recent blobs, but never exposes a partly written one under its
	// final name.
	SyncNone
)

// String returns "full" or "none".
func (d Durability) String() string {
	switch d {
	case SyncFull:
		return "full"
	case SyncNone:
		return "none"
	}
	return fmt.Sprintf("Durability(%d)", int(d))
}

// ParseDurability parses "full" or "none".
func ParseDurability(s string) (Durability, error) {
	switch s {
	case "full":
		return SyncFull, nil
	case "none":
		return SyncNone, nil
	}
	return 0, fmt.Errorf("unknown durability %q (want full or none)", s)
}

// An Option configures Open.
type Option func(*config) error

type config struct {
	durability Durability
	create     bool
	now        func() time.Time
	wrapFS     func(fileSystem) fileSystem
	readOnly   bool
	tempPool   int
	mapped     bool
}

// WithDurability sets whether puts wait for stable storage (default SyncFull).
func WithDurability(d Durability) Option {
	return option.Check(d == SyncFull || d == SyncNone, func(c *config) { c.durability = d }, "invalid durability %d", int(d))
}

// WithCreate makes Open create the store when the directory holds none.
func WithCreate() Option {
	return option.Set(func(c *config) { c.create = true })
}

// WithClock replaces the clock used to refresh blob ages, so that tests of
// grace periods advance time instead of sleeping.
func WithClock(now func() time.Time) Option {
	return option.Check(now != nil, func(c *config) { c.now = now }, "nil clock")
}

// WithMappedTables has the tables of contents of packs read through a
// memory map of their files rather than copied into memory: for a
// short-lived process that reads many of them once, as casctl grep does (a
// search of a store of 134,000 blobs read 2.4 MiB of them; in new memory,
// whose pages a virtual machine makes dear, the copies cost it about 4 %
// of its time). A pack file is never changed in place, only replaced, but
// one that something else truncates while it is mapped can end the
// process (SIGBUS), as a database read through a map can; systems without
// memory maps read tables as usual.
func WithMappedTables() Option {
	return option.Set(func(c *config) { c.mapped = true })
}

// ReadOnly opens the store for reading only: Open creates nothing (not even
// a missing shard directory), so that a store on a read-only mount, or
// without write permission, can be read.
func ReadOnly() Option {
	return option.Set(func(c *config) { c.readOnly = true })
}

// Store is a content-addressed blob store rooted at a directory. It is safe for
// concurrent use by many goroutines and many processes.
type Store struct {
	dir        string
	root       *os.Root
	rootFS     *rootFS
	fs         fileSystem
	durability Durability
	now        func() time.Time
	packs      packSet
	readOnly   bool
	// mapped says tables of contents are read through memory maps
	// (WithMappedTables).
	mapped bool
	// syncs counts the barriers the write path issued.
	syncs atomic.Int64
	// pool holds temp files made ahead (WithTempPool).
	pool tempPool
	// synced remembers the young blob files this Store synced itself.
	synced syncedBlobs
	// gauge says whether a barrier is cheap now (BarrierCheap).
	gauge barrierGauge
	// awaiting holds the blobs named without a sync until a barrier has
	// checked them (see awaitedSet).
	awaiting awaitedSet
}

// Syncs returns how many barriers (fsync of a blob file or a shard
// directory, or one syncfs for a batch) puts have issued since Open: what
// durability costs, for benchmarks. Packing and creating the store are not
// counted.
func (s *Store) Syncs() int64 { return s.syncs.Load() }

// Open opens the store at dir. Without WithCreate, a directory that holds no
// store gives ErrNoStore; a store of a newer format gives ErrNewerFormat.
// A new store gets its 256 shard directories at once; in an existing one, a
// missing shard directory is made by the first write into it.
func Open(ctx context.Context, dir string, opts ...Option) (*Store, error) {
	c := config{durability: SyncFull, now: time.Now}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	if c.create {
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return nil, fmt.Errorf("create store %s: %w", abs, err)
		}
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s: the directory does not exist", ErrNoStore, abs)
		}
		return nil, fmt.Errorf("open %s: %w", abs, err)
	}
	if !c.readOnly {
		// In the background: the writes go on below 64 descriptors meanwhile.
		go growFDTable(abs)
	}
	rfs := newRootFS(root)
	s := &Store{dir: abs, root: root, rootFS: rfs, fs: rfs, durability: c.durability, now: c.now}
	s.gauge.unwritten, s.gauge.now = UnwrittenBytes, c.now
	if c.wrapFS != nil {
		s.fs = c.wrapFS(s.fs)
	}
	if c.readOnly && c.create {
		root.Close()
		return nil, errors.New("ReadOnly and WithCreate both given")
	}
	s.readOnly, s.mapped = c.readOnly, c.mapped
	if !c.readOnly && tempLocking {
		s.pool.want = c.tempPool
	}
	if err := s.init(c.create); err != nil {
		root.Close()
		return nil, err
	}
	return s, nil
}

// Exists reports whether dir holds a store's layout marker.
func Exists(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, MarkerFile))
	return err == nil && fi.Mode().IsRegular()
}

func (s *Store) init(create bool) error {
	b, err := s.root.ReadFile(MarkerFile)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !create:
		return fmt.Errorf("%w at %s: no %s (create one with casctl init)", ErrNoStore, s.dir, MarkerFile)
	case errors.Is(err, fs.ErrNotExist):
		if err := s.writeMarker(); err != nil {
			return err
		}
		return s.makeShards()
	case err != nil:
		return fmt.Errorf("read %s: %w", filepath.Join(s.dir, MarkerFile), err)
	default:
		if err := CheckMarker(b, filepath.Join(s.dir, MarkerFile), s.dir); err != nil {
			return err
		}
	}
	if s.readOnly {
		return nil
	}
	return s.makeBlobsDir()
}

// writeMarker writes the layout marker atomically and durably; several
// processes creating one store at once write identical bytes.
func (s *Store) writeMarker() error {
	b := MarkerContent()
	tmp := fmt.Sprintf("%s%s%s", tempPrefix, MarkerFile, randomSuffix())
	f, err := s.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create store %s: %w", s.dir, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, MarkerFile)
	}
	if err == nil {
		err = s.fs.SyncDir(".")
	}
	if err != nil {
		s.fs.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Join(s.dir, MarkerFile), err)
	}
	return nil
}

// makeBlobsDir creates blobs/ if it is missing, syncing the root. Shard
// directories missing from an existing store are made by the first write
// into each (remakeShard): packing removes the ones it empties, and 256
// empty directories would cost a store of cold, packed blobs more blocks
// than its packs.
func (s *Store) makeBlobsDir() error {
	created, err := s.mkdir(BlobsDir)
	if err != nil {
		return err
	}
	if created {
		if err := s.fs.SyncDir("."); err != nil {
			return fmt.Errorf("sync %s: %w", s.dir, err)
		}
	}
	return nil
}

// makeShards creates blobs/ and its 256 shard directories for a new store,
// syncing the parent of every directory it creates.
func (s *Store) makeShards() error {
	if err := s.makeBlobsDir(); err != nil {
		return err
	}
	any := false
	for i := 0; i < 256; i++ {
		c, err := s.mkdir(shardName(i))
		if errors.Is(err, errNotDir) {
			// Something stands where a shard directory should be: the store
			// still opens, verify reports it, and writes to that shard fail.
			continue
		}
		if err != nil {
			return err
		}
		any = any || c
	}
	if any {
		if err := s.fs.SyncDir(BlobsDir); err != nil {
			return fmt.Errorf("sync %s: %w", filepath.Join(s.dir, BlobsDir), err)
		}
	}
	return nil
}

func shardName(i int) string {
	const hexdigits = "0123456789abcdef"
	return BlobsDir + "/" + string([]byte{hexdigits[i>>4], hexdigits[i&15]})
}

// mkdir creates a directory unless it exists, reporting whether it did.
func (s *Store) mkdir(name string) (bool, error) {
	err := s.fs.Mkdir(name, 0o755)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrExist) {
		fi, serr := s.fs.Lstat(name)
		if serr == nil && fi.IsDir() {
			return false, nil
		}
		return false, fmt.Errorf("%s exists and %w", filepath.Join(s.dir, name), errNotDir)
	}
	return false, fmt.Errorf("create %s: %w", filepath.Join(s.dir, name), err)
}

var errNotDir = errors.New("is not a directory")

// remakeShard creates a blob's shard directory on the first write into it,
// or after packing removed it, syncing blobs/ so that the new directory is
// durable.
func (s *Store) remakeShard(shard string) error {
	created, err := s.mkdir(BlobsDir + "/" + shard)
	if err != nil {
		return err
	}
	if created && s.durability == SyncFull {
		if err := s.fs.SyncDir(BlobsDir); err != nil {
			return fmt.Errorf("sync %s: %w", filepath.Join(s.dir, BlobsDir), err)
		}
	}
	return nil
}

// Dir returns the store root's absolute path.
func (s *Store) Dir() string { return s.dir }

// ReadOnly reports whether the store was opened read-only.
func (s *Store) ReadOnly() bool { return s.readOnly }

// Durability returns the store's durability setting.
func (s *Store) Durability() Durability { return s.durability }

// Path returns the absolute path of a blob's file.
func (s *Store) Path(b Blob) string {
	if CheckExt(b.Ext) != nil {
		// Not a name the store writes: Join cleans whatever it holds.
		return filepath.Join(s.dir, filepath.FromSlash(b.RelPath()))
	}
	return b.pathIn(s.dir, filepath.Separator) // s.dir is clean (filepath.Abs)
}

// Now returns the store clock's current time.
func (s *Store) Now() time.Time { return s.now() }

// Close releases the store's handle on its root directory.
func (s *Store) Close() error {
	s.closePool()
	s.awaiting.drop(func(*awaited) bool { return false })
	s.rootFS.close()
	return s.root.Close()
}

// withFileSystem wraps the store's file system; tests use it to observe the
// order of calls and to inject failures.
func withFileSystem(wrap func(fileSystem) fileSystem) Option {
	return option.Set(func(c *config) { c.wrapFS = wrap })
}
