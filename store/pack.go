package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/internal/cancel"
)

// PackLockFile keeps packers apart: one pack at a time per store.
const PackLockFile = "pack.lock"

// DefaultPackAge is how long a blob must have gone unreferenced before
// Pack moves it into a pack, unless told otherwise.
const DefaultPackAge = 24 * time.Hour

// PackLimit is the most uncompressed blob bytes one pack file takes; more
// cold blobs make several packs, so that gc rewrites a pack of bounded size.
const PackLimit = 64 << 20

// PackOptions configure Pack.
type PackOptions struct {
	// OlderThan is how long ago a blob must have been written or last
	// reused to be packed. DefaultPackAge is the usual value; zero packs
	// every loose blob some part uses.
	OlderThan time.Duration
	// Active, when set, leaves loose every blob that a part of a run
	// written to within it uses, whatever its age: the run's pointers are
	// likely still in a conversation, to be read by file tools. casctl
	// pack and maintenance set it to the retention policy's window.
	Active time.Duration
	// DryRun reports what would be packed and changes nothing.
	DryRun bool
	// SearchLater leaves the search index as gc does (see maintainSearch):
	// what it lags is indexed by a later pack or grep, so that the pack's
	// time does not grow with the blobs written since the last. Automatic
	// maintenance sets it.
	SearchLater bool
	// Progress, when set, is called as blobs are packed.
	Progress func(done, total int)
}

// PackResult says what Pack did, or would do on a dry run.
type PackResult struct {
	DryRun bool
	// Packs lists the pack files written.
	Packs []string
	// Blobs counts the blobs packed, RawBytes their size.
	Blobs    int
	RawBytes int64
	// PackBytes is the size of the pack files written.
	PackBytes int64
	// RemovedLoose counts the loose files removed once packed;
	// RemovedShards the shard directories left empty and removed.
	RemovedLoose  int
	RemovedShards int
	// Search says what pack did to the search index afterwards (see
	// IndexSearch).
	Search SearchIndexResult
	// IndexFreed is what the index database gave back to the file system
	// afterwards: the pages of the search segments dropped.
	IndexFreed int64
}

// Pack moves loose blobs that no write has used for o.OlderThan into zstd
// pack files, similar blobs (same extension, tool, run) side by side, and
// removes their loose files. Each pack is durable and its rows committed
// before any loose file goes, so a crash at any point leaves every blob
// readable, loose or packed. Reads find packed blobs transparently, by
// digest, whatever path an old pointer names. Writers go on meanwhile; gc
// waits, as for any writer.
func (s *Store) Pack(ctx context.Context, o PackOptions) (PackResult, error) {
	p, err := capability[packer](s, "pack", true)
	if err != nil {
		return PackResult{DryRun: o.DryRun}, err
	}
	res, err := p.pack(ctx, o)
	if err == nil && !o.DryRun {
		res.Search = s.maintainSearch(ctx, !o.SearchLater)
		res.IndexFreed = s.reclaimIndex(ctx)
		if le, ok := s.eng.(*localEngine); ok && (res.Search.Segments > 0 || res.Search.Dropped > 0 || res.Search.Empty > 0) {
			le.truncateLog(ctx) // as pack does: the index's new rows need no log kept
		}
	}
	return res, err
}

// pack is Pack on a local store.
func (e *localEngine) pack(ctx context.Context, o PackOptions) (PackResult, error) {
	if o.OlderThan < 0 {
		return PackResult{}, fmt.Errorf("pack: negative age %v", o.OlderThan)
	}
	if o.Active < 0 {
		return PackResult{}, fmt.Errorf("pack: negative active window %v", o.Active)
	}
	res := PackResult{DryRun: o.DryRun}
	unlockPack, err := e.packLock(ctx)
	if err != nil {
		return res, err
	}
	defer unlockPack()
	var activeSince time.Time
	if o.Active > 0 {
		activeSince = e.now().Add(-o.Active)
	}
	cands, err := e.ix.PackCandidates(ctx, e.now().Add(-o.OlderThan), activeSince)
	if err != nil {
		return res, fmt.Errorf("pack: %w", err)
	}
	// Only loose blobs: one written again after it was packed has a row
	// naming its pack already, and a blob missing from disk is verify's.
	loose := cands[:0]
	for _, c := range cands {
		st, err := e.blobs.Stat(ctx, c.Blob)
		if err != nil || st.Pack != "" {
			continue
		}
		loose = append(loose, c)
	}
	slices.SortStableFunc(loose, func(a, b index.PackCandidate) int {
		return cmp.Or(strings.Compare(a.Blob.Ext, b.Blob.Ext), strings.Compare(a.Tool, b.Tool),
			strings.Compare(a.Run, b.Run), strings.Compare(a.Key, b.Key))
	})
	if o.DryRun {
		for _, c := range loose {
			res.Blobs++
			res.RawBytes += c.Size
		}
		return res, nil
	}
	limit := packLimit(e)
	for len(loose) > 0 {
		n, size := 0, int64(0)
		for n < len(loose) && (n == 0 || size+loose[n].Size <= limit) {
			size += loose[n].Size
			n++
		}
		batch := loose[:n]
		loose = loose[n:]
		if err := e.packBatch(ctx, batch, &res); err != nil {
			return res, err
		}
		if o.Progress != nil {
			o.Progress(res.Blobs, res.Blobs+len(loose))
		}
	}
	if len(res.Packs) > 0 {
		if res.RemovedShards, err = e.blobs.RemoveEmptyShards(ctx); err != nil {
			return res, fmt.Errorf("pack: %w", err)
		}
		e.truncateLog(ctx)
	}
	return res, nil
}

// truncateLog folds the index's write-ahead log into the database and cuts
// it to nothing, once a pack has changed the rows of the blobs it took in.
// The log otherwise keeps its blocks for as long as any process has the
// index open: those of the pack's own transactions (100 KiB beside an index
// of 440 KiB on the real trace's store) and of the largest run of writes
// before them, up to SQLite's automatic checkpoint at a thousand pages. It
// is safe with writers in other processes: SQLite waits, at most its busy
// timeout, for the writer of the moment and for readers of older pages to
// finish, holding new writers back meanwhile (their own busy timeout and
// retries wait for it), and gives up leaving the log whole when they do
// not. It is best effort: the pack is done and recorded whatever it does.
func (e *localEngine) truncateLog(ctx context.Context) {
	e.ix.Checkpoint(ctx)
}

// packBatch writes one pack, records it, then removes the loose files.
// Writing the pack, the long part, takes no lock of the writers': the pack
// is no blob's until its rows are recorded, and gc leaves the packs and
// temp files of packs alone while a packer holds pack.lock (see
// sweepLast). The rows are recorded holding the writers' side of gc.lock,
// as a write's are, so that gc sees them before it sweeps; the loose
// files go after, as the copies they now are.
func (e *localEngine) packBatch(ctx context.Context, batch []index.PackCandidate, res *PackResult) error {
	blobs := make([]cas.Blob, len(batch))
	for i, c := range batch {
		blobs[i] = c.Blob
	}
	if err := fault(e, "pack:write"); err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	info, err := e.blobs.WritePack(ctx, blobs)
	if errors.Is(err, cas.ErrNotFound) {
		return nil // every blob of the batch went since it was chosen
	}
	if err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	if err := fault(e, "pack:record"); err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	blobs = info.Blobs()
	if err := e.recordPack(ctx, info.Name, info.Size, info.Raw, blobs); err != nil {
		return err
	}
	res.Packs = append(res.Packs, info.Name)
	res.Blobs += len(info.Entries)
	res.RawBytes += info.Raw
	res.PackBytes += info.Size
	if err := fault(e, "pack:remove"); err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	for _, b := range blobs {
		if err := e.blobs.Remove(ctx, b); err != nil && !errors.Is(err, cas.ErrNotFound) {
			return fmt.Errorf("pack: %s is packed, its loose file stays: %w", b, err)
		}
		res.RemovedLoose++
	}
	return nil
}

// recordPack records the pack name and marks its blobs as held by it.
func (e *localEngine) recordPack(ctx context.Context, name string, size, raw int64, blobs []cas.Blob) error {
	var held time.Duration
	var slice []cas.Blob
	// A slice at a time, each in a hold of the writers' lock and a
	// transaction of its own, sized to last about packSliceHold, with a
	// pause as long as the slice took between two: a writer waits for one
	// slice at most, and a gc that wants the lock gets it between two.
	// Without the pause, writers waiting on the index (whose busy handler
	// sleeps between tries) would mostly wake to find the next slice
	// under way.
	rows := packSliceRows
	for i := 0; i < len(blobs); i += len(slice) {
		if i > 0 {
			if err := cancel.Sleep(ctx, packSliceGap(held)); err != nil {
				return err
			}
			rows = nextSliceRows(rows, held)
		}
		slice = blobs[i:min(i+rows, len(blobs))]
		start := time.Now()
		unlock, err := e.locks.shared(ctx)
		if err != nil {
			return err
		}
		if i == 0 {
			err = e.ix.RecordPack(ctx, index.PackRecord{Name: name, Size: size, Raw: raw, Blobs: slice, Entries: len(blobs)})
		} else {
			err = e.ix.MarkPacked(ctx, name, slice)
		}
		unlock()
		held = time.Since(start)
		if err != nil {
			return fmt.Errorf("pack: %w", err)
		}
		if err := fault(e, "pack:recorded-slice"); err != nil {
			return fmt.Errorf("pack: %w", err)
		}
	}
	return nil
}

// How a pack's blobs are marked as packed: packSliceRows in the first
// transaction, then as many as last about packSliceHold, between
// packSliceMinRows and packSliceMaxRows. Marking a blob updates its row and
// the counters behind stats: from a tenth of a millisecond a blob on an
// idle machine to ten times that on a busy one.
const (
	packSliceRows    = 128
	packSliceMinRows = 16
	packSliceMaxRows = 2048
	packSliceHold    = 15 * time.Millisecond
)

// nextSliceRows sizes the next slice from the last: rows took held.
func nextSliceRows(rows int, held time.Duration) int {
	switch {
	case held > 2*packSliceHold:
		rows /= 2
	case held < packSliceHold/2:
		rows *= 2
	}
	return min(max(rows, packSliceMinRows), packSliceMaxRows)
}

// packSliceGap is how long a packer leaves the index to others after
// recording a slice that took held: as long again, within bounds.
func packSliceGap(held time.Duration) time.Duration {
	return min(max(held, 2*time.Millisecond), 50*time.Millisecond)
}

// packLock keeps a second packer out while one works; like gc, a packer
// waits for another at most until its context ends or DefaultGCLockTimeout
// passes.
func (e *localEngine) packLock(ctx context.Context) (func(), error) {
	start := time.Now()
	ctx, cancel := withLockDeadline(ctx, DefaultGCLockTimeout)
	defer cancel()
	l := flock.New(filepath.Join(e.dir, PackLockFile))
	if err := pollLock(ctx, l.TryLock); err != nil {
		l.Close()
		return nil, lockedError(l.Path(), "another pack", err, time.Since(start))
	}
	return func() { l.Unlock(); l.Close() }, nil
}

// packerAway takes pack.lock without waiting, so that no packer writes a
// pack while gc sweeps packs; it reports false when a packer holds it.
func (e *localEngine) packerAway() (unlock func(), ok bool) {
	l := flock.New(filepath.Join(e.dir, PackLockFile))
	if locked, err := l.TryLock(); err != nil || !locked {
		l.Close()
		return nil, false
	}
	return func() { l.Unlock(); l.Close() }, true
}

// DefaultPackOver is the amount of cold loose bytes past which gc packs
// them (casctl gc --pack-over).
const DefaultPackOver = 256 << 20

// PackIfOver packs, as Pack does with o, when the blobs some part uses that
// are loose, unpacked and unused for o.OlderThan add up to more than limit
// bytes. It reports whether it packed. gc's callers run it after a sweep.
func (s *Store) PackIfOver(ctx context.Context, limit int64, o PackOptions) (PackResult, bool, error) {
	dry := o
	dry.DryRun = true
	res, err := s.Pack(ctx, dry)
	if err != nil || res.RawBytes <= limit {
		return res, false, err
	}
	res, err = s.Pack(ctx, o)
	return res, err == nil, err
}
