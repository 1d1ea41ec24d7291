package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/s3blob"
)

// ErrNeedSharedIndex is returned by OpenAt when a store in an object store
// would be created, or opened, without a PostgreSQL index: the keys of a
// store that many machines share must be shared too.
var ErrNeedSharedIndex = errors.New("a store in an object store needs a shared index")

// remoteConfig is what OpenAt's object store options say.
type remoteConfig struct {
	cacheDir string
	cacheMax int64
	s3opts   []s3blob.Option
}

// remoteStore is the part of a Store that keeps its blobs in an object
// store.
type remoteStore struct {
	be *s3blob.Backend
	// leases bounds the blob leases this process holds at once, each on a
	// database connection of its own, so that writes never take every
	// connection of the index's pool and wait for one to commit.
	leases chan struct{}
	// staging holds streamed puts' content while its type is found out.
	staging string
	// noLease turns the blob leases and the sweep lock off, for tests to
	// show what they prevent.
	noLease bool
	// sweepWindow is how long gc may delete a batch's objects (see
	// remoteSweepWindow); 0 is remoteSweepWindow.
	sweepWindow time.Duration
	// durability is Durability's answer.
	durability string
}

// remotePuts is how many blobs of one write go up at once.
const remotePuts = 4

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

// maxLeases is how many writes of one Store hold a blob lease at once; the
// index's pool has 8 connections.
const maxLeases = 4

// openRemote opens (with WithCreate, makes) the store in the object store
// location names.
func openRemote(ctx context.Context, location string, opts []Option) (*Store, error) {
	c := config{durability: cas.SyncFull, now: time.Now, lockWait: DefaultLockTimeout}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if c.readOnly && c.create {
		return nil, errors.New("store: ReadOnly and WithCreate both given")
	}
	loc, err := s3blob.ParseURL(location)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	cacheDir := c.remote.cacheDir
	if cacheDir == "" {
		if cacheDir, err = DefaultCacheDir(loc); err != nil {
			return nil, err
		}
	}
	cacheMax := c.remote.cacheMax
	if cacheMax == 0 {
		cacheMax = s3blob.DefaultCacheBytes
	}
	s3opts := append([]s3blob.Option{s3blob.WithCache(cacheDir, cacheMax)}, c.remote.s3opts...)
	be, err := s3blob.Open(ctx, loc, s3opts...)
	if err != nil && c.create && (errors.Is(err, cas.ErrNoStore) || errors.Is(err, s3blob.ErrNoBucket)) {
		if c.indexURL == "" {
			return nil, needIndex(loc, "create")
		}
		if _, err := indexURLShown(c.indexURL); err != nil {
			return nil, err
		}
		be, err = s3blob.Open(ctx, loc, append(s3opts, s3blob.WithCreate())...)
	}
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	where, record, err := remoteIndexLocation(ctx, be, c)
	if err != nil {
		be.Close()
		return nil, err
	}
	// A put returns once its object is stored, whatever the durability:
	// durability says how the index commits (without waiting for the
	// database's log to be flushed, for none and the recent keys mode).
	ixOpts := []index.Option{index.WithDurability(c.durability), index.WithClock(c.now)}
	durability := c.durability.String()
	if c.recentKeysMayBeLost && c.durability == cas.SyncFull {
		ixOpts = append(ixOpts, index.RecentMayBeLostOnPowerCut())
		durability = DurabilityRecentKeysMayBeLost
	}
	if c.readOnly {
		ixOpts = append(ixOpts, index.ReadOnly())
	}
	ix, err := index.Open(ctx, where, ixOpts...)
	if err != nil {
		be.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	if record != "" {
		// Recorded once the database is reachable and migrated, so that a
		// mistyped URL leaves no record behind.
		if err := writeRemoteRecord(ctx, be, record); err != nil {
			ix.Close()
			be.Close()
			return nil, err
		}
	}
	staging := filepath.Join(be.Cache().Dir(), "staging")
	if !c.readOnly {
		if err := os.MkdirAll(staging, 0o755); err != nil {
			ix.Close()
			be.Close()
			return nil, fmt.Errorf("store: cache: %w", err)
		}
		removeOldStaging(staging, c.now())
	}
	s := &Store{dir: be.Cache().Dir(), index: ix, lockTimeout: c.lockWait, now: c.now, inject: c.inject,
		readOnly: c.readOnly,
		remote:   &remoteStore{be: be, leases: make(chan struct{}, maxLeases), staging: staging, noLease: c.noLock, durability: durability, sweepWindow: c.sweepWindow}}
	return s, nil
}

// needIndex is the error for a store in an object store opened with no
// PostgreSQL index to use.
func needIndex(loc s3blob.Location, verb string) error {
	return fmt.Errorf("store: %w: %s %s with --index postgres://USER@HOST:PORT/DB (WithIndexURL): its keys must be where every machine sees them",
		ErrNeedSharedIndex, verb, loc)
}

// remoteIndexLocation decides which index the store in be uses, as
// indexLocation does for a directory: the URL to open, the URL to record
// ("" for none), or why not.
func remoteIndexLocation(ctx context.Context, be *s3blob.Backend, c config) (open, record string, err error) {
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
		return "", "", fmt.Errorf("store: %w: %s keeps its index at %s (recorded in %s), not at %s",
			ErrIndexMismatch, loc, rec, IndexRecordFile, shown)
	case rec != "":
		return c.indexURL, "", nil
	case !c.create:
		return "", "", fmt.Errorf("store: %w: %s records no index (create the store with it: casctl init --index URL)", ErrIndexMismatch, loc)
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
		return "", fmt.Errorf("store: %w", err)
	}
	var r indexRecord
	damaged := func(why any) error {
		return fmt.Errorf("store: %s in %s is damaged (want {\"url\": \"postgres://…\"}): %v", IndexRecordFile, be.Location(), why)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", damaged(err)
	}
	if r.URL == "" {
		return "", damaged("it names no URL")
	}
	if _, err := indexURLShown(r.URL); err != nil {
		return "", fmt.Errorf("store: %s in %s: %w", IndexRecordFile, be.Location(), err)
	}
	return r.URL, nil
}

// writeRemoteRecord records shown as the store's index, unless another
// process recorded one first, which must then be the same.
func writeRemoteRecord(ctx context.Context, be *s3blob.Backend, shown string) error {
	b, _ := json.MarshalIndent(indexRecord{URL: shown}, "", "  ")
	wrote, err := be.CreateMeta(ctx, IndexRecordFile, append(b, '\n'))
	if err != nil {
		return fmt.Errorf("store: record the index: %w", err)
	}
	if wrote {
		return nil
	}
	rec, err := readRemoteRecord(ctx, be)
	if err != nil {
		return err
	}
	if rec != shown {
		return fmt.Errorf("store: %w: %s keeps its index at %s, not at %s", ErrIndexMismatch, be.Location(), rec, shown)
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

// closeRemote closes the index and the object store's connections.
func (s *Store) closeRemote() error {
	return errors.Join(s.index.Close(), s.remote.be.Close())
}

// writeRemote is Write on an object store: every blob put (durable once
// Put returns), then every row committed in one transaction, all under a
// blob lease (see lease.go).
func (s *Store) writeRemote(ctx context.Context, items []hook.Item) ([]hook.Stored, error) {
	nps := make([]index.NewPart, len(items))
	datas := make([][]byte, len(items))
	for i, it := range items {
		if err := it.Key.Check(); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		data := []byte(it.Part.Text)
		if it.Part.Kind != hook.KindText {
			data = it.Part.Data
		}
		nps[i] = newPart(it.Key, it.Part, data)
		nps[i].Blob.Ext = it.Key.Ext
		if err := index.CheckPart(nps[i]); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		datas[i] = data
	}
	puts := make([]cas.PutResult, len(items))
	putAll := func(ctx context.Context) error {
		// The parts of a step go up a few at a time: each put is a round
		// trip or two to the object store.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errs := make([]error, len(items))
		sem := make(chan struct{}, remotePuts)
		var wg sync.WaitGroup
		for i, it := range items {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				err := s.fault("remote:put")
				if err == nil {
					puts[i], err = s.remote.be.Put(ctx, bytes.NewReader(datas[i]), it.Key.Ext)
				}
				if err != nil {
					errs[i] = err
					cancel()
				}
			}()
		}
		wg.Wait()
		return firstCause(errs)
	}
	recs, err := s.underLease(ctx, putAll, func(lctx context.Context) ([]index.Recorded, error) {
		for i := range nps {
			nps[i].Blob = puts[i].Blob
		}
		return s.index.Record(lctx, nps)
	})
	if err != nil {
		return nil, err
	}
	out := make([]hook.Stored, len(items))
	for i := range items {
		out[i] = hook.Stored{
			Key: recs[i].Key, Path: s.remote.be.Path(puts[i].Blob), Digest: puts[i].Blob.Digest,
			Version: recs[i].Version, SameAs: recs[i].SameAs, Dedup: puts[i].Existed,
		}
	}
	return out, nil
}

// putRemote is Put on an object store. The content goes first into a
// staging file in the cache directory while its type is found out (the
// blob's name needs the extension), then up to the store under a blob
// lease.
func (s *Store) putRemote(ctx context.Context, sp StreamPart, r io.Reader) (PutResult, error) {
	if sp.MIME == "" {
		br := bufio.NewReaderSize(r, sniffLen)
		head, _ := br.Peek(sniffLen)
		sp.MIME = SniffMIME(head)
		r = br
	}
	probe := hook.NewContentProbe(sp.MIME, sp.Filename)
	k := sp.Key
	k.Ext = ".txt"
	if err := k.Check(); err != nil {
		return PutResult{}, fmt.Errorf("store: %w", err)
	}
	if err := probe.CheckMIME(); err != nil {
		return PutResult{}, fmt.Errorf("store: %w", err)
	}
	f, err := os.CreateTemp(s.remote.staging, ".put-*")
	if err != nil {
		return PutResult{}, fmt.Errorf("store: stage the content: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	size, err := cas.CopyContext(ctx, f, io.TeeReader(r, probe))
	if err != nil {
		return PutResult{}, fmt.Errorf("store: read the content: %w", err)
	}
	ext := probe.Ext()
	part := probe.Part()
	var res cas.PutResult
	put := func(ctx context.Context) error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if err := s.fault("remote:put"); err != nil {
			return err
		}
		res, err = s.remote.be.Put(ctx, io.LimitReader(f, size), ext)
		return err
	}
	k.Ext = ext
	np := index.NewPart{
		Key: k.String(), Run: k.Run, Step: k.Step, Tool: k.Tool, CallID: k.CallID, Part: k.Part,
		Kind: kindOf(part.Kind), MIME: part.MIME, Filename: part.Filename, Bytes: size, Chars: probe.Chars(),
	}
	recs, err := s.underLease(ctx, put, func(lctx context.Context) ([]index.Recorded, error) {
		np.Blob = res.Blob
		return s.index.Record(lctx, []index.NewPart{np})
	})
	if err != nil {
		return PutResult{}, err
	}
	return PutResult{
		Stored: hook.Stored{Key: recs[0].Key, Path: s.remote.be.Path(res.Blob), Digest: res.Blob.Digest,
			Version: recs[0].Version, SameAs: recs[0].SameAs, Dedup: res.Existed},
		Info: probe.Info(size), Kind: part.Kind, MIME: part.MIME, Size: size, Chars: np.Chars,
	}, nil
}

// readRemote is Read on an object store: through the cache, checked.
func (s *Store) readRemote(ctx context.Context, run, ref string) (*hook.Content, error) {
	p, err := s.Resolve(ctx, run, ref)
	if err != nil {
		return nil, err
	}
	data, err := cas.ReadBlob(ctx, s.remote.be, p.Blob)
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", p.Key, err)
	}
	return &hook.Content{
		Key: p.Key, Path: s.remote.be.Path(p.Blob), Run: p.Run, Digest: p.Blob.Digest, Version: p.Version,
		Kind: hook.Kind(p.Kind), MIME: p.MIME, Filename: p.Filename, Data: data,
	}, nil
}

// openReadRemote is OpenRead on an object store.
func (s *Store) openReadRemote(ctx context.Context, run, ref string) (*hook.Content, io.ReadCloser, error) {
	p, err := s.Resolve(ctx, run, ref)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.remote.be.Open(ctx, p.Blob)
	if err != nil {
		return nil, nil, fmt.Errorf("store: read %s: %w", p.Key, err)
	}
	return &hook.Content{
		Key: p.Key, Path: s.remote.be.Path(p.Blob), Run: p.Run, Digest: p.Blob.Digest, Version: p.Version,
		Kind: hook.Kind(p.Kind), MIME: p.MIME, Filename: p.Filename, Size: r.Size(),
	}, r, nil
}

// copyRemote is Copy on an object store. Open checks a cached blob whole
// before it hands it out, and fetches a blob into the cache checking it on
// the way, so a corrupt blob fails before a byte is written.
func (s *Store) copyRemote(ctx context.Context, w io.Writer, p index.Part) (int64, error) {
	r, err := s.remote.be.Open(ctx, p.Blob)
	if err != nil {
		return 0, fmt.Errorf("store: %s: %w", p.Key, err)
	}
	defer r.Close()
	n, err := io.Copy(w, r)
	if err != nil {
		return n, fmt.Errorf("store: copy %s: %w", p.Key, err)
	}
	return n, nil
}

// localOnly is the error of an operation a store in an object store does
// not have.
func (s *Store) localOnly(op string) error {
	return fmt.Errorf("store: %s: %w; %s keeps its blobs in an object store", op, ErrLocalOnly, s.Location())
}
