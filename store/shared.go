package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/s3blob"
)

// ErrNeedSharedIndex is returned by Open when a store in an object store
// would be created, or opened, without a PostgreSQL index: the keys of a
// store that many machines share must be shared too.
var ErrNeedSharedIndex = errors.New("a store in an object store needs a shared index")

// sharedEngine keeps a store's blobs in an S3-compatible object store that
// many machines share (package s3blob), behind a local read-through cache
// whose files its pointers name, and its keys in a shared PostgreSQL
// index. No file lock spans machines: writers and gc order themselves with
// leases in the index (see gc_shared.go).
type sharedEngine struct {
	be  *s3blob.Backend
	ix  *index.Index
	now func() time.Time
	// lockTimeout is how long a write waits for gc's batch.
	lockTimeout time.Duration
	// leases gives writes their blob leases and gc its sweep lock.
	leases leaser
	// slots bounds the blob leases this process holds at once, each on a
	// database connection of its own, so that writes never take every
	// connection of the index's pool and wait for one to commit.
	slots chan struct{}
	// staging holds streamed puts' content while its type is found out.
	staging string
	// sweepWindow is how long gc may delete a batch's objects (see
	// remoteSweepWindow).
	sweepWindow    time.Duration
	durabilityName string
}

var _ engine = (*sharedEngine)(nil)

// remotePuts is how many blobs of one write go up at once.
const remotePuts = 4

// maxLeases is how many writes of one Store hold a blob lease at once; the
// index's pool has 8 connections.
const maxLeases = 4

// openShared opens (with WithCreate, makes) the store in the object store
// location names.
func openShared(ctx context.Context, location string, c *config) (*sharedEngine, error) {
	loc, err := s3blob.ParseURL(location)
	if err != nil {
		return nil, err
	}
	be, err := openObjects(ctx, loc, c)
	if err != nil {
		return nil, err
	}
	ix, err := openSharedIndex(ctx, be, c)
	if err != nil {
		be.Close()
		return nil, err
	}
	e := &sharedEngine{be: be, ix: ix, now: c.now, lockTimeout: c.lockWait, leases: indexLeases{ix},
		slots: make(chan struct{}, maxLeases), staging: filepath.Join(be.Cache().Dir(), "staging"),
		sweepWindow: remoteSweepWindow, durabilityName: c.durabilityName()}
	if !c.readOnly {
		if err := os.MkdirAll(e.staging, 0o755); err != nil {
			e.close()
			return nil, fmt.Errorf("cache: %w", err)
		}
		removeOldStaging(e.staging, c.now())
	}
	return e, nil
}

// openObjects opens the object store at loc with its cache, and makes it
// when c says to create the store.
func openObjects(ctx context.Context, loc s3blob.Location, c *config) (*s3blob.Backend, error) {
	cacheDir, cacheMax := c.cacheDir, c.cacheMax
	if cacheDir == "" {
		var err error
		if cacheDir, err = DefaultCacheDir(loc); err != nil {
			return nil, err
		}
	}
	if cacheMax == 0 {
		cacheMax = s3blob.DefaultCacheBytes
	}
	opts := append([]s3blob.Option{s3blob.WithCache(cacheDir, cacheMax)}, c.s3opts...)
	be, err := s3blob.Open(ctx, loc, opts...)
	if err != nil && c.create && (errors.Is(err, cas.ErrNoStore) || errors.Is(err, s3blob.ErrNoBucket)) {
		if c.indexURL == "" {
			return nil, needIndex(loc, "create")
		}
		if _, err := indexURLShown(c.indexURL); err != nil {
			return nil, err
		}
		be, err = s3blob.Open(ctx, loc, append(opts, s3blob.WithCreate())...)
	}
	if err != nil {
		return nil, err
	}
	return be, nil
}

// openSharedIndex opens the PostgreSQL index of the store in be, and
// records it beside the store's marker when it is being made. A put
// returns once its object is stored, whatever the durability: durability
// says how the index commits (without waiting for the database's log to be
// flushed, for none and the recent keys mode).
func openSharedIndex(ctx context.Context, be *s3blob.Backend, c *config) (*index.Index, error) {
	where, record, err := remoteIndexLocation(ctx, be, c)
	if err != nil {
		return nil, err
	}
	opts := []index.Option{index.WithDurability(c.durability), index.WithClock(c.now)}
	if c.recentKeysMayBeLost && c.durability == cas.SyncFull {
		opts = append(opts, index.RecentKeysMayBeLostOnPowerCut())
	}
	if c.readOnly {
		opts = append(opts, index.ReadOnly())
	}
	if c.mappedIndex > 0 {
		opts = append(opts, index.WithMappedReads(c.mappedIndex))
	}
	if !newIndexAllowed(ctx, c, be.Walk, nil) {
		opts = append(opts, index.MustExist())
	}
	ix, err := index.Open(ctx, where, opts...)
	if err != nil {
		return nil, indexError(be.Location().String(), where, err)
	}
	if record != "" {
		// Recorded once the database is reachable and migrated, so that a
		// mistyped URL leaves no record behind.
		if err := writeRemoteRecord(ctx, be, record); err != nil {
			ix.Close()
			return nil, err
		}
	}
	return ix, nil
}

// DefaultCacheDir returns the cache directory of a store in an object
// store when none is given: toolcas/BUCKET/HASH under the user's cache
// directory, HASH the first 16 hex digits of the SHA-256 of the endpoint
// and prefix, so that stores of one bucket keep apart.
func DefaultCacheDir(loc s3blob.Location) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache directory (give one with --cache or WithCacheDir): %w", err)
	}
	sum := sha256.Sum256([]byte(loc.Endpoint + "\x00" + loc.Prefix))
	return filepath.Join(base, "toolcas", loc.Bucket, hex.EncodeToString(sum[:8])), nil
}

// needIndex is the error for a store in an object store opened with no
// PostgreSQL index to use.
func needIndex(loc s3blob.Location, verb string) error {
	return fmt.Errorf("%w: %s %s with --index postgres://USER@HOST:PORT/DB (WithIndexURL): its keys must be where every machine sees them",
		ErrNeedSharedIndex, verb, loc)
}

// remoteIndexLocation decides which index the store in be uses, as
// indexLocation does for a directory: the URL to open, the URL to record
// ("" for none), or why not.
func remoteIndexLocation(ctx context.Context, be *s3blob.Backend, c *config) (open, record string, err error) {
	rec, err := readRemoteRecord(ctx, be)
	if err != nil {
		return "", "", err
	}
	loc := be.Location()
	if c.indexURL == "" {
		if rec == "" {
			return "", "", needIndex(loc, "initialise it: casctl --store "+loc.String()+" init")
		}
		return rec, "", nil
	}
	shown, err := indexURLShown(c.indexURL)
	if err != nil {
		return "", "", err
	}
	switch {
	case rec != "" && rec != shown:
		return "", "", fmt.Errorf("%w: %s keeps its index at %s (recorded in %s), not at %s",
			ErrIndexMismatch, loc, rec, IndexRecordFile, shown)
	case rec != "":
		return c.indexURL, "", nil
	case !c.create:
		return "", "", fmt.Errorf("%w: %s records no index (create the store with it: casctl init --index URL)", ErrIndexMismatch, loc)
	}
	return c.indexURL, shown, nil
}

// readRemoteRecord returns the index URL the store in be records, "" when
// none.
func readRemoteRecord(ctx context.Context, be *s3blob.Backend) (string, error) {
	b, err := be.ReadMeta(ctx, IndexRecordFile)
	if errors.Is(err, cas.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	url, err := parseIndexRecord(b)
	if err != nil {
		return "", fmt.Errorf("%s in %s: %w", IndexRecordFile, be.Location(), err)
	}
	return url, nil
}

// writeRemoteRecord records shown as the store's index, unless another
// process recorded one first, which must then be the same.
func writeRemoteRecord(ctx context.Context, be *s3blob.Backend, shown string) error {
	b, _ := json.MarshalIndent(indexRecord{URL: shown}, "", "  ")
	wrote, err := be.CreateMeta(ctx, IndexRecordFile, append(b, '\n'))
	if err != nil {
		return fmt.Errorf("record the index: %w", err)
	}
	if wrote {
		return nil
	}
	rec, err := readRemoteRecord(ctx, be)
	if err != nil {
		return err
	}
	if rec != shown {
		return fmt.Errorf("%w: %s keeps its index at %s, not at %s", ErrIndexMismatch, be.Location(), rec, shown)
	}
	return nil
}

// removeOldStaging removes the staged content that puts which died left
// behind, a day after.
func removeOldStaging(dir string, now time.Time) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		if fi, err := de.Info(); err == nil && fi.Mode().IsRegular() && now.Sub(fi.ModTime()) > 24*time.Hour {
			os.Remove(filepath.Join(dir, de.Name()))
		}
	}
}

func (e *sharedEngine) backend() cas.Backend      { return e.be }
func (e *sharedEngine) location() string          { return e.be.Location().String() }
func (e *sharedEngine) durability() string        { return e.durabilityName }
func (e *sharedEngine) barriers() int64           { return 0 }
func (e *sharedEngine) freeSpace() (func(), bool) { return func() {}, false }

func (e *sharedEngine) close() error {
	return errors.Join(e.ix.Close(), e.be.Close())
}

// name names an object of the store by its URL.
func (e *sharedEngine) name(rel string) string {
	loc := e.be.Location()
	loc.Endpoint, loc.Region = "", ""
	return strings.TrimSuffix(loc.String(), "/") + "/" + rel
}

// write puts every blob of a step (durable once Put returns), a few at a
// time, then commits every row in one transaction, all under a blob lease.
func (e *sharedEngine) write(ctx context.Context, parts []index.NewPart, data [][]byte) ([]cas.PutResult, []index.Recorded, error) {
	var recs []index.Recorded
	puts := make([]cas.PutResult, len(parts))
	err := e.guard(ctx, func(ctx context.Context) ([]cas.PutResult, error) {
		return puts, e.putAll(ctx, parts, data, puts)
	}, func(ctx context.Context) (err error) {
		for i := range parts {
			parts[i].Blob = puts[i].Blob
		}
		recs, err = e.ix.Record(ctx, parts)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return puts, recs, nil
}

// putAll puts the blobs of a step into puts, remotePuts at a time: each
// put is a round trip or two to the object store.
func (e *sharedEngine) putAll(ctx context.Context, parts []index.NewPart, data [][]byte, puts []cas.PutResult) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(parts))
	sem := make(chan struct{}, remotePuts)
	var wg sync.WaitGroup
	for i := range parts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := fault(e, "remote:put")
			if err == nil {
				puts[i], err = e.be.Put(ctx, bytes.NewReader(data[i]), parts[i].Blob.Ext)
			}
			if err != nil {
				errs[i] = err
				cancel()
			}
		})
	}
	wg.Wait()
	return firstCause(errs)
}

// firstCause returns the first error of errs that is not the cancellation
// the first failure caused in the others, or nil.
func firstCause(errs []error) error {
	var first error
	for _, err := range errs {
		switch {
		case err == nil:
		case !errors.Is(err, context.Canceled):
			return err
		case first == nil:
			first = err
		}
	}
	return first
}

// stage takes the content into a staging file in the cache directory
// while its type is found out (the blob's name needs the extension).
func (e *sharedEngine) stage(ctx context.Context, r io.Reader, ext func() (string, error)) (staged, error) {
	f, err := os.CreateTemp(e.staging, ".put-*")
	if err != nil {
		return nil, fmt.Errorf("stage the content: %w", err)
	}
	st := &sharedStaged{e: e, f: f}
	if st.size, err = cas.CopyContext(ctx, f, r); err != nil {
		st.discard()
		return nil, fmt.Errorf("read the content: %w", err)
	}
	if st.ext, err = ext(); err != nil {
		st.discard()
		return nil, err
	}
	return st, nil
}

// sharedStaged is a staging file's content, going up as one blob.
type sharedStaged struct {
	e    *sharedEngine
	f    *os.File
	size int64
	ext  string
}

func (st *sharedStaged) put(ctx context.Context) (cas.PutResult, error) {
	if _, err := st.f.Seek(0, io.SeekStart); err != nil {
		return cas.PutResult{}, err
	}
	if err := fault(st.e, "remote:put"); err != nil {
		return cas.PutResult{}, err
	}
	return st.e.be.Put(ctx, io.LimitReader(st.f, st.size), st.ext)
}

func (st *sharedStaged) discard() {
	st.f.Close()
	os.Remove(st.f.Name())
}

// present reports whether the object store holds a blob's object; an
// error asking it is not an answer.
func (e *sharedEngine) present(ctx context.Context, b cas.Blob) (bool, error) {
	_, err := e.be.Stat(ctx, b)
	if errors.Is(err, cas.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// openChecked opens a blob through the cache: Open checks a cached blob
// whole before it hands it out, and fetches a blob into the cache
// checking it on the way.
func (e *sharedEngine) openChecked(ctx context.Context, b cas.Blob) (*cas.Reader, error) {
	return e.be.Open(ctx, b)
}

func (e *sharedEngine) walk(ctx context.Context, fn func(cas.Entry) error) error {
	return e.be.Walk(ctx, fn)
}

// rehash re-hashes a blob's object as the store holds it, past the cache
// (cas.OpenStored).
func (e *sharedEngine) rehash(ctx context.Context, en cas.Entry) (cas.Entry, error) {
	r, err := cas.OpenStored(ctx, e.be, en.Blob)
	if err != nil {
		return en, err
	}
	defer r.Close()
	_, err = cas.CopyContext(ctx, io.Discard, r)
	return en, err
}

// strayTemp: an object store keeps no temp files.
func (e *sharedEngine) strayTemp(string) bool { return false }

// beingWritten is false: objects appear whole, or not at all.
func (e *sharedEngine) beingWritten(cas.Blob) bool { return false }

// lockForRecheck takes nothing: gc deletes rows before objects and writers
// put objects before rows, so a row used now whose object is not there now
// is damage.
func (e *sharedEngine) lockForRecheck(context.Context, bool) (func(), error) { return func() {}, nil }
