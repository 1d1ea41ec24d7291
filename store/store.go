// Package store is the content-addressed store that the offload hook
// writes to. Start at Open, then hand the store to hook.New; casctl and the
// MCP server use the rest: List, Show, Stats, Prune, GC, Verify, Pack,
// Repair, Copy.
//
// A store joins the blobs (package cas) and the index of every key
// (package index): every write stores its blobs durably first and records
// its parts after, and gc never removes a blob between the two, so that no
// recorded part ever names a missing blob. The blobs live in a local
// directory, or in an S3-compatible object store shared by many machines
// with the index in PostgreSQL; Open chooses once, and every method works
// the same on both, except the few (Pack, Repair) only a local directory
// has.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/internal/quiesce"
	"github.com/toolcas/toolcas/s3blob"
)

// Files at the store root besides cas's.
const (
	IndexFile = "index.db"
	LockFile  = "gc.lock"
)

// DefaultDir is the store a command uses when told none.
const DefaultDir = "tool_results"

// ErrNoStore is returned by Open when the directory holds no store.
var ErrNoStore = cas.ErrNoStore

// Errors Open returns for a location or an index URL that is malformed
// (rather than unreachable): the caller's mistake, not the store's.
var (
	ErrInvalidIndexURL = index.ErrInvalidURL
	ErrInvalidLocation = s3blob.ErrBadURL
)

// Store is a toolcas store: blobs on disk or in an object store, keys in
// SQLite (IndexFile beside the blobs) or in PostgreSQL (WithIndexURL). It
// implements hook.Store and is safe for concurrent use by many goroutines
// and many processes.
type Store struct {
	eng engine
	ix  *index.Index
	// dir is the store root's absolute path; for a store in an object
	// store, its local cache's.
	dir      string
	now      func() time.Time
	readOnly bool
	// recovered are the parts Open dropped (see Recovered).
	recovered []index.Part
	// auto is the automatic maintenance that writes start.
	auto autoMaintain
}

var _ hook.StreamStore = (*Store)(nil)

// Open opens the store at location: a directory, or an S3-compatible object
// store, s3://BUCKET[/PREFIX][?endpoint=URL][&region=R] (s3blob.ParseURL's
// syntax).
//
// A store in an object store keeps its keys in a shared PostgreSQL index:
// WithCreate needs WithIndexURL, which the store then records beside its
// marker, under the prefix, so that later opens need no index URL; it
// keeps recent blobs in a local read-through cache (WithCacheDir), whose
// files are what its pointers name. Credentials, region and endpoint come
// the standard AWS way (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_REGION, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL), or from the URL's
// endpoint= and region=.
func Open(ctx context.Context, location string, opts ...Option) (*Store, error) {
	c := defaultConfig()
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	remote := IsRemoteLocation(location)
	if err := c.check(remote, location); err != nil {
		return nil, err
	}
	s := &Store{now: c.now, readOnly: c.readOnly}
	s.auto.off = c.noAutoMaintain || c.readOnly
	s.auto.ctx, s.auto.cancel = context.WithCancel(context.Background())
	if remote {
		e, err := openShared(ctx, location, &c)
		if err != nil {
			return nil, withCreateHint(err, &c)
		}
		s.eng, s.ix, s.dir = e, e.ix, e.be.Cache().Dir()
	} else {
		e, err := openLocal(ctx, location, &c)
		if err != nil {
			return nil, withCreateHint(err, &c)
		}
		s.eng, s.ix, s.dir, s.recovered = e, e.ix, e.dir, e.recovered
	}
	if testHooks != nil {
		testHooks.opened(&c, s.eng)
	}
	return s, nil
}

// withCreateHint adds to Open's ErrNoStore how to make a store, when the
// caller did not ask for one.
func withCreateHint(err error, c *config) error {
	if c.create || c.readOnly || !errors.Is(err, ErrNoStore) {
		return err
	}
	return fmt.Errorf("%w (store.WithCreate() makes a new one)", err)
}

// IsRemoteLocation reports whether a store location names an object store
// (s3://BUCKET/PREFIX) rather than a directory.
func IsRemoteLocation(location string) bool {
	return strings.HasPrefix(location, "s3://")
}

// Exists reports whether dir holds a store.
func Exists(dir string) bool { return cas.Exists(dir) }

// Flush commits the rows that wait for a commit they share with the writes
// after them: a store without syncs (sync=none) on SQLite returns from a
// write once its rows are recorded, and commits them within
// index.DeferredCommitAfter, or at Flush or Close. This process reads them
// at once; other processes, once committed. A crash before the commit
// loses them (their blobs stay, for gc). Without rows waiting, Flush does
// nothing.
func (s *Store) Flush() error { return s.ix.CommitDeferred() }

// FoldStaged folds the steps that writes without syncs staged, by any
// process, into the index's rows, as the next read does anyway (see
// index.FoldStaged): for a caller that would rather pay for it now than
// at that read, such as before a process that reads the store read-only.
func (s *Store) FoldStaged(ctx context.Context) error { return s.ix.FoldStaged(ctx) }

// Close closes the index and the blobs.
func (s *Store) Close() error {
	s.stopAuto()
	return s.eng.close()
}

// Dir returns the store root's absolute path; for a store in an object
// store, the absolute path of its local cache, under which its pointers'
// paths are.
func (s *Store) Dir() string { return s.dir }

// Location returns where the store is: its directory, or its s3:// URL.
func (s *Store) Location() string { return s.eng.location() }

// Remote reports whether the store keeps its blobs in an object store.
func (s *Store) Remote() bool { return IsRemoteLocation(s.eng.location()) }

// Durability returns the name of the store's durability: "full", "none" or
// DurabilityRecentKeysMayBeLost.
func (s *Store) Durability() string { return s.eng.durability() }

// ReadOnly reports whether the store was opened read-only.
func (s *Store) ReadOnly() bool { return s.readOnly }

// Name is the store's name in the hook's warnings.
func (s *Store) Name() string { return "CASStore" }

// AcceptsBinary reports true: blobs hold any bytes.
func (s *Store) AcceptsBinary() bool { return true }

// Path returns the absolute path of a blob's file: in the store, or in the
// cache of a store in an object store.
func (s *Store) Path(b cas.Blob) string { return s.eng.backend().Path(b) }

// Barriers returns how many file-system barriers this Store's writes have
// issued since Open: blob files and shard directories synced, and one for
// each index transaction that synced its log. The index's checkpoints,
// which sync the database now and then, are not counted. Benchmarks divide
// it by the steps written. On a store in an object store, whose blobs and
// index live on servers that make them durable, it is 0.
func (s *Store) Barriers() int64 { return s.eng.barriers() }

// Recovered returns the parts that Open dropped because their blob did
// not survive an unclean shutdown whole (a power cut between a write's row
// commit and its last sync; no caller was told of them).
func (s *Store) Recovered() []Part { return s.recovered }

// Checkpoint folds the index's write-ahead log into the database file, so
// that its size on disk shows the data rather than recent writes.
func (s *Store) Checkpoint(ctx context.Context) error {
	return s.ix.Checkpoint(ctx)
}

// VacuumResult says what VacuumIndex did: the index database's size
// before and after, and its free pages before, in bytes.
type VacuumResult = index.VacuumResult

// VacuumIndex rewrites the index database so that each table's rows lie
// together in the order of their keys (see index.Vacuum): reads of many
// rows, as grep makes, then touch fewer of its pages. Writers wait while
// it runs. It returns ErrReadOnly on a store opened read-only, and an
// error wrapping errors.ErrUnsupported for an index in PostgreSQL.
func (s *Store) VacuumIndex(ctx context.Context) (VacuumResult, error) {
	if _, err := s.writer("vacuum"); err != nil {
		return VacuumResult{}, err
	}
	return s.ix.Vacuum(ctx)
}

// Quarantined returns the blobs Repair moved aside as corrupt, whose rows
// wait for the same content to be written again; none on a store without
// repair.
func (s *Store) Quarantined(ctx context.Context) (map[cas.Blob]bool, error) {
	if q, ok := s.eng.(quarantiner); ok {
		return q.quarantined(ctx)
	}
	return map[cas.Blob]bool{}, nil
}

// IndexLocation returns where the store keeps its index: the path of its
// SQLite file, or the URL of its PostgreSQL database without a password.
func (s *Store) IndexLocation() string { return s.ix.Path() }

// SharedIndex reports whether the index is in PostgreSQL.
func (s *Store) SharedIndex() bool { return s.ix.IsPostgres() }

// A benchmark timing one write at a time waits for what the store's blobs
// do in the background (quiesce.Wait): a local store's temp files made
// ahead.
func init() {
	quiesce.Register(func(s *Store) { quiesce.Wait(s.eng.backend()) })
}
