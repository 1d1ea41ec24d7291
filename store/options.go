package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/option"
	"github.com/toolcas/toolcas/s3blob"
)

// An Option configures Open.
type Option func(*config) error

type config struct {
	durability cas.Durability
	// recentKeysMayBeLost: the index commits without a sync.
	recentKeysMayBeLost bool
	create              bool
	readOnly            bool
	now                 func() time.Time
	lockWait            time.Duration
	reserve             int64
	maintenance         bool
	noAutoMaintain      bool
	// mappedIndex is WithMappedIndex's limit, 0 for none.
	mappedIndex int64
	// indexURL is WithIndexURL's URL, "" for the default.
	indexURL string
	// The options of a store in an object store.
	cacheDir string
	cacheMax int64
	s3opts   []s3blob.Option
}

// defaultConfig is what Open uses where no option says otherwise.
func defaultConfig() config {
	return config{durability: cas.SyncFull, now: time.Now, lockWait: DefaultLockTimeout, reserve: autoReserve}
}

// check refuses options that contradict each other, or the location.
func (c *config) check(remote bool, location string) error {
	switch {
	case c.readOnly && c.create:
		return errors.New("ReadOnly and WithCreate both given")
	case !remote && (c.cacheDir != "" || c.cacheMax != 0 || len(c.s3opts) > 0):
		return fmt.Errorf("%s is a directory: a cache and object store options are for an s3:// store", location)
	}
	return nil
}

// The durabilities WithDurability takes.
const (
	// SyncFull: a write returns once its blob and its row are on stable
	// storage. The default.
	SyncFull = cas.SyncFull
	// SyncNone: nothing waits for stable storage; for bulk loads and
	// benchmarks. A crash of the machine may lose or damage recent writes.
	SyncNone = cas.SyncNone
)

// WithDurability sets whether writes wait for stable storage (default
// SyncFull).
func WithDurability(d cas.Durability) Option {
	return option.Check(d == cas.SyncFull || d == cas.SyncNone, func(c *config) { c.durability = d }, "invalid durability %d", int(d))
}

// DurabilityRecentKeysMayBeLost is the name, in a hook's configuration and
// casctl's --durability, of what RecentKeysMayBeLostOnPowerCut gives.
const DurabilityRecentKeysMayBeLost = "recent-keys-may-be-lost"

// RecentKeysMayBeLostOnPowerCut trades one guarantee for a cheaper write:
// every blob is still durable before a write returns (file and directory
// synced), but the index row is committed without a sync of its log
// (SQLite's synchronous=NORMAL). A process killed at any point loses
// nothing. A power cut or an operating system crash may lose the keys of
// the writes since the index's last checkpoint: a pointer returned before
// it still names a file that holds its bytes, but its key may no longer
// resolve, and the blob is then an orphan that gc removes after its grace
// period. The default (cas.SyncFull without this option) gives up nothing.
func RecentKeysMayBeLostOnPowerCut() Option {
	return option.Set(func(c *config) { c.recentKeysMayBeLost = true })
}

// DurabilityOptions returns the options a durability's name stands for:
// "full" (the default), "none" (cas.SyncNone) or
// DurabilityRecentKeysMayBeLost.
func DurabilityOptions(name string) ([]Option, error) {
	if name == DurabilityRecentKeysMayBeLost {
		return []Option{WithDurability(cas.SyncFull), RecentKeysMayBeLostOnPowerCut()}, nil
	}
	d, err := cas.ParseDurability(name)
	if err != nil {
		return nil, fmt.Errorf("unknown durability %q (want full, none or %s)", name, DurabilityRecentKeysMayBeLost)
	}
	return []Option{WithDurability(d)}, nil
}

// durabilityName is the name DurabilityOptions takes for what c says.
func (c *config) durabilityName() string {
	if c.recentKeysMayBeLost && c.durability == cas.SyncFull {
		return DurabilityRecentKeysMayBeLost
	}
	return c.durability.String()
}

// WithCreate makes Open create the store if the directory holds none.
func WithCreate() Option {
	return option.Set(func(c *config) { c.create = true })
}

// WithClock replaces the clock that stamps rows and ages blobs, so that
// tests of gc's grace period advance time instead of sleeping.
func WithClock(now func() time.Time) Option {
	return option.Check(now != nil, func(c *config) { c.now = now }, "nil clock")
}

// WithLockTimeout sets how long a write waits for gc to release the store
// before it fails with ErrLocked (default DefaultLockTimeout), unless the
// caller's context ends sooner; zero means the context alone decides.
func WithLockTimeout(d time.Duration) Option {
	return option.Check(d >= 0, func(c *config) { c.lockWait = d }, "negative lock timeout %v", d)
}

// ReadOnly opens the store for reading only: it creates and changes
// nothing, so that a store on a read-only mount or without write
// permission can be listed, read, summed up and verified (verify then
// records nothing). Writes, prune, gc, pack and repair fail with
// ErrReadOnly.
func ReadOnly() Option {
	return option.Set(func(c *config) { c.readOnly = true })
}

// WithIndexURL makes Open use the index in the PostgreSQL database that
// rawURL (postgres://USER@HOST:PORT/DB) names, instead of IndexFile beside
// the blobs, which stay in the directory. With WithCreate the database is
// migrated and the store records the URL, without its password, in
// IndexRecordFile; later opens without this option use the recorded URL,
// and an open naming another index fails with ErrIndexMismatch. The
// password comes from the URL, from PGPASSWORD or from ~/.pgpass, and is
// never written to disk. An empty URL means the default.
func WithIndexURL(rawURL string) Option {
	return func(c *config) error {
		if rawURL != "" {
			if _, err := indexURLShown(rawURL); err != nil {
				return err
			}
		}
		c.indexURL = rawURL
		return nil
	}
}

// WithReserve sets the size of the reserve file, which otherwise grows
// with the index from MinReserve to DefaultReserve; zero keeps none.
func WithReserve(bytes int64) Option {
	return option.Check(bytes >= 0, func(c *config) { c.reserve = bytes }, "negative reserve %d", bytes)
}

// Maintenance opens the store to free space: when the index cannot be
// opened for want of space, the reserve file is released first. gc and
// prune open the store so; GC and Prune make the reserve again when done.
func Maintenance() Option {
	return option.Set(func(c *config) { c.maintenance = true })
}

// WithoutAutoMaintenance stops the store's writes from starting
// maintenance on their own when the store is past its retention policy
// (see Store.Maintain); casctl gc and Maintain still apply it.
func WithoutAutoMaintenance() Option {
	return option.Set(func(c *config) { c.noAutoMaintain = true })
}

// WithMappedIndex has a local index read through a memory map of up to
// limit bytes (see index.WithMappedReads), and the tables of contents of
// a local store's packs too (see cas.WithMappedTables): for a short-lived
// process that reads many rows and tables once, as casctl grep does. It
// does nothing for an index in PostgreSQL.
func WithMappedIndex(limit int64) Option {
	return option.Check(limit > 0, func(c *config) { c.mappedIndex = limit }, "mapped index of %d bytes: want a positive limit", limit)
}

// WithCacheDir sets the local read-through cache of a store in an object
// store: a directory of plain blob files at their digest paths, which
// pointers name, bounded (WithCacheSize) and evicting the least recently
// used. Several stores and processes may share one. The default is
// toolcas/BUCKET/HASH under the user's cache directory, HASH naming the
// endpoint and prefix (DefaultCacheDir). A directory store has no cache:
// Open refuses the option there.
func WithCacheDir(dir string) Option {
	return func(c *config) error {
		if dir == "" {
			return errors.New("empty cache directory")
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fmt.Errorf("cache directory %s: %w", dir, err)
		}
		c.cacheDir = abs
		return nil
	}
}

// WithCacheSize bounds the read-through cache of a store in an object
// store (default s3blob.DefaultCacheBytes).
func WithCacheSize(bytes int64) Option {
	return option.Check(bytes > 0, func(c *config) { c.cacheMax = bytes }, "cache size %d: want a positive number of bytes", bytes)
}

// WithS3Options passes options to s3blob.Open for a store in an object
// store: static credentials, an HTTP client, a part size.
func WithS3Options(opts ...s3blob.Option) Option {
	return func(c *config) error {
		c.s3opts = append(c.s3opts, opts...)
		return nil
	}
}
