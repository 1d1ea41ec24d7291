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
// The first write to arrive commits; writes arriving meanwhile queue, and
// it commits the queue too before it returns, so that one is always
// committing while any wait.
type committer struct {
	mu      sync.Mutex
	busy    bool
	pending []*commitReq
	// batches counts the writes of each transaction, for tests.
	batches []int
}

type commitReq struct {
	parts []index.NewPart
	// ready, when set, says whether the write's blobs are in place: the
	// transaction's statements run before it is called, its commit after
	// (see index.RecordWhenReady).
	ready func() error
	recs  []index.Recorded
	err   error
	done  chan struct{}
}

// record records a write's parts, in a transaction of its own or with the
// parts of writes concurrent with it.
func (s *Store) record(ctx context.Context, parts []index.NewPart) ([]index.Recorded, error) {
	return s.recordWhenReady(ctx, parts, nil)
}

// recordWhenReady is record for a write whose blobs are still being made
// durable: ready (see commitReq) is called before the commit.
func (s *Store) recordWhenReady(ctx context.Context, parts []index.NewPart, ready func() error) ([]index.Recorded, error) {
	c := &s.commits
	req := &commitReq{parts: parts, ready: ready, done: make(chan struct{})}
	c.mu.Lock()
	c.pending = append(c.pending, req)
	if c.busy {
		c.mu.Unlock()
		// Once queued, a write waits for its rows' fate whatever its
		// context says: they may be committing.
		<-req.done
		return req.recs, req.err
	}
	c.busy = true
	c.mu.Unlock()
	// A test's way to hold the committer while other writes queue.
	s.fault("write:commit")
	c.mu.Lock()
	for len(c.pending) > 0 {
		batch := c.pending
		c.pending = nil
		c.batches = append(c.batches, len(batch))
		c.mu.Unlock()
		s.commit(ctx, req, batch)
		c.mu.Lock()
	}
	c.busy = false
	c.mu.Unlock()
	return req.recs, req.err
}

// commit records a batch of writes in one transaction, for the write own
// whose context is ctx. If that fails, each write is recorded alone, so
// that one write's bad row fails only it.
func (s *Store) commit(ctx context.Context, own *commitReq, batch []*commitReq) {
	defer func() {
		for _, r := range batch {
			if r != own {
				close(r.done)
			}
		}
	}()
	if len(batch) == 1 && batch[0] == own {
		own.recs, own.err = s.recordTx(ctx, own.parts, own.ready)
		return
	}
	// The rows of other writes do not fail with this one's context.
	ctx = context.WithoutCancel(ctx)
	if len(batch) == 1 {
		batch[0].recs, batch[0].err = s.recordTx(ctx, batch[0].parts, batch[0].ready)
		return
	}
	var all []index.NewPart
	var readies []func() error
	for _, r := range batch {
		all = append(all, r.parts...)
		if r.ready != nil {
			readies = append(readies, r.ready)
		}
	}
	// The shared transaction commits once every write's blobs are in
	// place; one that failed fails it, and each write is then recorded
	// alone, where only that one fails again.
	var ready func() error
	if len(readies) > 0 {
		ready = func() error {
			for _, f := range readies {
				if err := f(); err != nil {
					return err
				}
			}
			return nil
		}
	}
	// A test's stand-in for a shared transaction that failed.
	err := s.fault("write:shared")
	var recs []index.Recorded
	if err == nil {
		recs, err = s.recordTx(ctx, all, ready)
	}
	if err == nil {
		for _, r := range batch {
			r.recs, recs = recs[:len(r.parts):len(r.parts)], recs[len(r.parts):]
		}
		return
	}
	// A commit whose answer was lost may have recorded every part: writing
	// them again would add each as a new version. Each write is told so.
	if errors.Is(err, index.ErrCommitUnknown) {
		for _, r := range batch {
			r.err = err
		}
		return
	}
	for _, r := range batch {
		r.recs, r.err = s.recordTx(ctx, r.parts, r.ready)
	}
}

// recordTx records parts in one transaction, counting the log syncs.
func (s *Store) recordTx(ctx context.Context, parts []index.NewPart, ready func() error) ([]index.Recorded, error) {
	if s.blobs.Durability() == cas.SyncFull && !s.recentKeysMayBeLost {
		s.commitSyncs.Add(1)
	}
	return s.index.RecordWhenReady(ctx, parts, ready)
}

// Barriers returns how many file-system barriers this Store's writes have
// issued since Open: blob files and shard directories synced (see
// cas.Store.Syncs), and one for each index transaction that synced its log.
// The index's checkpoints, which sync the database now and then, are not
// counted. Benchmarks divide it by the steps written. On a store on S3,
// whose blobs and index live on servers that make them durable, it is 0.
func (s *Store) Barriers() int64 {
	if s.blobs == nil {
		return 0
	}
	return s.blobs.Syncs() + s.commitSyncs.Load()
}
