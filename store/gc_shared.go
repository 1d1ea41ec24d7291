package store

// gc of a store whose blobs are in an object store that many machines
// share. No file lock spans machines, so writers and gc order themselves
// with leases in the shared PostgreSQL index:
//
//   - Every write takes a blob lease (index.BlobLease, a shared advisory
//     lock on a connection of its own) before it puts its blobs, and
//     releases it once their rows are committed. The row's commit refreshes
//     the blob's last-referenced time in the same transaction
//     (index.Record), on a new blob and on a dedup hit alike.
//   - gc takes the index's gc lock (one gc at a time), then marks without
//     any other lock: it lists the objects a shard at a time against the
//     index's rows of that shard. A candidate is an object no part uses
//     whose row was last referenced before the grace period or, with no
//     row, whose object was last written before it.
//   - Then, a batch of candidates at a time, gc takes the sweep lock
//     exclusively (index.SweepLock), trying again with a short backoff
//     while writes hold leases (it never waits in the server's lock queue,
//     where it would hold up every new lease behind it); new writes then
//     wait for the batch. Inside it, in one transaction in the sweep
//     lock's own session, it deletes the rows that are still unused and
//     still old (the transaction re-checks both) and sets the sweep fence
//     (remoteSweepWindow past the server's clock). Only then does it
//     delete those objects, within the window less a margin by its own
//     clock from before that transaction, checking now and then that it
//     still holds the sweep lock; it clears the fence and releases the
//     lock.
//
// Why no committed row loses its object: a row is committed only by a
// write holding a lease from before its put, and the commit checks in its
// transaction, under the index's write lock, that the lease still holds
// (index.WithBlobLease). If that write committed before gc's batch took
// the sweep lock, its row is there and fresh when the batch re-checks, and
// the object stays. It cannot be between its put and its commit while the
// batch holds the lock. If it takes its lease after the batch released the
// lock, its put finds the object gone and uploads it again
// (s3blob.Backend.Put asks the store, never the cache). If gc's sweep lock
// ended early (its session terminated, the database restarted), the write
// may get its lease while gc still deletes: the fence, committed only while
// gc held the lock, makes it wait until gc can no longer delete. If the
// write's own lease ended before its commit, the commit fails, commits
// nothing, and the write puts its blobs again under a new lease.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// remoteSweepChunk is how many candidates gc re-checks and deletes per
// hold of the sweep lock: writers wait for one such batch at most.
const remoteSweepChunk = 50

// remoteSweepWindow is how long, by the database server's clock from the
// commit that deletes a batch's rows, the sweep fence holds writers back
// should gc's sweep lock end early; gc deletes the batch's objects within
// it less remoteSweepMargin, by its own clock from before that commit, and
// leaves the rest to the next gc. It is shorter than DefaultLockTimeout, so
// that a write held back by the fence of a gc that died waits it out.
const remoteSweepWindow = 20 * time.Second

// remoteSweepMargin is what gc leaves of the sweep window for the clocks of
// two machines running at slightly different rates and for a delete in
// flight when it stops: at most a quarter of the window.
const remoteSweepMargin = 5 * time.Second

// remoteUploadAge is the youngest an unfinished multipart upload gc aborts,
// whatever its grace period: the object store dates an upload by its own
// clock, not gc's, and gc takes no lock against the writers uploading, so
// only an upload no live writer can still be sending is safe to abort.
const remoteUploadAge = 24 * time.Hour

// markGC is gc's mark on an object store: the objects listed a shard at a
// time (the listing is in name order, so in shard order) against the
// index's rows of the shard. It fails closed: any error listing stops gc
// before it deletes anything.
func (e *sharedEngine) markGC(ctx context.Context, p *GCPlan, progress func(done, total int)) error {
	done := 0
	var marked [256]bool
	cur, objects := -1, map[cas.Blob]cas.Entry{}
	flush := func() error {
		if cur < 0 || marked[cur] {
			return nil
		}
		marked[cur] = true
		n, err := e.markShard(ctx, p, byte(cur), objects)
		done += n
		if progress != nil {
			progress(done, done)
		}
		return err
	}
	err := e.be.Walk(ctx, func(en cas.Entry) error {
		if err := fault(e, "gc:walk"); err != nil {
			return err
		}
		sh, ok := shardOf(en.RelPath)
		if !ok || en.Kind != cas.EntryBlob {
			return nil // verify reports names that are not blobs
		}
		if sh != cur {
			if err := flush(); err != nil {
				return err
			}
			cur, objects = sh, map[cas.Blob]cas.Entry{}
		}
		objects[en.Blob] = en
		p.Blobs++
		return nil
	})
	if err == nil {
		err = flush()
	}
	for sh := 0; sh < 256 && err == nil; sh++ {
		if !marked[sh] {
			_, err = e.markShard(ctx, p, byte(sh), nil)
		}
	}
	if err != nil {
		return listError("objects", err)
	}
	return nil
}

// markShard marks one shard's rows against its objects, and returns how
// many rows it read.
func (e *sharedEngine) markShard(ctx context.Context, p *GCPlan, sh byte, objects map[cas.Blob]cas.Entry) (int, error) {
	rows, err := e.ix.BlobsInShard(ctx, sh)
	if err != nil {
		return 0, listError("referenced blobs", err)
	}
	for _, r := range rows {
		en, there := objects[r.Blob]
		delete(objects, r.Blob)
		switch {
		case r.Used && !there:
			p.Missing = append(p.Missing, r.Blob)
		case r.Used:
		case !there:
			p.StaleRows = append(p.StaleRows, r.Blob)
		default:
			// A row's last reference, not its object's time, dates it: a
			// dedup hit refreshes the row.
			p.unused(GCBlob{Blob: r.Blob, Size: en.Size, ModTime: r.LastReferenced, Reason: GCUnused, id: r.ID})
		}
	}
	for b, en := range objects {
		p.unused(GCBlob{Blob: b, Size: en.Size, ModTime: en.ModTime, Reason: GCNoRow})
	}
	return len(rows), nil
}

// sweepGC sweeps a shared store's plan (see the top of this file): the
// rows of objects that are nowhere, then the candidates a batch per hold
// of the sweep lock, then the multipart uploads writers that died left
// behind.
func (e *sharedEngine) sweepGC(ctx context.Context, p *GCPlan, held func() error, timeout time.Duration, res *GCResult) error {
	if err := beginSweep(ctx, e, e.ix, p, held); err != nil {
		return err
	}
	candidates := make([]cas.Blob, len(p.Remove))
	sizes := make(map[cas.Blob]int64, len(p.Remove))
	for i, b := range p.Remove {
		candidates[i], sizes[b.Blob] = b.Blob, b.Size
	}
	var errs []string
	sofar := "(the blobs removed so far are gone; the next gc removes the rest)"
	for len(candidates) > 0 {
		chunk := candidates[:min(len(candidates), remoteSweepChunk)]
		candidates = candidates[len(chunk):]
		if err := held(); err != nil {
			return fmt.Errorf("gc: %w %s", err, sofar)
		}
		stop, err := e.sweepChunk(ctx, p, chunk, timeout, sizes, res)
		if err != nil {
			return fmt.Errorf("gc: %w %s", err, sofar)
		}
		errs = append(errs, stop...)
	}
	// Multipart uploads that writers which died left behind hold space
	// without being objects; only those older than remoteUploadAge.
	if n, err := e.be.AbortUploads(ctx, max(p.Grace, remoteUploadAge)); err != nil {
		errs = append(errs, err.Error())
	} else {
		res.RemovedTemp = n
	}
	if len(errs) > 0 {
		return fmt.Errorf("gc: %s could not be removed (their rows are gone; the next gc retries): %s",
			nOf(len(errs), "object"), strings.Join(errs, "; "))
	}
	return nil
}

// sweepChunk sweeps one batch under the sweep lock, and clears the fence
// once done.
func (e *sharedEngine) sweepChunk(ctx context.Context, p *GCPlan, chunk []cas.Blob, timeout time.Duration,
	sizes map[cas.Blob]int64, res *GCResult) ([]string, error) {
	sl, err := e.leases.sweepLock(ctx, timeout)
	if errors.Is(err, index.ErrSweepBusy) {
		return nil, fmt.Errorf("%w: %w", ErrLocked, err)
	}
	if err != nil {
		return nil, err
	}
	defer sl.Release()
	stop, err := e.sweepBatch(ctx, sl, chunk, p.cutoff(), p.At, sizes, res)
	if err == nil {
		err = sl.ClearFence(ctx)
	}
	return stop, err
}

// sweepBatch deletes one batch's rows still unused and old under sl, then
// their objects, within the sweep window (see remoteSweepWindow), and adds
// what it removed to res. It stops early, with an error, when the window
// ends or the sweep lock turns out lost: the rows are gone then, and the
// next gc removes the objects left. It returns the objects that could not
// be removed as messages. The fence stays in force on any error.
func (e *sharedEngine) sweepBatch(ctx context.Context, sl sweepLock, chunk []cas.Blob, cutoff, now time.Time,
	sizes map[cas.Blob]int64, res *GCResult) ([]string, error) {
	window := e.sweepWindow
	// The deadline counts from before the transaction began, so it ends
	// before the fence, which counts from the server's clock within it.
	dctx, cancel := context.WithDeadline(ctx, time.Now().Add(window-min(remoteSweepMargin, window/4)))
	defer cancel()
	gone, err := sl.DeleteUnreferenced(ctx, chunk, cutoff, now, window)
	if err == nil {
		err = fault(e, "gc:rows-deleted")
	}
	if err != nil {
		return nil, err
	}
	var errs []string
	for i, b := range gone {
		if i%10 == 0 {
			// A cheap early stop: the fence covers the rest.
			if err := sl.Held(dctx); err != nil {
				return errs, fmt.Errorf("%w; %s of the batch left", err, nOf(len(gone)-i, "object"))
			}
		}
		if err := fault(e, "gc:remove"); err != nil {
			return errs, err
		}
		if err := e.be.Remove(dctx, b); err != nil && !errors.Is(err, cas.ErrNotFound) {
			if dctx.Err() != nil {
				return errs, fmt.Errorf("the sweep window of %v ended with %s of the batch left", window, nOf(len(gone)-i, "object"))
			}
			errs = append(errs, err.Error())
			continue
		}
		res.RemovedBlobs++
		res.FreedBytes += sizes[b]
		res.Removed = append(res.Removed, b)
	}
	return errs, nil
}
