package store

import (
	"context"
	"slices"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// How gc sweeps: the rows of sweepRows candidates per transaction, without
// gc.lock, SQLite's write lock held as long as one such transaction; then,
// holding gc.lock exclusively for about sweepHold at a time, a last look at
// the rows of sweepLook blobs per query and the unlinks of those that still
// have none. Writers wait for one hold at most.
const (
	sweepRows   = 250
	sweepLook   = 250
	sweepUnlink = 1000
	sweepHold   = 20 * time.Millisecond
)

// sweeper holds gc.lock for gc's sweep, a hold at a time.
type sweeper struct {
	s       *Store
	timeout time.Duration
	// release ends the current hold; nil when gc holds no lock.
	release  func()
	held     time.Time
	released time.Time
}

// lock takes gc.lock exclusively unless gc holds it already. Writers
// waiting on gc.intent poll for it: after a hold, lock gives them time to
// take their share before it asks for the lock again.
func (w *sweeper) lock(ctx context.Context) error {
	if w.release != nil {
		return nil
	}
	if !w.released.IsZero() {
		if d := 2*sharedPoll - time.Since(w.released); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	u, err := w.s.exclusiveLock(ctx, w.timeout)
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
	}
}

// sweep removes the candidates: first their rows, committed, in the order
// of their ids and without gc.lock (each delete checks again, in its
// transaction, that no part uses the row and that it is old enough, so a
// blob referenced since the mark keeps its row); then, under gc.lock, the
// files of the blobs that have no row. The last look at the rows is what
// makes the unlinks safe: with gc.lock held no writer is between its blob
// and its row, so a blob stored again since its row was deleted has a row
// now and keeps its file, and a writer that comes after the unlink finds
// no file and writes it anew. Blobs without a row at the mark (files no
// row names) need no delete and go through the same last look. remove
// unlinks one blob, in this goroutine; the deletes run in another, ahead of
// the unlinks, so that both cores work. heldIndex says the index's gc lock
// is still held, before each delete.
func (w *sweeper) sweep(ctx context.Context, candidates []cas.Blob, ids map[cas.Blob]int64, cutoff, now time.Time,
	heldIndex func() error, remove func(cas.Blob)) error {
	var rows []index.BlobID
	var noRow []cas.Blob
	for _, b := range candidates {
		if id, ok := ids[b]; ok {
			rows = append(rows, index.BlobID{ID: id, Blob: b})
		} else {
			noRow = append(noRow, b)
		}
	}
	slices.SortFunc(rows, func(a, b index.BlobID) int { return int(min(max(a.ID-b.ID, -1), 1)) })
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []cas.Blob, 1)
	deleted := make(chan error, 1)
	go func() {
		defer close(batches)
		send := func(b []cas.Blob) bool {
			select {
			case batches <- b:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for len(noRow) > 0 {
			n := min(len(noRow), sweepUnlink)
			if !send(noRow[:n]) {
				deleted <- ctx.Err()
				return
			}
			noRow = noRow[n:]
		}
		var gone []cas.Blob
		for len(rows) > 0 {
			if err := heldIndex(); err != nil {
				deleted <- err
				return
			}
			chunk := rows[:min(len(rows), sweepRows)]
			rows = rows[len(chunk):]
			g, err := w.s.index.DeleteUnusedRows(ctx, chunk, cutoff, now)
			if err != nil {
				deleted <- err
				return
			}
			if err := w.s.fault("gc:rows-deleted"); err != nil {
				deleted <- err
				return
			}
			gone = append(gone, g...)
			if len(gone) >= sweepUnlink || len(rows) == 0 {
				if !send(gone) {
					deleted <- ctx.Err()
					return
				}
				gone = nil
			}
		}
		deleted <- nil
	}()
	fail := func(err error) error {
		cancel()
		for range batches {
		}
		return err
	}
	for batch := range batches {
		for len(batch) > 0 {
			if err := w.lock(ctx); err != nil {
				return fail(err)
			}
			look := batch[:min(len(batch), sweepLook)]
			batch = batch[len(look):]
			has, err := w.s.index.BlobsWithRows(ctx, look)
			if err != nil {
				return fail(err)
			}
			for _, b := range look {
				if !has[b] {
					remove(b)
				}
			}
			if time.Since(w.held) >= sweepHold {
				w.unlock()
			}
		}
		w.unlock()
	}
	return <-deleted
}
