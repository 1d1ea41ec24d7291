package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/internal/cancel"
)

// sweepGC sweeps a local store's plan: the rows of blobs that are nowhere
// in a first hold of gc.lock, then the candidates a batch per hold (see
// sweeper.sweep), and temp files and packs in a last hold.
func (e *localEngine) sweepGC(ctx context.Context, p *GCPlan, held func() error, timeout time.Duration, res *GCResult) error {
	sw := &sweeper{e: e, timeout: timeout}
	defer sw.unlock()
	// The first hold: gc.lock exclusively before anything is deleted.
	if err := sw.lock(ctx); err != nil {
		return err
	}
	if err := beginSweep(ctx, e, e.ix, p, held); err != nil {
		return err
	}
	sw.unlock()
	var errs []string
	res.Removed = make([]cas.Blob, 0, len(p.Remove))
	// A hold sets blobs aside from two goroutines: mu guards res, errs
	// and discarded (the files set aside in the current hold, unlinked
	// once gc.lock is released) while it does.
	var mu sync.Mutex
	var discarded []string
	err := sw.sweep(ctx, p.Remove, p.cutoff(), p.At, held, func(g *GCBlob) {
		if g.Pack != "" {
			// Its bytes go when its pack is rewritten, below.
			mu.Lock()
			res.UnusedPacked++
			res.UnusedPackedBytes += g.Size
			mu.Unlock()
			return
		}
		rel, err := e.blobs.Discard(ctx, g.Blob)
		mu.Lock()
		defer mu.Unlock()
		if err != nil && !errors.Is(err, cas.ErrNotFound) {
			errs = append(errs, err.Error())
			return
		}
		if err == nil {
			discarded = append(discarded, rel)
		}
		res.RemovedBlobs++
		res.FreedBytes += g.Size
		res.Removed = append(res.Removed, g.Blob)
	}, func() {
		// On one goroutine: writers are let in meanwhile, and need a core.
		for _, rel := range discarded {
			if err := e.blobs.RemoveDiscarded(rel); err != nil {
				errs = append(errs, err.Error())
			}
		}
		discarded = discarded[:0]
	})
	if err != nil {
		return fmt.Errorf("gc: %w (the blobs removed so far are gone; the next gc removes the rest)", err)
	}
	last, err := e.sweepLast(ctx, sw, p, res)
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	if errs = append(errs, last...); len(errs) > 0 {
		return fmt.Errorf("gc: %s could not be removed (their rows are gone; the next gc retries): %s",
			nOf(len(errs), "file"), strings.Join(errs, "; "))
	}
	return nil
}

// sweepLast removes temp files and sweeps packs, in a last hold of gc.lock,
// when there are any; it returns what could not be removed.
func (e *localEngine) sweepLast(ctx context.Context, sw *sweeper, p *GCPlan, res *GCResult) ([]string, error) {
	if len(p.Temps) == 0 && !p.hasPacks {
		return nil, nil
	}
	if err := sw.lock(ctx); err != nil {
		return nil, err
	}
	defer sw.unlock()
	var errs []string
	for _, t := range p.Temps {
		if err := e.blobs.RemoveTemp(ctx, t.Path); errors.Is(err, cas.ErrTempInUse) {
			res.InUseTemp++
			continue
		} else if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		res.RemovedTemp++
	}
	if p.hasPacks {
		// A packer writes its packs without the writers' lock: the packs
		// wait for the next gc while one runs.
		if unlock, ok := e.packerAway(); ok {
			var err error
			res.Packs, err = e.sweepPacks(ctx, p)
			unlock()
			if err != nil {
				errs = append(errs, "packs: "+err.Error())
			}
		}
	}
	return errs, nil
}

// How gc sweeps: in holds of gc.lock of about sweepHold each, with writers
// let in between. A hold deletes the rows of a batch of candidates in one
// transaction and sets their files aside (cas.Store.Discard: a rename),
// which are unlinked once it ends; the batch starts at sweepRows blobs and
// grows or shrinks so that a hold lasts about sweepHold, between
// sweepMinRows and sweepMaxRows. A write that finds gc holding the lock
// waits for one hold.
const (
	sweepRows    = 250
	sweepMinRows = 25
	sweepMaxRows = 2000
	sweepHold    = 15 * time.Millisecond
)

// sweepGap is how long gc lets writers in between two holds of gc.lock,
// after a hold that lasted hold: a quarter of it, so that writers get a
// fifth of the time at least however slow the disk's syncs make a hold,
// and at least two polls of a writer waiting on gc.intent, so that one
// scheduled a little late still finds the lock free. It stops growing at
// sweepMaxGap: a hold that long is already more than writers should wait.
func sweepGap(hold time.Duration) time.Duration {
	return max(2*sharedPoll, min(hold/4, sweepMaxGap))
}

// sweepMaxGap bounds sweepGap.
const sweepMaxGap = 50 * time.Millisecond

// sweeper holds gc.lock for gc's sweep, a hold at a time.
type sweeper struct {
	e       *localEngine
	timeout time.Duration
	// release ends the current hold; nil when gc holds no lock.
	release  func()
	held     time.Time
	released time.Time
	// hold is how long the last hold lasted.
	hold time.Duration
}

// gapLeft returns how much longer, at now, gc lets writers in before it
// takes gc.lock again: sweepGap of the last hold, from its end.
func (w *sweeper) gapLeft(now time.Time) time.Duration {
	if w.released.IsZero() {
		return 0
	}
	return max(0, sweepGap(w.hold)-now.Sub(w.released))
}

// lock takes gc.lock exclusively unless gc holds it already. Writers
// waiting on gc.intent poll for it: after a hold, lock gives them
// sweepGap of it to take their share before it asks for the lock again.
func (w *sweeper) lock(ctx context.Context) error {
	if w.release != nil {
		return nil
	}
	if d := w.gapLeft(time.Now()); d > 0 {
		if err := cancel.Sleep(ctx, d); err != nil {
			return err
		}
	}
	u, err := w.e.locks.exclusive(ctx, w.timeout)
	if err != nil {
		return err
	}
	w.release, w.held = u, time.Now()
	return nil
}

// unlock ends the current hold, if any.
func (w *sweeper) unlock() {
	if w.release != nil {
		w.release()
		w.release, w.released = nil, time.Now()
		w.hold = w.released.Sub(w.held)
	}
}

// sweep removes the candidates, a batch per hold of gc.lock: the rows of
// the batch deleted in one transaction, in the order of their ids (each
// delete checks again that no part uses the row and that it is old
// enough, so a blob referenced since the mark keeps its row), committed,
// then the files of the blobs whose rows went. With gc.lock held no writer
// is between its blob and its row, so none can store a blob again between
// its row's delete and its unlink. Blobs that had no row at the mark
// (files no row names) get a last look at the rows in the hold that sets
// them aside: a writer may have stored the same content, and committed
// its row, since the mark. heldIndex says the index's gc lock is still
// held, before each delete. remove takes one blob out of the store; it is
// called from two goroutines at once (see removeAll). released is called after
// each hold, once gc.lock is released: what a hold's removes leave to do
// without the lock (unlinks of the files they set aside) is done there,
// while writers go on. The candidates are reordered in place: those with
// no row first, by file name, then the others by id.
func (w *sweeper) sweep(ctx context.Context, candidates []GCBlob, cutoff, now time.Time,
	heldIndex func() error, remove func(*GCBlob), released func()) error {
	slices.SortFunc(candidates, func(a, b GCBlob) int {
		switch {
		case (a.id == 0) != (b.id == 0):
			if a.id == 0 {
				return -1
			}
			return 1
		case a.id == 0:
			return byFileName(a.Blob, b.Blob)
		}
		return cmp.Compare(a.id, b.id)
	})
	split := slices.IndexFunc(candidates, func(g GCBlob) bool { return g.id != 0 })
	if split < 0 {
		split = len(candidates)
	}
	noRow, rows := candidates[:split], candidates[split:]
	n := sweepRows
	// fit sizes the next batch from how long this hold took with n.
	fit := func() { n = nextBatch(n, time.Since(w.held)) }
	// Scratch of every batch.
	var (
		blobs  []cas.Blob
		ids    []index.BlobID
		byBlob = map[cas.Blob]*GCBlob{}
		batch  []*GCBlob
	)
	for len(noRow) > 0 {
		if err := w.lock(ctx); err != nil {
			return err
		}
		look := noRow[:min(len(noRow), n)]
		noRow = noRow[len(look):]
		blobs = blobs[:0]
		for _, g := range look {
			blobs = append(blobs, g.Blob)
		}
		has, err := w.e.ix.BlobsWithRows(ctx, blobs)
		if err != nil {
			return err
		}
		batch = batch[:0]
		for i := range look {
			if !has[look[i].Blob] {
				batch = append(batch, &look[i])
			}
		}
		removeAll(batch, remove)
		fit()
		w.unlock()
		released()
	}
	// most is the largest batch the disk has room for: a batch a full disk
	// refuses is rolled back, and tried again at half the size.
	most := sweepMaxRows
	for len(rows) > 0 {
		if err := w.lock(ctx); err != nil {
			return err
		}
		if err := heldIndex(); err != nil {
			return err
		}
		chunk := rows[:min(len(rows), n, most)]
		ids = ids[:0]
		clear(byBlob)
		for i := range chunk {
			ids = append(ids, index.BlobID{ID: chunk[i].id, Blob: chunk[i].Blob})
			byBlob[chunk[i].Blob] = &chunk[i]
		}
		gone, err := w.e.ix.DeleteUnusedRows(ctx, ids, cutoff, now)
		if errors.Is(err, cas.ErrDiskFull) && len(chunk) > 1 {
			most = len(chunk) / 2
			w.e.ix.Checkpoint(ctx)
			w.unlock()
			continue
		}
		if err != nil {
			return err
		}
		rows = rows[len(chunk):]
		if err := fault(w.e, "gc:rows-deleted"); err != nil {
			return err
		}
		batch = batch[:0]
		for _, b := range gone {
			if g := byBlob[b]; g != nil {
				batch = append(batch, g)
			}
		}
		removeAll(batch, remove)
		fit()
		w.unlock()
		released()
	}
	return nil
}

// nextBatch returns how many blobs the next hold of the sweep takes, after
// a hold that took took with n: n scaled to a hold of sweepHold, by half
// to twice n, between sweepMinRows and sweepMaxRows. (Halving past
// sweepHold and doubling below a third of it left holds of 5 to 15 ms,
// 10 on average: more holds, each with its gap and its wait for gc.lock.)
func nextBatch(n int, took time.Duration) int {
	next := 2 * n
	if took > 0 {
		next = int(min(float64(2*n), float64(n)*float64(sweepHold)/float64(took)))
	}
	return min(sweepMaxRows, max(sweepMinRows, n/2, next))
}

// removeMin is the fewest blobs removeAll gives a goroutine of its own.
const removeMin = 16

// removeAll calls remove for each of gs, on two goroutines when there are
// enough of them: while gc holds gc.lock the writers wait, and the index's
// delete took one core; the renames of a hold's files take both.
func removeAll(gs []*GCBlob, remove func(*GCBlob)) {
	if len(gs) < 2*removeMin {
		for _, g := range gs {
			remove(g)
		}
		return
	}
	half := len(gs) / 2
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, g := range gs[half:] {
			remove(g)
		}
	})
	for _, g := range gs[:half] {
		remove(g)
	}
	wg.Wait()
}
