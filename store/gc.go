package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// DefaultGrace is how old an unreferenced blob must be before gc removes it,
// unless told otherwise.
const DefaultGrace = time.Hour

// ErrMissingBlobs is returned by GC when index rows point at blobs that are
// not there: something is wrong that verify should look at first. Reads of
// a part whose blob is missing wrap it too.
var ErrMissingBlobs = errors.New("index rows point at missing blobs")

// GCOptions configure GC.
type GCOptions struct {
	// Grace is how old (by modification time, which every dedup hit
	// refreshes) an unreferenced blob or a temp file must be to go. It is
	// used as given: zero removes every unreferenced blob at once.
	// DefaultGrace is the usual value.
	Grace time.Duration
	// DryRun reports what would go and removes nothing.
	DryRun bool
	// Progress, when set, is called as blobs are examined.
	Progress func(done, total int)
	// LockTimeout bounds the wait for writes under way to finish
	// (DefaultGCLockTimeout when zero); past it GC fails with ErrLocked,
	// naming the processes holding the lock when they can be known.
	LockTimeout time.Duration
	// MaxShare is the largest share of the store's blobs that GC removes
	// at once when no index row names them (DefaultMaxShare when zero);
	// past it, and past 16 blobs, GC fails with ErrGCShare and removes
	// nothing, unless Force is set. Blobs whose parts were pruned keep their rows until gc, and
	// do not count: a store rarely holds many blobs no row names, but an
	// index that lost its rows (restored from an old copy, say) makes
	// every blob look so, and such a gc would empty the store.
	MaxShare float64
	Force    bool
}

// DefaultMaxShare is the share of a store's blobs past which GC refuses to
// run without GCOptions.Force.
const DefaultMaxShare = 0.5

// gcGuardMin is the fewest blobs no row names that make GC refuse: a few
// orphans of failed writes in a small store are no sign of a damaged
// index, and deleting them empties nothing.
const gcGuardMin = 16

// ErrGCShare is returned by GC when it would remove more than
// GCOptions.MaxShare of the store's blobs.
var ErrGCShare = errors.New("more of the store would go than gc removes without --force")

// GCResult says what GC removed, or would remove on a dry run.
type GCResult struct {
	RemovedBlobs int
	FreedBytes   int64
	// KeptYoung counts unreferenced blobs kept because they are younger than
	// the grace period.
	KeptYoung   int
	RemovedTemp int
	// InUseTemp counts temp files kept, whatever their age, because a put
	// is still writing them.
	InUseTemp int
	DryRun    bool
	// Removed lists the blobs removed.
	Removed []cas.Blob
	// Packs says what was done to pack files.
	Packs PackSweep
	// UnusedPacked and UnusedPackedBytes count the packed blobs whose rows
	// gc deleted (or would delete): their bytes stay in their packs until a
	// pack is more than half unused and gc rewrites it.
	UnusedPacked      int
	UnusedPackedBytes int64
	// Search says what gc did to the search index afterwards, on a store
	// in a local directory: the segments it dropped, and the lag left
	// (which pack, or casctl grep, indexes).
	Search SearchIndexResult
	// IndexFreed is what the index database gave back to the file system
	// afterwards: the pages of the rows gc and the search index dropped.
	IndexFreed int64
}

// GCPlan is what a gc decides before it removes anything: which blobs go
// and why, which stay for now, and what stops it. PlanGC makes one; GC
// makes one and sweeps it, checking again under the store's locks what may
// have changed since (a blob a writer stored again meanwhile stays).
type GCPlan struct {
	// At is when the plan was made, Grace the grace period it applies:
	// what is younger than At - Grace stays.
	At    time.Time
	Grace time.Duration
	// Blobs counts the blobs the plan saw in the store, used or not.
	Blobs int
	// Remove lists the blobs gc removes: no part uses them and they are
	// older than the grace period.
	Remove []GCBlob
	// Young lists the blobs no part uses that stay because they are younger
	// than the grace period.
	Young []GCBlob
	// Missing lists blobs that parts use and that are nowhere: while any
	// are, gc removes nothing (ErrMissingBlobs).
	Missing []cas.Blob
	// StaleRows lists the rows of blobs that no part uses and that are
	// nowhere: gc deletes the rows.
	StaleRows []cas.Blob
	// Temps lists the temp files older than the grace period.
	Temps []GCTemp
	// Packs says what gc does to pack files; PackTemps lists the temp
	// files in packs/ older than the grace period, and LooseCopies the
	// loose files of blobs that the pack their row names holds too. GC
	// decides them again once it has deleted the rows of what it removes.
	Packs       []GCPack
	PackTemps   []string
	LooseCopies []cas.Blob

	// hasPacks says the store has pack files or rows naming packs, and
	// looseCopies lists loose files of blobs whose rows name a pack: what
	// the sweep of packs needs from the mark. planPacks says whether the
	// mark plans for packs too (GC decides for them as it sweeps).
	hasPacks    bool
	looseCopies map[cas.Blob]cas.Entry
	planPacks   bool
}

// GCBlob is a blob in a gc's plan.
type GCBlob struct {
	Blob cas.Blob
	Size int64
	// ModTime is when the blob was last written or stored again.
	ModTime time.Time
	// Pack names the pack holding the blob when it is not a file of its
	// own: its bytes go when gc rewrites the pack.
	Pack string
	// Reason says why no part uses it.
	Reason GCReason
	// id is the blob's row, 0 when no row names it.
	id int64
}

// GCReason says why no part uses a blob.
type GCReason int

// The reasons a blob is unused.
const (
	// GCNoRow: no row of the index names the blob, as a write that died
	// between its blob and its row leaves it.
	GCNoRow GCReason = iota + 1
	// GCUnused: the blob's row is used by no part: they were pruned.
	GCUnused
)

func (r GCReason) String() string {
	return enumName("GCReason", int(r), "no index row names it", "no part uses it")
}

// enumName names value v of an enumeration whose values, from 1, have
// names; one out of range by its type and number.
func enumName(typ string, v int, names ...string) string {
	if v < 1 || v > len(names) {
		return fmt.Sprintf("%s(%d)", typ, v)
	}
	return names[v-1]
}

// GCTemp is a temp file in a gc's plan.
type GCTemp struct {
	// Path is the file's path under the store root.
	Path string
	// InUse says a live writer still holds it: it stays.
	InUse bool
}

// GCPack is what gc does to one pack file.
type GCPack struct {
	Name string
	// Action is what happens to it.
	Action GCPackAction
	// Size is the pack file's size; DeadBytes the bytes of the blobs in it
	// no part uses, of RawBytes in all.
	Size, DeadBytes, RawBytes int64
	// live are the blobs a rewrite keeps.
	live []cas.Blob
}

// GCPackAction is what gc does to a pack file.
type GCPackAction int

// What gc does to packs.
const (
	// GCDropPack removes a pack no part uses a blob of.
	GCDropPack GCPackAction = iota + 1
	// GCRewritePack writes a pack anew with the blobs parts use, once more
	// than RewriteThreshold of its bytes are unused.
	GCRewritePack
	// GCDropUnrecorded removes a pack no row names, older than the grace
	// period: a pack that stopped before its rows, whose blobs are loose.
	GCDropUnrecorded
)

func (a GCPackAction) String() string {
	return enumName("GCPackAction", int(a), "drop", "rewrite", "drop unrecorded")
}

// GC removes the blobs no index row uses and that are older than the grace
// period, and temp files older than it. It plans first (see PlanGC),
// without a lock, writers writing on; it fails closed: any error while
// listing rows or files stops it before it deletes anything, and it
// refuses to run while rows point at missing blobs. Then the store's
// engine sweeps the plan, rows deleted and committed before their blobs
// go, in short holds of its lock with writers let in between, each
// checking again that no part uses what it deletes. A dry run returns what
// the plan would remove, and takes no lock.
//
// One gc runs at a time on an index, however many machines share it (the
// index's gc lock, an advisory lock on PostgreSQL), taken before the plan
// and checked before each delete.
func (s *Store) GC(ctx context.Context, o GCOptions) (GCResult, error) {
	e, err := s.writer("gc")
	if err != nil {
		return GCResult{}, err
	}
	timeout, err := checkGCOptions(o)
	if err != nil {
		return GCResult{}, err
	}
	done, short := e.freeSpace()
	defer done()
	var gcLock *index.GCLock
	if !o.DryRun {
		if gcLock, err = s.indexGCLock(ctx); err != nil {
			return GCResult{}, err
		}
		defer gcLock.Release()
	}
	p, err := s.planGC(ctx, o, o.DryRun)
	if err != nil {
		return GCResult{}, err
	}
	if o.DryRun {
		return p.DryRun(), nil
	}
	if err := p.checkShare(o); err != nil {
		return GCResult{}, err
	}
	if err := fault(e, "gc:marked"); err != nil {
		return GCResult{}, fmt.Errorf("gc: sweep (nothing deleted): %w", err)
	}
	res := GCResult{KeptYoung: len(p.Young)}
	err = e.sweepGC(ctx, p, func() error { return gcLock.Held(ctx) }, timeout, &res)
	slices.SortFunc(res.Removed, byFileName)
	if err == nil && !short {
		// On a nearly full disk, what gc freed is for the store's reserve
		// and its writers, not for postings.
		res.Search = s.maintainSearch(ctx, false)
		res.IndexFreed = s.reclaimIndex(ctx)
	}
	return res, err
}

// PlanGC decides what GC would remove now with o's grace period, and why,
// and removes nothing. It fails with ErrMissingBlobs while rows point at
// missing blobs, as GC does.
func (s *Store) PlanGC(ctx context.Context, o GCOptions) (*GCPlan, error) {
	return s.planGC(ctx, o, true)
}

// planGC is PlanGC; packs says whether to plan for packs.
func (s *Store) planGC(ctx context.Context, o GCOptions, packs bool) (*GCPlan, error) {
	if _, err := checkGCOptions(o); err != nil {
		return nil, err
	}
	p := &GCPlan{At: s.now(), Grace: o.Grace, looseCopies: map[cas.Blob]cas.Entry{}, planPacks: packs}
	if err := s.eng.markGC(ctx, p, o.Progress); err != nil {
		return nil, err
	}
	if err := s.recheckMissing(ctx, p); err != nil {
		return nil, err
	}
	if err := s.refuseMissing(ctx, p); err != nil {
		return nil, err
	}
	slices.SortFunc(p.Remove, byGCBlob)
	slices.SortFunc(p.Young, byGCBlob)
	return p, nil
}

// recheckMissing looks again at a row used and a blob the mark did not
// see: stored since its shard was walked, or packed meanwhile, or truly
// missing.
func (s *Store) recheckMissing(ctx context.Context, p *GCPlan) error {
	missing := p.Missing[:0]
	for _, b := range p.Missing {
		there, err := s.eng.present(ctx, b)
		if err != nil {
			return listError("blob files", err)
		}
		if !there {
			missing = append(missing, b)
		}
	}
	p.Missing = missing
	return nil
}

// refuseMissing fails when the plan's rows point at blobs that are
// nowhere, but for blobs Repair quarantined, which are known damage whose
// rows wait for the same content to be written again.
func (s *Store) refuseMissing(ctx context.Context, p *GCPlan) error {
	if len(p.Missing) == 0 {
		return nil
	}
	quarantined, err := s.Quarantined(ctx)
	if err != nil {
		return fmt.Errorf("gc: %w (nothing deleted)", err)
	}
	p.Missing = slices.DeleteFunc(p.Missing, func(b cas.Blob) bool { return quarantined[b] })
	if len(p.Missing) == 0 {
		return nil
	}
	slices.SortFunc(p.Missing, byFileName)
	hint := "run casctl verify"
	if _, ok := s.eng.(repairer); ok {
		hint = "casctl repair drops their rows"
	}
	return fmt.Errorf("gc: %w: %s, such as %s; nothing deleted; %s",
		ErrMissingBlobs, nOf(len(p.Missing), "blob"), s.eng.name(p.Missing[0].RelPath()), hint)
}

// beginSweep is the first step of every sweep, under the engine's lock: a
// test's way to fail it, a last look that the index's gc lock is held, and
// the rows of blobs that are nowhere deleted. Nothing is deleted before.
func beginSweep(ctx context.Context, e engine, ix *index.Index, p *GCPlan, held func() error) error {
	if err := fault(e, "gc:sweep"); err != nil {
		return fmt.Errorf("gc: sweep (nothing deleted): %w", err)
	}
	if err := held(); err != nil {
		return fmt.Errorf("gc: %w (nothing deleted)", err)
	}
	if len(p.StaleRows) > 0 {
		if _, err := ix.DeleteBlobRows(ctx, p.StaleRows); err != nil {
			return fmt.Errorf("gc: %w", err)
		}
	}
	return nil
}

// Share is the share of the store's blobs the plan removes that no index
// row names (see GCOptions.MaxShare), and how many they are.
func (p *GCPlan) Share() (float64, int) {
	n := 0
	for _, b := range p.Remove {
		if b.Reason == GCNoRow {
			n++
		}
	}
	if p.Blobs == 0 {
		return 0, n
	}
	return float64(n) / float64(p.Blobs), n
}

// checkShare refuses a plan that removes more than o lets gc remove at
// once.
func (p *GCPlan) checkShare(o GCOptions) error {
	limit := o.MaxShare
	if limit == 0 {
		limit = DefaultMaxShare
	}
	share, n := p.Share()
	if o.Force || share <= limit || n < gcGuardMin {
		return nil
	}
	return fmt.Errorf("gc: %d of the store's %d blobs (%.0f %%) are named by no index row, more than %.0f %%: %w; "+
		"nothing deleted. The index may have lost rows (restored from an older copy?): casctl verify lists them; "+
		"if they are garbage indeed, run gc again with --force (GCOptions.Force)", n, p.Blobs, 100*share, 100*limit, ErrGCShare)
}

// cutoff is the newest time a blob may have to go.
func (p *GCPlan) cutoff() time.Time { return p.At.Add(-p.Grace) }

// old reports whether a time is at least the grace period before the
// plan. A file stamped in the future (a clock set back, a copy from
// another machine) is taken as stamped now, so that it ages like the rest.
func (p *GCPlan) old(t time.Time) bool {
	if t.After(p.At) {
		t = p.At
	}
	return !t.After(p.cutoff())
}

// unused adds a blob no part uses to what goes, or to what stays young.
func (p *GCPlan) unused(b GCBlob) {
	if p.old(b.ModTime) {
		p.Remove = append(p.Remove, b)
	} else {
		p.Young = append(p.Young, b)
	}
}

// DryRun is what GC reports of the plan on a dry run: what it would
// remove.
func (p *GCPlan) DryRun() GCResult {
	res := GCResult{DryRun: true, KeptYoung: len(p.Young), Removed: []cas.Blob{}}
	for _, b := range p.Remove {
		if b.Pack != "" {
			// Its bytes go when its pack is rewritten.
			res.UnusedPacked++
			res.UnusedPackedBytes += b.Size
			continue
		}
		res.RemovedBlobs++
		res.FreedBytes += b.Size
		res.Removed = append(res.Removed, b.Blob)
	}
	for _, t := range p.Temps {
		if t.InUse {
			res.InUseTemp++
		} else {
			res.RemovedTemp++
		}
	}
	res.Packs = packSweep(p)
	return res
}

// byFileName orders blobs by their file names: by digest, then extension
// (the hex of a digest sorts as its bytes do).
func byFileName(a, b cas.Blob) int {
	if c := bytes.Compare(a.Digest[:], b.Digest[:]); c != 0 {
		return c
	}
	return strings.Compare(a.Ext, b.Ext)
}

func byGCBlob(a, b GCBlob) int { return byFileName(a.Blob, b.Blob) }

// keysOf lists the keys of parts, for messages.
func keysOf(ps []index.Part) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Key
	}
	return out
}

// checkGCOptions refuses options that make no sense and returns how long
// gc waits for writers.
func checkGCOptions(o GCOptions) (time.Duration, error) {
	if o.Grace < 0 {
		return 0, fmt.Errorf("gc: negative grace period %v", o.Grace)
	}
	if o.MaxShare < 0 || o.MaxShare > 1 {
		return 0, fmt.Errorf("gc: share %v out of 0..1", o.MaxShare)
	}
	if o.LockTimeout < 0 {
		return 0, fmt.Errorf("gc: negative lock timeout %v", o.LockTimeout)
	}
	if o.LockTimeout == 0 {
		return DefaultGCLockTimeout, nil
	}
	return o.LockTimeout, nil
}

// indexGCLock takes the index's gc lock, one gc at a time on an index
// however many machines share it: gc.lock is a file lock, which holds only
// for the processes of one machine.
func (s *Store) indexGCLock(ctx context.Context) (*index.GCLock, error) {
	l, err := s.ix.AcquireGCLock(ctx)
	if errors.Is(err, index.ErrGCRunning) {
		return nil, fmt.Errorf("gc: %w on this store's index (%s); nothing deleted, try again when it is done",
			index.ErrGCRunning, s.ix.Path())
	}
	if err != nil {
		return nil, fmt.Errorf("gc: %w (nothing deleted)", err)
	}
	return l, nil
}

// markError is an error of gc's mark, which deletes nothing.
type markError struct {
	what string
	err  error
}

func (m *markError) Error() string {
	return fmt.Sprintf("gc: list %s (nothing deleted): %v", m.what, m.err)
}

func (m *markError) Unwrap() error { return m.err }

// listError is the error of a mark that failed listing what: it says
// nothing was deleted, once, however deep the failure.
func listError(what string, err error) error {
	var m *markError
	if errors.As(err, &m) {
		return err
	}
	return &markError{what, err}
}

// nOf says n things in words: "1 blob", "3 blobs".
func nOf(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
