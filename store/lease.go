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
	"sort"
	"strings"
	"sync"
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

// leaseRetries is how many times a write puts its blobs again under a
// new lease when its commit found the lease lost.
const leaseRetries = 3

// takeLease takes a blob lease for one write, waiting at most the store's
// lock timeout for gc's batch to end. It returns ctx carrying the lease (a
// commit under it checks the lease still holds; see index.WithBlobLease)
// and the function that releases the lease, once however often it is
// called, and says whether the lease still held until then: a shared
// advisory lock is released only by its unlock or by the end of its
// session, so an unlock that succeeds shows the lease held throughout, and
// one that fails (the session is gone) that it may not have.
func (s *Store) takeLease(ctx context.Context) (context.Context, func() error, error) {
	select {
	case s.remote.leases <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("store: %w", ctx.Err())
	}
	if s.remote.noLease {
		var once sync.Once
		return ctx, func() error { once.Do(func() { <-s.remote.leases }); return nil }, nil
	}
	l, err := s.index.AcquireBlobLease(ctx, s.lockTimeout)
	if err != nil {
		<-s.remote.leases
		if errors.Is(err, index.ErrSweepBusy) {
			return nil, nil, fmt.Errorf("store: %w: %w", ErrLocked, err)
		}
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	var once sync.Once
	return index.WithBlobLease(ctx, l), func() error {
		once.Do(func() { <-s.remote.leases })
		return l.Release()
	}, nil
}

// underLease runs one write on an object store: put stores the blobs, and
// commit records their rows, both under one blob lease. The commit checks
// in its transaction that the lease still holds; when it does not, nothing
// is committed and put and commit run again under a new lease, so that
// the rows committed name objects gc has not removed. When the lease turns
// out lost after the commit too, put runs again under a new lease.
func (s *Store) underLease(ctx context.Context, put func(context.Context) error, commit func(context.Context) ([]index.Recorded, error)) ([]index.Recorded, error) {
	if err := s.writable("write"); err != nil {
		return nil, err
	}
	var (
		recs    []index.Recorded
		release func() error
	)
	for try := 0; ; try++ {
		lctx, rel, err := s.takeLease(ctx)
		if err != nil {
			return nil, err
		}
		release = rel
		if err := put(ctx); err != nil {
			release()
			return nil, fmt.Errorf("store: %w", err)
		}
		if err := s.fault("write:record"); err != nil {
			release()
			return nil, fmt.Errorf("store: %w", err)
		}
		recs, err = commit(lctx)
		if errors.Is(err, index.ErrLeaseLost) && try < leaseRetries {
			// Nothing committed: gc may have removed an object the put
			// found. Put again under a new lease.
			release()
			continue
		}
		if err != nil {
			release()
			return nil, fmt.Errorf("store: %w", err)
		}
		break
	}
	defer release()
	s.fault("write:committed")
	lost := s.fault("lease:held")
	if lost == nil {
		lost = release()
	}
	if lost == nil {
		return recs, nil
	}
	// The lease may have ended before the commit: gc may have removed an
	// object that the put found, before the row named it. Put again.
	release()
	wctx := context.WithoutCancel(ctx)
	_, release2, err := s.takeLease(wctx)
	if err != nil {
		return nil, fmt.Errorf("store: the rows are committed but the blob lease was lost (%v), and a new one failed (run casctl verify): %w", lost, err)
	}
	defer release2()
	if err := put(wctx); err != nil {
		return nil, fmt.Errorf("store: the rows are committed but the blob lease was lost (%v), and putting the blobs again failed (run casctl verify): %w", lost, err)
	}
	return recs, nil
}

// sweepLock takes the sweep lock for one batch of gc's deletes.
func (s *Store) sweepLock(ctx context.Context, timeout time.Duration) (*index.SweepLock, error) {
	if s.remote.noLease {
		return &index.SweepLock{}, nil
	}
	return s.index.AcquireSweepLock(ctx, timeout)
}

// gcRemote is GC on a store in an object store (see the top of this
// file).
func (s *Store) gcRemote(ctx context.Context, o GCOptions) (GCResult, error) {
	if err := s.writable("gc"); err != nil {
		return GCResult{}, err
	}
	timeout, err := checkGCOptions(o)
	if err != nil {
		return GCResult{}, err
	}
	gcLock, err := s.indexGCLock(ctx, o.DryRun)
	if err != nil {
		return GCResult{}, err
	}
	if gcLock != nil {
		defer gcLock.Release()
	}
	res := GCResult{DryRun: o.DryRun}
	now := s.now()
	cutoff := now.Add(-o.Grace)
	old := olderThan(now, o.Grace)
	m, err := s.markRemote(ctx, old, o.Progress)
	if err != nil {
		return GCResult{}, err
	}
	res.KeptYoung = m.keptYoung
	if len(m.missing) > 0 {
		sort.Slice(m.missing, func(i, j int) bool { return m.missing[i].FileName() < m.missing[j].FileName() })
		return GCResult{}, fmt.Errorf("store: gc: %w: %d blobs, such as %s; nothing deleted; run casctl verify",
			ErrMissingBlobs, len(m.missing), s.objectName(m.missing[0].RelPath()))
	}
	candidates := make([]cas.Blob, 0, len(m.candidates))
	for b := range m.candidates {
		candidates = append(candidates, b)
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].FileName() < candidates[j].FileName() })
	if o.DryRun {
		for _, b := range candidates {
			res.RemovedBlobs++
			res.FreedBytes += m.candidates[b].size
			res.Removed = append(res.Removed, b)
		}
		return res, nil
	}
	if err := s.fault("gc:sweep"); err != nil {
		return GCResult{}, fmt.Errorf("store: gc: sweep (nothing deleted): %w", err)
	}
	if err := gcLock.Held(ctx); err != nil {
		return GCResult{}, fmt.Errorf("store: gc: %w (nothing deleted)", err)
	}
	if len(m.stale) > 0 {
		if _, err := s.index.DeleteBlobRows(ctx, m.stale); err != nil {
			return GCResult{}, fmt.Errorf("store: gc: %w", err)
		}
	}
	var errs []string
	sofar := "(the blobs removed so far are gone; the next gc removes the rest)"
	for len(candidates) > 0 {
		chunk := candidates[:min(len(candidates), remoteSweepChunk)]
		candidates = candidates[len(chunk):]
		if err := gcLock.Held(ctx); err != nil {
			return res, fmt.Errorf("store: gc: %w %s", err, sofar)
		}
		sl, err := s.sweepLock(ctx, timeout)
		if errors.Is(err, index.ErrSweepBusy) {
			return res, fmt.Errorf("store: gc: %w: %w %s", ErrLocked, err, sofar)
		}
		if err != nil {
			return res, fmt.Errorf("store: gc: %w %s", err, sofar)
		}
		stop, err := s.sweepBatch(ctx, sl, chunk, cutoff, now, m.candidates, &res)
		if err == nil {
			err = sl.ClearFence(ctx)
		}
		sl.Release()
		if err != nil {
			return res, fmt.Errorf("store: gc: %w %s", err, sofar)
		}
		errs = append(errs, stop...)
	}
	// Multipart uploads that writers which died left behind hold space
	// without being objects; only those older than remoteUploadAge.
	if n, err := s.remote.be.AbortUploads(ctx, max(o.Grace, remoteUploadAge)); err != nil {
		errs = append(errs, err.Error())
	} else {
		res.RemovedTemp = n
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("store: gc: %d objects could not be removed (their rows are gone; the next gc retries): %s",
			len(errs), strings.Join(errs, "; "))
	}
	return res, nil
}

// sweepBatch deletes one batch's rows still unused and old under sl, then
// their objects, within the sweep window (see remoteSweepWindow), and adds
// what it removed to res. It stops early, with an error, when the window
// ends or the sweep lock turns out lost: the rows are gone then, and the
// next gc removes the objects left. It returns the objects that could not
// be removed as messages. The fence stays in force on any error.
func (s *Store) sweepBatch(ctx context.Context, sl *index.SweepLock, chunk []cas.Blob, cutoff, now time.Time, cands map[cas.Blob]gcCandidate, res *GCResult) ([]string, error) {
	window := s.remote.sweepWindow
	if window == 0 {
		window = remoteSweepWindow
	}
	// The deadline counts from before the transaction began, so it ends
	// before the fence, which counts from the server's clock within it.
	dctx, cancel := context.WithDeadline(ctx, time.Now().Add(window-min(remoteSweepMargin, window/4)))
	defer cancel()
	var gone []cas.Blob
	var err error
	if s.remote.noLease {
		gone, err = s.index.DeleteUnreferencedAt(ctx, chunk, cutoff, now)
	} else {
		gone, err = sl.DeleteUnreferenced(ctx, chunk, cutoff, now, window)
	}
	if err == nil {
		err = s.fault("gc:rows-deleted")
	}
	if err != nil {
		return nil, err
	}
	var errs []string
	for i, b := range gone {
		if i%10 == 0 {
			// A cheap early stop: the fence covers the rest.
			if err := sl.Held(dctx); err != nil {
				return errs, fmt.Errorf("%w; %d objects of the batch left", err, len(gone)-i)
			}
		}
		if err := s.fault("gc:remove"); err != nil {
			return errs, err
		}
		if err := s.remote.be.Remove(dctx, b); err != nil && !errors.Is(err, cas.ErrNotFound) {
			if dctx.Err() != nil {
				return errs, fmt.Errorf("the sweep window of %v ended with %d objects of the batch left", window, len(gone)-i)
			}
			errs = append(errs, err.Error())
			continue
		}
		res.RemovedBlobs++
		res.FreedBytes += cands[b].size
		res.Removed = append(res.Removed, b)
	}
	return errs, nil
}

// markRemote is gc's mark on an object store: the objects listed a shard
// at a time (the listing is in name order, so in shard order) against the
// index's rows of the shard. It fails closed: any error listing stops gc
// before it deletes anything.
func (s *Store) markRemote(ctx context.Context, old func(time.Time) bool, progress func(done, total int)) (gcMark, error) {
	m := gcMark{candidates: map[cas.Blob]gcCandidate{}}
	listErr := func(what string, err error) error {
		return fmt.Errorf("store: gc: list %s (nothing deleted): %w", what, err)
	}
	done := 0
	shard := func(sh byte, objects map[cas.Blob]cas.Entry) error {
		rows, err := s.index.BlobsInShard(ctx, sh)
		if err != nil {
			return listErr("referenced blobs", err)
		}
		for _, r := range rows {
			e, there := objects[r.Blob]
			delete(objects, r.Blob)
			switch {
			case r.Used && !there:
				m.missing = append(m.missing, r.Blob)
			case r.Used:
			case !there:
				m.stale = append(m.stale, r.Blob)
			case old(r.LastReferenced):
				m.candidates[r.Blob] = gcCandidate{size: e.Size, modTime: e.ModTime.UnixNano()}
			default:
				m.keptYoung++
			}
		}
		for b, e := range objects {
			if old(e.ModTime) {
				m.candidates[b] = gcCandidate{size: e.Size, modTime: e.ModTime.UnixNano()}
			} else {
				m.keptYoung++
			}
		}
		done += len(rows)
		if progress != nil {
			progress(done, done)
		}
		return nil
	}
	var marked [256]bool
	cur, objects := -1, map[cas.Blob]cas.Entry{}
	flush := func() error {
		if cur < 0 || marked[cur] {
			return nil
		}
		marked[cur] = true
		return shard(byte(cur), objects)
	}
	err := s.remote.be.Walk(ctx, func(e cas.Entry) error {
		if err := s.fault("gc:walk"); err != nil {
			return err
		}
		sh, ok := shardOf(e.RelPath)
		if !ok || e.Kind != cas.EntryBlob {
			return nil // verify reports names that are not blobs
		}
		if sh != cur {
			if err := flush(); err != nil {
				return err
			}
			cur, objects = sh, map[cas.Blob]cas.Entry{}
		}
		objects[e.Blob] = e
		return nil
	})
	if err == nil {
		err = flush()
	}
	for sh := 0; sh < 256 && err == nil; sh++ {
		if !marked[sh] {
			err = shard(byte(sh), map[cas.Blob]cas.Entry{})
		}
	}
	if err != nil {
		if strings.Contains(err.Error(), "(nothing deleted)") {
			return m, err
		}
		return m, listErr("objects", err)
	}
	// A row used and an object not listed: put since its shard was
	// listed, or truly missing.
	missing := m.missing[:0]
	for _, b := range m.missing {
		if _, err := s.remote.be.Stat(ctx, b); err != nil {
			if !errors.Is(err, cas.ErrNotFound) {
				return m, listErr("objects", err)
			}
			missing = append(missing, b)
		}
	}
	m.missing = missing
	return m, nil
}

// objectName names an object of the store by its URL, for messages.
func (s *Store) objectName(rel string) string {
	loc := s.remote.be.Location()
	loc.Endpoint, loc.Region = "", ""
	return strings.TrimSuffix(loc.String(), "/") + "/" + rel
}
