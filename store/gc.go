package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// DefaultGrace is how old an unreferenced blob must be before gc removes it,
// unless told otherwise.
const DefaultGrace = time.Hour

// ErrMissingBlobs is returned by GC when index rows point at blob files that
// are not there: something is wrong that verify should look at first.
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
}

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
}

// GC removes the blobs no index row uses and that are older than the grace
// period, and temp files older than it. It marks without a lock, writers
// writing on, and holds gc.lock exclusively only while it sweeps, so that
// no writer is between its blob and its row then; a dry run takes no lock. It
// fails closed: any error while listing rows or files stops it before it
// deletes anything. It refuses to run while rows point at missing blobs.
// Rows are deleted and committed before their files are unlinked.
func (s *Store) GC(ctx context.Context, o GCOptions) (GCResult, error) {
	if err := s.writable("gc"); err != nil {
		return GCResult{}, err
	}
	s.release()
	defer makeReserve(s.dir, s.reserve)
	if o.Grace < 0 {
		return GCResult{}, fmt.Errorf("store: gc: negative grace period %v", o.Grace)
	}
	if o.LockTimeout < 0 {
		return GCResult{}, fmt.Errorf("store: gc: negative lock timeout %v", o.LockTimeout)
	}
	timeout := o.LockTimeout
	if timeout == 0 {
		timeout = DefaultGCLockTimeout
	}
	res := GCResult{DryRun: o.DryRun}
	now := s.now()
	cutoff := now.Add(-o.Grace)
	// A file stamped in the future (a clock set back, a copy from another
	// machine) is taken as stamped now, so that it ages like the rest.
	old := func(t time.Time) bool {
		if t.After(now) {
			t = now
		}
		return !t.After(cutoff)
	}

	// Mark: what the index uses, what is on disk.
	if err := s.fault("gc:referenced"); err != nil {
		return GCResult{}, fmt.Errorf("store: gc: list referenced blobs (nothing deleted): %w", err)
	}
	refs, err := s.index.ReferencedBlobs(ctx)
	if err != nil {
		return GCResult{}, fmt.Errorf("store: gc: list referenced blobs (nothing deleted): %w", err)
	}
	used := make(map[cas.Blob]bool, len(refs))
	for _, r := range refs {
		used[r.Blob] = true
	}
	var (
		onDisk = map[cas.Blob]cas.Entry{}
		temps  []cas.Entry
	)
	err = s.blobs.Walk(ctx, func(e cas.Entry) error {
		if err := s.fault("gc:walk"); err != nil {
			return err
		}
		switch e.Kind {
		case cas.EntryBlob:
			onDisk[e.Blob] = e
		case cas.EntryTemp:
			temps = append(temps, e)
		}
		if o.Progress != nil {
			o.Progress(len(onDisk), len(refs))
		}
		return nil
	})
	if err == nil {
		err = s.packedEntries(ctx, onDisk)
	}
	if err != nil {
		return GCResult{}, fmt.Errorf("store: gc: list blob files (nothing deleted): %w", err)
	}
	var missing []cas.Blob
	for b := range used {
		if _, ok := onDisk[b]; !ok {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		// Blobs Repair quarantined are known damage: their rows wait for
		// the same content to be written again.
		quarantined, err := s.Quarantined(ctx)
		if err != nil {
			return GCResult{}, fmt.Errorf("store: gc: %w (nothing deleted)", err)
		}
		missing = slices.DeleteFunc(missing, func(b cas.Blob) bool { return quarantined[b] })
	}
	if len(missing) > 0 {
		sort.Slice(missing, func(i, j int) bool { return missing[i].FileName() < missing[j].FileName() })
		return GCResult{}, fmt.Errorf("store: gc: %w: %d blobs, such as %s; nothing deleted; casctl repair drops their rows",
			ErrMissingBlobs, len(missing), s.blobs.Path(missing[0]))
	}
	if err := s.fault("gc:unreferenced"); err != nil {
		return GCResult{}, fmt.Errorf("store: gc: list unreferenced blobs (nothing deleted): %w", err)
	}
	unrefRows, err := s.index.UnreferencedBlobs(ctx)
	if err != nil {
		return GCResult{}, fmt.Errorf("store: gc: list unreferenced blobs (nothing deleted): %w", err)
	}

	var candidates []cas.Blob
	for b, e := range onDisk {
		if used[b] {
			continue
		}
		if !old(e.ModTime) {
			res.KeptYoung++
			continue
		}
		candidates = append(candidates, b)
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].FileName() < candidates[j].FileName() })
	// Rows whose file is gone and that no part uses: nothing to unlink.
	var stale []cas.Blob
	for _, r := range unrefRows {
		if _, ok := onDisk[r.Blob]; !ok {
			stale = append(stale, r.Blob)
		}
	}
	var oldTemps []cas.Entry
	for _, t := range temps {
		if old(t.ModTime) {
			oldTemps = append(oldTemps, t)
		}
	}
	if o.DryRun {
		for _, b := range candidates {
			if isPacked(onDisk[b]) {
				// Its bytes go when its pack is rewritten.
				res.UnusedPacked++
				res.UnusedPackedBytes += onDisk[b].Size
				continue
			}
			res.RemovedBlobs++
			res.FreedBytes += onDisk[b].Size
			res.Removed = append(res.Removed, b)
		}
		res.RemovedTemp = len(oldTemps)
		dying := make(map[cas.Blob]bool, len(candidates))
		for _, b := range candidates {
			dying[b] = true
		}
		res.Packs, err = s.sweepPacks(ctx, cutoff, true, onDisk, dying)
		if err != nil {
			return GCResult{}, fmt.Errorf("store: gc: packs: %w", err)
		}
		return res, nil
	}

	// The sweep holds gc.lock exclusively, so that no writer is between its
	// blob and its row: the writers that were, while the mark ran without
	// the lock, have committed by now, and the deletes below check each
	// row again inside their transaction (a blob referenced since the mark
	// keeps its row, so keeps its file).
	unlock, err := s.exclusiveLock(ctx, timeout)
	if err != nil {
		return GCResult{}, err
	}
	defer unlock()
	if err := s.fault("gc:sweep"); err != nil {
		return GCResult{}, fmt.Errorf("store: gc: sweep (nothing deleted): %w", err)
	}
	// Sweep: rows first, committed; then files.
	if len(stale) > 0 {
		if _, err := s.index.DeleteBlobRows(ctx, stale); err != nil {
			return GCResult{}, fmt.Errorf("store: gc: %w", err)
		}
	}
	gone, err := s.index.DeleteUnreferencedAt(ctx, candidates, cutoff, now)
	if err != nil {
		return GCResult{}, fmt.Errorf("store: gc: %w", err)
	}
	var errs []string
	for _, b := range gone {
		if isPacked(onDisk[b]) {
			// Its bytes go when its pack is rewritten, below.
			res.UnusedPacked++
			res.UnusedPackedBytes += onDisk[b].Size
			continue
		}
		if err := s.blobs.Remove(ctx, b); err != nil && !errors.Is(err, cas.ErrNotFound) {
			errs = append(errs, err.Error())
			continue
		}
		res.RemovedBlobs++
		res.FreedBytes += onDisk[b].Size
		res.Removed = append(res.Removed, b)
	}
	for _, t := range oldTemps {
		if err := s.blobs.RemoveTemp(ctx, t.RelPath); errors.Is(err, cas.ErrTempInUse) {
			res.InUseTemp++
			continue
		} else if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		res.RemovedTemp++
	}
	if res.Packs, err = s.sweepPacks(ctx, cutoff, false, onDisk, nil); err != nil {
		errs = append(errs, "packs: "+err.Error())
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("store: gc: %d files could not be removed (their rows are gone; the next gc retries): %s",
			len(errs), strings.Join(errs, "; "))
	}
	return res, nil
}

// keysOf lists the keys of parts, for messages.
func keysOf(ps []index.Part) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Key
	}
	return out
}
