package store

import (
	"context"
	"errors"
	"sync"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// committer gathers the rows of concurrent writes in one process into one
// index transaction: one log append and one sync for all of them, where
// each write paid for its own. A write hands its rows over once its blobs
// are durable, or with a ready that the transaction calls before its
// commit and that says when they are (see writeOne); it returns only once
// they are committed, so the order a crash can see is a lone write's:
// blob, then row.
//
// The first write to arrive commits. While its blob is still being
// written, the writes that arrive join its transaction: their statements
// run in it, and it commits once every blob of them is in place. Writes
// arriving later queue, and it commits the queue too before it returns,
// so that one is always committing while any wait.
type committer struct {
	mu      sync.Mutex
	busy    bool
	pending []*commitReq
	// arrived wakes a committer waiting for its blob when a write queues.
	arrived chan struct{}
}

type commitReq struct {
	parts []index.NewPart
	// ready, when set, says whether the write's blobs are in place: the
	// transaction's statements run before it is called, its commit after
	// (see index.RecordGathering). It also says whether their names wait
	// for the group's barrier (see blobGroup), which then follows the
	// commit; a transaction of such writes only commits without syncing
	// the log.
	ready func() (barrier bool, err error)
	// barrier is ready's answer; barrierErr, the barrier's error.
	barrier    bool
	barrierErr error
	// blob, when set, is closed once ready no longer waits; while the first
	// write's is open, other writes join its transaction.
	blob <-chan struct{}
	recs []index.Recorded
	err  error
	done chan struct{}
}

// record records a write's parts, in a transaction of its own or with the
// parts of writes concurrent with it.
func (e *localEngine) record(ctx context.Context, parts []index.NewPart) ([]index.Recorded, error) {
	recs, _, err := e.recordWhenReady(ctx, parts, nil, nil, nil)
	return recs, err
}

// recordWhenReady is record for a write whose blobs are still being made
// durable: ready (see commitReq) is called before the commit, and blob is
// closed once it no longer waits; queued, when set, is called once the
// committer has the parts. barrierErr is the error of the barrier that
// followed the commit, when ready asked for one.
func (e *localEngine) recordWhenReady(ctx context.Context, parts []index.NewPart, ready func() (bool, error),
	blob <-chan struct{}, queued func()) (recs []index.Recorded, barrierErr error, err error) {
	c := &e.commits
	req := &commitReq{parts: parts, ready: ready, blob: blob, done: make(chan struct{})}
	count(e, "commit:handed", 1)
	c.mu.Lock()
	c.pending = append(c.pending, req)
	if c.busy {
		if c.arrived != nil {
			select {
			case c.arrived <- struct{}{}:
			default:
			}
		}
		c.mu.Unlock()
		if queued != nil {
			queued()
		}
		// Once queued, a write waits for its rows' fate whatever its
		// context says: they may be committing.
		<-req.done
		return req.recs, req.barrierErr, req.err
	}
	c.busy = true
	if c.arrived == nil {
		c.arrived = make(chan struct{}, 1)
	}
	c.mu.Unlock()
	if queued != nil {
		queued()
	}
	// A test's way to hold the committer while other writes queue.
	fault(e, "write:commit")
	c.mu.Lock()
	for len(c.pending) > 0 {
		batch := c.pending
		c.pending = nil
		c.mu.Unlock()
		batch = e.commit(ctx, req, batch)
		count(e, "commit:batch", len(batch))
		c.mu.Lock()
	}
	c.busy = false
	c.mu.Unlock()
	return req.recs, req.barrierErr, req.err
}

// take returns the writes queued since the committer last looked.
func (c *committer) take() []*commitReq {
	c.mu.Lock()
	defer c.mu.Unlock()
	more := c.pending
	c.pending = nil
	return more
}

// commit records a batch of writes in one transaction, for the write own
// whose context is ctx, with the writes that join it (see committer), and
// returns them all. If that fails, each write is recorded alone, so that
// one write's bad row fails only it.
func (e *localEngine) commit(ctx context.Context, own *commitReq, batch []*commitReq) []*commitReq {
	first := batch[0]
	tx := &sharedTx{e: e, batch: batch, joining: first.blob != nil}
	defer tx.done(own)
	if len(batch) == 1 && first == own && first.blob == nil {
		e.recordTx(ctx, own)
		return tx.batch
	}
	// The rows of other writes, or of writes that may join, do not fail
	// with this one's context; a write whose context is done before its
	// transaction starts fails alone.
	if first == own && ctx.Err() != nil {
		own.err = ctx.Err()
		return tx.batch
	}
	ctx = context.WithoutCancel(ctx)
	var all []index.NewPart
	for _, r := range batch {
		all = append(all, r.parts...)
	}
	// A test's stand-in for a shared transaction that failed.
	var err error
	if len(batch) > 1 {
		err = fault(e, "write:shared")
	}
	var recs []index.Recorded
	if err == nil {
		recs, err = e.recordGathering(ctx, all, tx.gather, tx.logSync)
	}
	if err != nil {
		tx.failed(ctx, err)
		return tx.batch
	}
	for _, r := range tx.batch {
		r.recs, recs = recs[:len(r.parts):len(r.parts)], recs[len(r.parts):]
	}
	e.barrierAfter(tx.batch)
	return tx.batch
}

// sharedTx is one transaction of the committer's, and the writes in it.
type sharedTx struct {
	e     *localEngine
	batch []*commitReq
	// joining says writes may still join; inPlace is set once the first
	// write's blob is in place: the writes queued until then still join.
	joining, inPlace bool
}

// done tells the writes of the batch but own, whose committer returns
// itself, that they are done.
func (t *sharedTx) done(own *commitReq) {
	for _, r := range t.batch {
		if r != own {
			close(r.done)
		}
	}
}

// gather runs once the batch's statements have: while the first write's
// blob is being written, the writes queued meanwhile join; then it waits
// for every blob of the batch, and the transaction commits once all are
// in place. One that failed fails it, and each write is then recorded
// alone, where only that one fails again.
func (t *sharedTx) gather() ([]index.NewPart, error) {
	c := &t.e.commits
	for t.joining {
		if more := c.take(); len(more) > 0 {
			t.batch = append(t.batch, more...)
			// A test's way to see writes join.
			fault(t.e, "write:joined")
			var parts []index.NewPart
			for _, r := range more {
				parts = append(parts, r.parts...)
			}
			return parts, nil
		}
		if t.inPlace {
			t.joining = false
			break
		}
		select {
		case <-t.batch[0].blob:
			t.inPlace = true
		case <-c.arrived:
		}
	}
	for _, r := range t.batch {
		if r.ready != nil {
			var err error
			if r.barrier, err = r.ready(); err != nil {
				return nil, err
			}
		}
	}
	return nil, nil
}

// logSync says the transaction must sync the log itself: a write of it
// takes no barrier after the commit.
func (t *sharedTx) logSync() bool {
	for _, r := range t.batch {
		if !r.barrier {
			return true
		}
	}
	return false
}

// failed tells the writes of a transaction that failed. A commit whose
// answer was lost may have recorded every part: writing them again would
// add each as a new version, so each write is told so. Otherwise each
// write is recorded alone, so that one write's bad row fails only it.
func (t *sharedTx) failed(ctx context.Context, err error) {
	switch {
	case errors.Is(err, index.ErrCommitUnknown):
		for _, r := range t.batch {
			r.err = err
		}
	case len(t.batch) == 1:
		t.batch[0].err = err
	default:
		for _, r := range t.batch {
			t.e.recordTx(ctx, r)
		}
	}
}

// recordTx records r's parts in one transaction, and takes the barrier
// after it that r's ready may ask for.
func (e *localEngine) recordTx(ctx context.Context, r *commitReq) {
	var gather func() ([]index.NewPart, error)
	if r.ready != nil {
		gather = func() ([]index.NewPart, error) {
			var err error
			r.barrier, err = r.ready()
			return nil, err
		}
	}
	r.recs, r.err = e.recordGathering(ctx, r.parts, gather, func() bool { return !r.barrier })
	if r.err == nil {
		e.barrierAfter([]*commitReq{r})
	}
}

// barrierAfter takes, once a transaction has committed, the group's
// barrier that its writes' names wait for, if any do, and tells them how
// it went. It also makes the transaction durable, if it left its log
// unsynced.
func (e *localEngine) barrierAfter(batch []*commitReq) {
	for _, r := range batch {
		if r.barrier {
			// A test's way to stop a writer between the commit and the
			// barrier.
			fault(e, "write:barrier")
			err := e.group.wait(e.barrier)
			for _, r := range batch {
				if r.barrier {
					r.barrierErr = err
				}
			}
			return
		}
	}
}

// recordGathering records parts, and those gather returns, in one
// transaction (see index.RecordGatheringLogUnsynced), counting the log
// syncs.
func (e *localEngine) recordGathering(ctx context.Context, parts []index.NewPart, gather func() ([]index.NewPart, error),
	logSync func() bool) ([]index.Recorded, error) {
	unsynced := false
	recs, err := e.ix.RecordGatheringLogUnsynced(ctx, parts, gather, func() bool {
		unsynced = !logSync()
		return !unsynced
	})
	if e.blobs.Durability() == cas.SyncFull && !e.recentKeysMayBeLost && !unsynced {
		e.commitSyncs.Add(1)
	}
	return recs, err
}

// barrier takes the file system's barrier for the group's writes.
func (e *localEngine) barrier() error {
	// A test's way to look at the writes when their barrier is taken.
	if err := fault(e, "group:barrier"); err != nil {
		return err
	}
	count(e, "group:barrier", 1)
	return e.blobs.Barrier()
}
