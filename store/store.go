// Package store joins the blob store (package cas) and the index (package
// index) into the store the hook writes to, and runs what needs both: gc,
// verify, prune, stats. Every write stores the blob durably first and
// commits the index row after, holding a shared lock that gc takes
// exclusively while it sweeps, so that no committed row ever points at a
// missing blob. A streamed put reads its content into a locked temp file
// before it takes the lock; every wait for the lock has a deadline; and gc
// announces itself (gc.intent) so that writers let it in.
package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gabriel-vasile/mimetype"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/policy"
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

// Store is a toolcas store: blobs on disk, keys in SQLite (IndexFile beside
// them) or in PostgreSQL (WithIndexURL). It implements
// hook.Store and is safe for concurrent use by many goroutines and many
// processes.
type Store struct {
	dir   string
	blobs *cas.Store
	index *index.Index
	lock  string
	// intent is gc.intent, lockTimeout the writers' default deadline.
	intent      string
	lockTimeout time.Duration
	now         func() time.Time

	// Test seams: inject fails named points of gc; noLock turns gc.lock off
	// and noIntent gc's use of gc.intent, to show what they prevent.
	inject   func(point string) error
	noLock   bool
	noIntent bool
	readOnly bool
	reserve  int64
	// recentKeysMayBeLost is RecentKeysMayBeLostOnPowerCut's setting.
	recentKeysMayBeLost bool

	// writers is the share of gc.lock the store's writes hold.
	writers writerLock
	// commits gathers the rows of concurrent writes into one transaction.
	commits committer
	// group shares the barriers of concurrent one-part writes.
	group blobGroup
	// commitSyncs counts the index transactions that synced the log.
	commitSyncs atomic.Int64
	// marker is the store's marker in UnsyncedDir; recovered the parts
	// Open dropped after an unclean shutdown.
	marker    marker
	recovered []index.Part
	// sequential turns off the one barrier for blob and row, for tests
	// and benchmarks to compare.
	sequential bool
	// writersSeen caches what unsynced/ says of other writers (alone).
	writersSeen writersSeen
	// barrierCheap says whether one barrier for the file system costs
	// little now (cas.Store.BarrierCheap).
	barrierCheap func() bool

	// remote is set, and blobs nil, on a store in an object store (see
	// OpenAt and remote.go).
	remote *remoteStore
}

var _ hook.StreamStore = (*Store)(nil)

// An Option configures Open.
type Option func(*config) error

type config struct {
	durability  cas.Durability
	create      bool
	now         func() time.Time
	inject      func(point string) error
	noLock      bool
	sweepWindow time.Duration // 0: remoteSweepWindow
	noIntent    bool
	lockWait    time.Duration
	readOnly    bool
	reserve     int64
	maintenance bool
	// recentKeysMayBeLost: the index commits without a sync.
	recentKeysMayBeLost bool
	// indexURL is WithIndexURL's URL, "" for the default.
	indexURL string
	// remote is what WithCacheDir and WithS3Options say, for OpenAt.
	remote remoteConfig
	// barrierCheap replaces cas.Store.BarrierCheap, for tests.
	barrierCheap func() bool
}

// withBarrierCheap makes the store ask f, not the machine's unwritten
// bytes, whether a barrier is cheap now (see Store.groupable): tests of
// the group take its barrier whatever else the machine writes meanwhile.
func withBarrierCheap(f func() bool) Option {
	return func(c *config) error {
		c.barrierCheap = f
		return nil
	}
}

// WithDurability sets whether writes wait for stable storage (default
// cas.SyncFull).
func WithDurability(d cas.Durability) Option {
	return func(c *config) error {
		if d != cas.SyncFull && d != cas.SyncNone {
			return fmt.Errorf("store: invalid durability %d", int(d))
		}
		c.durability = d
		return nil
	}
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
	return func(c *config) error {
		c.recentKeysMayBeLost = true
		return nil
	}
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
		return nil, fmt.Errorf("store: unknown durability %q (want full, none or %s)", name, DurabilityRecentKeysMayBeLost)
	}
	return []Option{WithDurability(d)}, nil
}

// WithCreate makes Open create the store if the directory holds none.
func WithCreate() Option {
	return func(c *config) error {
		c.create = true
		return nil
	}
}

// WithClock replaces the clock that stamps rows and ages blobs, so that
// tests of gc's grace period advance time instead of sleeping.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("store: nil clock")
		}
		c.now = now
		return nil
	}
}

// WithLockTimeout sets how long a write waits for gc to release the store
// before it fails with ErrLocked (default DefaultLockTimeout), unless the
// caller's context ends sooner; zero means the context alone decides.
func WithLockTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("store: negative lock timeout %v", d)
		}
		c.lockWait = d
		return nil
	}
}

// ReadOnly opens the store for reading only: it creates and changes
// nothing, so that a store on a read-only mount or without write
// permission can be listed, read, summed up and verified (verify then
// records nothing). Writes, prune and gc fail with ErrReadOnly.
func ReadOnly() Option {
	return func(c *config) error {
		c.readOnly = true
		return nil
	}
}

// tempPoolSize is how many temp files a store opened for writing keeps
// made ahead (see cas.WithTempPool).
const tempPoolSize = 4

// ErrReadOnly is returned by every method that writes, on a store opened
// with ReadOnly.
var ErrReadOnly = errors.New("store opened read-only")

// Open opens the store at dir; an s3:// location opens as OpenAt does.
func Open(ctx context.Context, dir string, opts ...Option) (*Store, error) {
	if IsRemoteLocation(dir) {
		return openRemote(ctx, dir, opts)
	}
	c := config{durability: cas.SyncFull, now: time.Now, lockWait: DefaultLockTimeout, reserve: autoReserve}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	// A few temp files made ahead take the making of a file off the
	// writes' path: enough for the runs of one process writing at once.
	casOpts := []cas.Option{cas.WithDurability(c.durability), cas.WithClock(c.now), cas.WithTempPool(tempPoolSize)}
	if c.create {
		casOpts = append(casOpts, cas.WithCreate())
	}
	ixOpts := []index.Option{index.WithDurability(c.durability), index.WithClock(c.now)}
	if c.recentKeysMayBeLost {
		ixOpts = append(ixOpts, index.RecentMayBeLostOnPowerCut())
	}
	if c.readOnly {
		if c.create {
			return nil, errors.New("store: ReadOnly and WithCreate both given")
		}
		casOpts = append(casOpts, cas.ReadOnly())
		ixOpts = append(ixOpts, index.ReadOnly())
	}
	blobs, err := cas.Open(ctx, dir, casOpts...)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	where, record, err := indexLocation(blobs.Dir(), c)
	if err != nil {
		blobs.Close()
		return nil, err
	}
	ix, err := index.Open(ctx, where, ixOpts...)
	if err != nil && c.maintenance && !c.readOnly && !index.IsPostgresURL(where) && releaseReserve(blobs.Dir()) {
		// A full disk: the reserve's space lets the index open. (An index
		// on PostgreSQL does not live on this disk.)
		ix, err = index.Open(ctx, where, ixOpts...)
	}
	if err != nil {
		blobs.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	if record != "" {
		// Recorded once the database is reachable and migrated, so that a
		// mistyped URL leaves no record behind.
		if err := writeIndexRecord(blobs.Dir(), record); err != nil {
			ix.Close()
			blobs.Close()
			return nil, err
		}
	}
	lock, intent := lockPaths(blobs.Dir())
	s := &Store{dir: blobs.Dir(), blobs: blobs, index: ix, lock: lock, intent: intent, lockTimeout: c.lockWait,
		now: c.now, inject: c.inject, noLock: c.noLock, noIntent: c.noIntent, readOnly: c.readOnly, reserve: c.reserve,
		recentKeysMayBeLost: c.recentKeysMayBeLost && c.durability == cas.SyncFull, barrierCheap: c.barrierCheap}
	if s.barrierCheap == nil {
		s.barrierCheap = blobs.BarrierCheap
	}
	if !c.readOnly {
		if s.recovered, err = s.recoverUnsynced(ctx); err != nil {
			s.Close()
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	if !c.readOnly && !c.maintenance {
		makeReserve(s.dir, s.reserve)
	}
	return s, nil
}

// Durability returns the name of the store's durability: "full", "none" or
// DurabilityRecentKeysMayBeLost.
func (s *Store) Durability() string {
	if s.remote != nil {
		return s.remote.durability
	}
	if s.recentKeysMayBeLost {
		return DurabilityRecentKeysMayBeLost
	}
	return s.blobs.Durability().String()
}

// Exists reports whether dir holds a store.
func Exists(dir string) bool { return cas.Exists(dir) }

// Close closes the index and the blob store.
func (s *Store) Close() error {
	if s.remote != nil {
		return s.closeRemote()
	}
	s.closeMarker()
	s.writers.close()
	return errors.Join(s.index.Close(), s.blobs.Close())
}

// Dir returns the store root's absolute path; for a store on S3, the
// absolute path of its local cache, under which its pointers' paths are.
func (s *Store) Dir() string { return s.dir }

// Blobs returns the blob store in the local directory, nil for a store on
// S3 (Backend returns either).
func (s *Store) Blobs() *cas.Store { return s.blobs }

// Index returns the index.
func (s *Store) Index() *index.Index { return s.index }

// Path returns the absolute path of a blob's file.
func (s *Store) Path(b cas.Blob) string { return s.Backend().Path(b) }

// Name is the store's name in the hook's warnings.
func (s *Store) Name() string { return "CASStore" }

// AcceptsBinary reports true: blobs hold any bytes.
func (s *Store) AcceptsBinary() bool { return true }

func kindOf(k hook.Kind) index.Kind {
	switch k {
	case hook.KindImage:
		return index.KindImage
	case hook.KindFile:
		return index.KindFile
	}
	return index.KindText
}

// newPart describes a part to the index; its blob is set once it is stored.
func newPart(k hook.Key, p hook.Part, data []byte) index.NewPart {
	np := index.NewPart{
		Key: k.String(), Run: k.Run, Step: k.Step, Tool: k.Tool, CallID: k.CallID, Part: k.Part,
		Kind: kindOf(p.Kind), MIME: p.MIME, Filename: p.Filename, Bytes: int64(len(data)),
	}
	if p.Kind == hook.KindText {
		np.Chars = int64(policy.TextSize(p.Text))
	}
	return np
}

// Write stores a step's parts: every blob durably (one barrier for the
// batch), then every row in one transaction. A key that the same call wrote
// before gets a new version; a key that another call of the run wrote is
// not reused, the part gets key~2 (see index.Record). It implements
// hook.Store.
func (s *Store) Write(ctx context.Context, items []hook.Item) ([]hook.Stored, error) {
	if err := s.writable("write"); err != nil {
		return nil, err
	}
	if s.remote != nil {
		return s.writeRemote(ctx, items)
	}
	nps := make([]index.NewPart, len(items))
	casItems := make([]cas.Item, len(items))
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
		// What the index would refuse is refused before any blob is written.
		if err := index.CheckPart(nps[i]); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		casItems[i] = cas.Item{Data: data, Ext: it.Key.Ext}
	}
	// One part: see writeOne.
	one := len(casItems) == 1 && !s.sequential
	nameLater := one && s.blobs.Durability() == cas.SyncFull
	if nameLater {
		release, err := s.holdMarker(ctx)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		defer release()
	}
	unlock, err := s.sharedLock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if one {
		return s.writeOne(ctx, nps[0], casItems[0], nameLater)
	}
	var puts []cas.PutResult
	if len(casItems) == 1 {
		r, err := s.blobs.PutBytes(ctx, casItems[0].Data, casItems[0].Ext)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		puts = []cas.PutResult{r}
	} else if puts, err = s.blobs.PutBatch(ctx, casItems); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	for i := range nps {
		nps[i].Blob = puts[i].Blob
	}
	// A test's stand-in for a row commit that failed (on a full disk, say):
	// the transaction is rolled back, nothing of it committed.
	err = s.fault("write:record")
	var recs []index.Recorded
	if err == nil {
		recs, err = s.record(ctx, nps)
	}
	if err == nil {
		// A test's way to stop a writer with its row committed.
		s.fault("write:committed")
	}
	if err != nil {
		s.expire(puts)
		return nil, fmt.Errorf("store: %w", err)
	}
	out := make([]hook.Stored, len(items))
	for i := range items {
		out[i] = hook.Stored{
			Key: recs[i].Key, Path: s.blobs.Path(puts[i].Blob), Digest: puts[i].Blob.Digest,
			Version: recs[i].Version, SameAs: recs[i].SameAs, Dedup: puts[i].Existed,
		}
	}
	return out, nil
}

// StreamPart describes a part that Put reads from a stream.
type StreamPart struct {
	// Key is the part's key; its Ext is ignored and chosen from the content.
	Key hook.Key
	// MIME and Filename are as the tool gave them, either may be empty.
	MIME     string
	Filename string
}

// PutResult says what Put stored.
type PutResult struct {
	hook.Stored
	// Info is what a pointer says about the part.
	Info  hook.PartInfo
	Kind  hook.Kind
	MIME  string
	Size  int64
	Chars int64
}

// Put stores one part read from r, streaming, in bounded memory whatever its
// size. The part is text when no MIME type, or a text/* one, is given and
// the bytes are UTF-8; otherwise an image (image/*) or a file.
//
// Without a MIME type, Put sniffs the first bytes: content with a known
// signature that is not text, such as a PNG or a PDF, gets the type it
// shows, so a PNG is an image.
func (s *Store) Put(ctx context.Context, sp StreamPart, r io.Reader) (PutResult, error) {
	if err := s.writable("put"); err != nil {
		return PutResult{}, err
	}
	if s.remote != nil {
		return s.putRemote(ctx, sp, r)
	}
	if sp.MIME == "" {
		br := bufio.NewReaderSize(r, sniffLen)
		head, _ := br.Peek(sniffLen) // a short read sniffs what there is; Put sees any error again
		sp.MIME = SniffMIME(head)
		r = br
	}
	probe := hook.NewContentProbe(sp.MIME, sp.Filename)
	k := sp.Key
	k.Ext = ".txt" // checked now; the real one is chosen from the content
	if err := k.Check(); err != nil {
		return PutResult{}, fmt.Errorf("store: %w", err)
	}
	if err := probe.CheckMIME(); err != nil {
		return PutResult{}, fmt.Errorf("store: %w", err)
	}
	// The content arrives at the producer's pace, into a temp file the
	// store keeps locked: gc may run meanwhile. The shared lock is taken
	// only once every byte is durable.
	staged, err := s.blobs.Stage(ctx, io.TeeReader(r, probe), func() (string, error) { return probe.Ext(), nil })
	if err != nil {
		return PutResult{}, fmt.Errorf("store: %w", err)
	}
	defer staged.Discard()
	unlock, err := s.sharedLock(ctx)
	if err != nil {
		return PutResult{}, err
	}
	defer unlock()
	res, err := staged.Commit(ctx)
	if err != nil {
		return PutResult{}, fmt.Errorf("store: %w", err)
	}
	k.Ext = res.Blob.Ext
	part := probe.Part()
	np := index.NewPart{
		Key: k.String(), Run: k.Run, Step: k.Step, Tool: k.Tool, CallID: k.CallID, Part: k.Part,
		Kind: kindOf(part.Kind), MIME: part.MIME, Filename: part.Filename, Bytes: res.Size, Chars: probe.Chars(),
		Blob: res.Blob,
	}
	err = s.fault("write:record")
	var recs []index.Recorded
	if err == nil {
		recs, err = s.record(ctx, []index.NewPart{np})
	}
	if err != nil {
		s.expire([]cas.PutResult{res})
		return PutResult{}, fmt.Errorf("store: %w", err)
	}
	return PutResult{
		Stored: hook.Stored{Key: recs[0].Key, Path: s.blobs.Path(res.Blob), Digest: res.Blob.Digest,
			Version: recs[0].Version, SameAs: recs[0].SameAs, Dedup: res.Existed},
		Info: probe.Info(res.Size), Kind: part.Kind, MIME: part.MIME, Size: res.Size, Chars: np.Chars,
	}, nil
}

// sniffLen is how many first bytes SniffMIME looks at.
const sniffLen = 3072

// SniffMIME returns the MIME type the first bytes of some content show when
// they show one that is not text, else "": text stays text, and content of
// no known type stays a file with no type.
func SniffMIME(head []byte) string {
	if len(head) == 0 {
		return ""
	}
	m := mimetype.Detect(head)
	for t := m; t != nil; t = t.Parent() {
		if t.Is("text/plain") {
			return ""
		}
	}
	if m.Is("application/octet-stream") {
		return ""
	}
	mt, _, _ := strings.Cut(m.String(), ";")
	return mt
}

// Resolve returns the part a reference names, scoped to run when it is set.
func (s *Store) Resolve(ctx context.Context, run, ref string) (index.Part, error) {
	r, err := index.ParseRef(ref, s.dir)
	if err != nil {
		// The index's message names the reference and what is wrong with
		// it; a package prefix would add nothing for whoever reads it.
		return index.Part{}, mark{err, hook.ErrRefused}
	}
	p, err := s.index.Resolve(ctx, r, run)
	if errors.Is(err, index.ErrNotFound) {
		return index.Part{}, mark{err, hook.ErrNotFound}
	}
	if err != nil {
		return index.Part{}, fmt.Errorf("store: %w", err)
	}
	return p, nil
}

// ErrNoVersion is returned by ResolveVersion when the key exists but has
// no such version.
var ErrNoVersion = errors.New("no such version")

// ResolveVersion returns version n (from 1) of a key, scoped to run when it
// is set. A key with no part is ErrNotFound (matching hook.ErrNotFound); a
// version it does not have is ErrNoVersion, saying which it has.
func (s *Store) ResolveVersion(ctx context.Context, run, key string, n int) (index.Part, error) {
	vs, err := s.index.Versions(ctx, key)
	if err != nil {
		return index.Part{}, fmt.Errorf("store: %w", err)
	}
	if run != "" {
		vs = slices.DeleteFunc(vs, func(p index.Part) bool { return p.Run != run })
	}
	if len(vs) == 0 {
		return index.Part{}, mark{fmt.Errorf("%s: %w", key, index.ErrNotFound), hook.ErrNotFound}
	}
	for _, p := range vs {
		if p.Version == n {
			return p, nil
		}
	}
	have := make([]string, len(vs))
	for i, p := range vs {
		have[len(vs)-1-i] = strconv.Itoa(p.Version)
	}
	return index.Part{}, fmt.Errorf("%s@%d: %w: it has versions %s", key, n, ErrNoVersion, strings.Join(have, ", "))
}

// Read returns the part a reference names, its bytes checked against its
// digest. It implements hook.Store.
func (s *Store) Read(ctx context.Context, run, ref string) (*hook.Content, error) {
	if s.remote != nil {
		return s.readRemote(ctx, run, ref)
	}
	p, err := s.Resolve(ctx, run, ref)
	if err != nil {
		return nil, err
	}
	data, err := s.blobs.ReadAll(ctx, p.Blob)
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", p.Key, err)
	}
	return &hook.Content{
		Key: p.Key, Path: s.blobs.Path(p.Blob), Run: p.Run, Digest: p.Blob.Digest, Version: p.Version,
		Kind: hook.Kind(p.Kind), MIME: p.MIME, Filename: p.Filename, Data: data,
	}, nil
}

// Copy writes a part's bytes to w, but only once they are checked: a
// corrupt blob is an error and nothing is written. Large blobs are read
// twice (check, then copy) rather than held in memory.
func (s *Store) Copy(ctx context.Context, w io.Writer, p index.Part) (int64, error) {
	if s.remote != nil {
		return s.copyRemote(ctx, w, p)
	}
	if err := s.blobs.Verify(ctx, p.Blob); err != nil {
		return 0, fmt.Errorf("store: %s: %w", p.Key, err)
	}
	r, err := s.blobs.Open(ctx, p.Blob)
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

// List lists parts, newest first.
func (s *Store) List(ctx context.Context, o index.ListOptions) ([]index.Part, error) {
	return s.index.List(ctx, o)
}

// Stats summarises the store, or one run of it.
func (s *Store) Stats(ctx context.Context, run string) (index.Stats, error) {
	return s.index.Stats(ctx, run)
}

// Prune removes index rows; gc then frees the blobs no row uses.
func (s *Store) Prune(ctx context.Context, o index.PruneOptions) (index.PruneResult, error) {
	if err := s.writable("prune"); err != nil {
		return index.PruneResult{}, err
	}
	if s.remote != nil {
		return s.index.Prune(ctx, o)
	}
	// Deleting rows takes room in the index's log: the reserve gives it.
	s.release()
	defer makeReserve(s.dir, s.reserve)
	return s.index.Prune(ctx, o)
}

// Detail is everything known about one part.
type Detail struct {
	Part index.Part
	Path string
	Blob index.BlobRow
	// Sharing lists the other parts, of any run and version, stored in the
	// same blob: all of them, or the first few for ShowPartFirst.
	Sharing []index.Part
	// SharingTotal counts all the other parts stored in the same blob.
	SharingTotal int64
	// Versions lists every version of the part's key, newest first.
	Versions []index.Part
	// OnDisk is the blob file's state: its size, or the error finding it.
	OnDisk    cas.BlobInfo
	OnDiskErr error
}

// Show returns everything known about the part a reference names.
func (s *Store) Show(ctx context.Context, ref string) (Detail, error) {
	p, err := s.Resolve(ctx, "", ref)
	if err != nil {
		return Detail{}, err
	}
	return s.ShowPart(ctx, p)
}

// ShowPart returns everything known about a part already resolved.
func (s *Store) ShowPart(ctx context.Context, p index.Part) (Detail, error) {
	return s.ShowPartFirst(ctx, p, 0)
}

// ShowPartFirst is ShowPart listing at most most of the parts sharing the
// blob (0: all, oldest first), by run and oldest first within a run, and
// counting the rest: a blob that tens of thousands of parts share is shown
// as fast as any.
func (s *Store) ShowPartFirst(ctx context.Context, p index.Part, most int) (Detail, error) {
	var err error
	d := Detail{Part: p, Path: s.Path(p.Blob)}
	if d.Blob, err = s.index.Blob(ctx, p.Blob); err != nil {
		return Detail{}, fmt.Errorf("store: %w", err)
	}
	limit := 0
	if most > 0 {
		limit = most + 1 // the part itself may be among them
	}
	all, err := s.index.SharingFirst(ctx, p.Blob, limit)
	if err != nil {
		return Detail{}, fmt.Errorf("store: %w", err)
	}
	for _, o := range all {
		if o.ID != p.ID && (most <= 0 || len(d.Sharing) < most) {
			d.Sharing = append(d.Sharing, o)
		}
	}
	d.SharingTotal = max(d.Blob.Parts-1, int64(len(d.Sharing)))
	if d.Versions, err = s.index.Versions(ctx, p.Key); err != nil {
		return Detail{}, fmt.Errorf("store: %w", err)
	}
	d.OnDisk, d.OnDiskErr = s.Backend().Stat(ctx, p.Blob)
	return d, nil
}

// mark is an error that also matches a sentinel of the hook package, so
// that callers of hook.Store can test it without the message saying it
// twice.
type mark struct {
	err  error
	also error
}

func (m mark) Error() string   { return m.err.Error() }
func (m mark) Unwrap() []error { return []error{m.err, m.also} }

// Checkpoint folds the index's write-ahead log into the database file, so
// that its size on disk shows the data rather than recent writes.
func (s *Store) Checkpoint(ctx context.Context) error {
	return s.index.Checkpoint(ctx)
}

// release deletes the reserve file when the disk is nearly full, so that
// gc and prune have room to work.
func (s *Store) release() {
	if free, ok := freeBytes(s.dir); !ok || free < 2*max(s.reserve, DefaultReserve) {
		releaseReserve(s.dir)
		checkpointShort(s)
	}
}

// writable refuses what op would do to a store opened read-only.
func (s *Store) writable(op string) error {
	if s.readOnly {
		return fmt.Errorf("store: %s: %w at %s: it needs write access", op, ErrReadOnly, s.Location())
	}
	return nil
}

// ReadOnly reports whether the store was opened read-only.
func (s *Store) ReadOnly() bool { return s.readOnly }

// expire marks the blobs a failed write created, whose rows were never
// committed, as old enough for the next gc whatever its grace period. A
// blob another writer found at the same time is safe: that writer holds
// the shared lock until its row is committed, and gc removes no blob a row
// uses.
func (s *Store) expire(puts []cas.PutResult) {
	for _, p := range puts {
		if !p.Existed {
			s.blobs.Expire(p.Blob)
		}
	}
}

// fault returns the error a test injects at a named point, if any.
func (s *Store) fault(point string) error {
	if s.inject == nil {
		return nil
	}
	return s.inject(point)
}

// OpenRead returns the part a reference names, without its bytes, and a
// reader of them that checks them against their digest at the end. It
// implements hook.StreamStore.
func (s *Store) OpenRead(ctx context.Context, run, ref string) (*hook.Content, io.ReadCloser, error) {
	if s.remote != nil {
		return s.openReadRemote(ctx, run, ref)
	}
	p, err := s.Resolve(ctx, run, ref)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.blobs.Open(ctx, p.Blob)
	if err != nil {
		return nil, nil, fmt.Errorf("store: read %s: %w", p.Key, err)
	}
	return &hook.Content{
		Key: p.Key, Path: s.blobs.Path(p.Blob), Run: p.Run, Digest: p.Blob.Digest, Version: p.Version,
		Kind: hook.Kind(p.Kind), MIME: p.MIME, Filename: p.Filename, Size: r.Size(),
	}, r, nil
}
