package index

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/option"
)

// Deferred commits: an index opened WithDeferredCommit records parts with
// RecordDeferred into one transaction it keeps open, and commits it once
// it is DeferredCommitAfter old or holds DeferredCommitRows parts, or
// before any other read or write of this Index, or at Close, or when
// CommitDeferred is called. A writer then pays for the statements of its
// parts, not for a transaction: the rows of a stream of steps share one
// commit. Reads through this Index see every part it recorded, committed
// or not; other processes see one once the transaction commits, within
// DeferredCommitAfter of its record (plus the commit's own time, and any
// wait for the database's write lock). A crash loses the parts recorded
// since the last commit, so it is for stores that promise nothing across
// a crash (sync=none).

// DeferredCommitAfter is how long a part recorded with RecordDeferred may
// wait for its commit, and DeferredCommitRows how many may wait together.
const (
	DeferredCommitAfter = 10 * time.Millisecond
	DeferredCommitRows  = 256
)

// WithDeferredCommit lets RecordDeferred keep its transaction open (see
// above). Only an index in SQLite defers; without it, or on PostgreSQL,
// RecordDeferred records and commits at once, as Record does.
func WithDeferredCommit() Option {
	return option.Set(func(c *config) { c.deferCommits = true })
}

// deferred is the transaction RecordDeferred keeps open.
type deferred struct {
	mu sync.Mutex
	on bool
	// tx is the open transaction, nil when none is; r runs its statements.
	tx *sql.Tx
	r  *recorder
	// rows counts the parts in tx; committed are called once it ends.
	rows      int
	committed []func(error)
	timer     *time.Timer
	// gen counts the transactions, so that a timer set for one that has
	// committed since does nothing to the next.
	gen int
	// stagedParts counts the parts this index staged since it last folded,
	// the first of them at stagedSince (see staged.go); fold is the timer
	// that folds them once the queue is idle.
	stagedParts int
	stagedSince time.Time
	fold        *time.Timer
	// folding is set while a goroutine folds (see foldInBackground); folds
	// counts those goroutines, for Close to wait for.
	folding bool
	folds   sync.WaitGroup
	// closed is set by Close: no fold starts after it.
	closed bool
}

// RecordDeferred records ps as Record does, but in the transaction kept
// open (see WithDeferredCommit): the parts are recorded, and their keys
// and versions settled, when it returns. When it returns nil, committed
// (if not nil) is called once their transaction ends, with nil once
// committed, or with what lost them; otherwise nothing of ps is recorded
// and committed is never called. A commit that failed after the call
// returned is also returned by the next RecordDeferred or CommitDeferred.
func (x *Index) RecordDeferred(ctx context.Context, ps []NewPart, committed func(error)) ([]Recorded, error) {
	d := &x.deferred
	if !d.on {
		recs, err := x.Record(ctx, ps)
		if err == nil && committed != nil {
			committed(nil)
		}
		return recs, err
	}
	ps, err := recordable(ps)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if err := x.queue.takeLost(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	x.drainQueueLocked() // the steps queued before these come first
	return x.recordDeferredLocked(ctx, ps, 0, committed)
}

// recordDeferredLocked is RecordDeferred once d.mu is held, the rows
// stamped with the time at (in Unix nanoseconds; 0 for now).
func (x *Index) recordDeferredLocked(ctx context.Context, ps []NewPart, at int64, committed func(error)) ([]Recorded, error) {
	d := &x.deferred
	if d.rows >= DeferredCommitRows {
		if err := x.endDeferred(nil); err != nil {
			return nil, fmt.Errorf("record: commit the parts waiting: %w", err)
		}
	}
	if d.tx == nil {
		if err := x.beginDeferred(ctx); err != nil {
			return nil, fmt.Errorf("record: %w", x.connError(err))
		}
	}
	if at == 0 {
		at = x.now().UnixNano()
	}
	// The steps staged before these are recorded first, in their order.
	_, dropped, err := x.foldStaged(context.WithoutCancel(ctx), d.tx, d.r, 0, false)
	if err != nil {
		err = fmt.Errorf("record: fold staged steps: %w", x.connError(err))
		x.endDeferred(err)
		x.queue.note(err)
		return nil, err
	}
	if dropped != nil {
		x.queue.note(dropped)
	}
	d.stagedParts = 0
	d.r.now = at
	// The statements run to their end whatever the caller's context says:
	// SQLite answers an interrupted insert by rolling back the whole
	// transaction, other writers' parts with it.
	recs, err := x.recordSavepoint(context.WithoutCancel(ctx), ps)
	if err != nil {
		if d.rows == 0 {
			// Nothing waits in the transaction: end it, rather than hold
			// the write lock for nothing.
			x.endDeferred(errors.New("rolled back"))
		}
		return nil, fmt.Errorf("record: %w", x.connError(err))
	}
	d.rows += len(ps)
	q := &x.queue
	q.mu.Lock()
	if q.inTx == nil {
		q.inTx = map[string]bool{}
	}
	for _, p := range ps {
		q.inTx[p.Run] = true
	}
	q.mu.Unlock()
	if committed != nil {
		d.committed = append(d.committed, committed)
	}
	return recs, nil
}

// beginDeferred begins the transaction RecordDeferred keeps open, taking
// the database's write lock (the index's transactions begin IMMEDIATE),
// retried while another process holds it. The transaction outlives the
// caller's context: it ends by its commit.
func (x *Index) beginDeferred(ctx context.Context) error {
	d := &x.deferred
	var tx *sql.Tx
	err := retryBusy(ctx, x.retry, func() (err error) {
		tx, err = x.db.BeginTx(context.WithoutCancel(ctx), nil)
		return err
	})
	if err != nil {
		return err
	}
	d.tx, d.r = tx, x.newRecorder(tx, 0)
	d.gen++
	gen := d.gen
	d.timer = time.AfterFunc(DeferredCommitAfter, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.gen == gen && d.tx != nil {
			if err := x.endDeferred(nil); err != nil {
				x.queue.note(err)
			}
		}
	})
	return nil
}

// savepointSQL and releaseSQL bracket a step's statements in the open
// transaction, prepared once rather than parsed for each step.
const (
	savepointSQL = `SAVEPOINT deferred_step`
	releaseSQL   = `RELEASE deferred_step`
)

// recordSavepoint records ps in the open transaction under a savepoint:
// a part that fails takes back only the statements of ps.
func (x *Index) recordSavepoint(ctx context.Context, ps []NewPart) ([]Recorded, error) {
	d := &x.deferred
	if _, err := d.r.stmt(ctx, &d.r.savepoint, x.stmts.savepoint).ExecContext(ctx); err != nil {
		return nil, err
	}
	runs := len(d.r.newRuns)
	out := make([]Recorded, 0, len(ps))
	var err error
	for _, p := range ps {
		var rec Recorded
		if rec, err = d.r.record(ctx, p); err != nil {
			break
		}
		out = append(out, rec)
	}
	if err == nil {
		_, err = d.r.stmt(ctx, &d.r.release, x.stmts.release).ExecContext(ctx)
		if err == nil {
			return out, nil
		}
	}
	if _, rerr := d.tx.ExecContext(ctx, `ROLLBACK TO deferred_step; RELEASE deferred_step`); rerr != nil {
		// The transaction is in no known state: everything in it goes,
		// and its writers are told.
		x.endDeferred(fmt.Errorf("roll back a failed step: %w", rerr))
		return nil, errors.Join(err, rerr)
	}
	if len(d.r.newRuns) != runs {
		// A run made by the steps rolled back is not there after all.
		d.r.newRuns = map[runKey]int64{}
	}
	d.r.ttls = nil // nor, maybe, a ttl they set
	return nil, err
}

// endDeferred ends the open transaction: committed when lost is nil, else
// rolled back, its writers told lost. It returns the commit's error. The
// caller holds d.mu.
func (x *Index) endDeferred(lost error) error {
	d := &x.deferred
	if d.tx == nil {
		return nil
	}
	d.timer.Stop()
	err := lost
	if lost == nil {
		if err = d.tx.Commit(); err == nil {
			x.runs.add(d.r.newRuns)
		} else {
			err = x.connError(err)
			if isFull(err) {
				err = fmt.Errorf("%w: %w", cas.ErrDiskFull, err)
			}
		}
	} else {
		d.tx.Rollback()
	}
	for _, f := range d.committed {
		f(err)
	}
	q := &x.queue
	q.mu.Lock()
	if err != nil {
		// What RecordQueued knows of these runs counted rows now gone.
		for run := range q.inTx {
			q.forgetRun(run)
		}
	}
	q.inTx = nil
	q.mu.Unlock()
	d.tx, d.r, d.rows, d.committed = nil, nil, 0, nil
	return err
}

// CommitDeferred commits what RecordDeferred left waiting, if anything,
// and returns the error of that commit or of an earlier one no caller was
// told of.
func (x *Index) CommitDeferred() error {
	d := &x.deferred
	if !d.on {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	x.drainQueueLocked()
	err := x.endDeferred(nil)
	q := &x.queue
	q.mu.Lock()
	// A failed commit is kept for RecordQueued too: it is told once.
	err = cmp.Or(err, q.lost)
	q.lost = nil
	q.mu.Unlock()
	if err != nil {
		return fmt.Errorf("commit deferred records: %w", err)
	}
	return nil
}

// settle commits what RecordDeferred left waiting before another read or
// write of this Index, so that it sees every part recorded through it
// (the commit's error waits for the next RecordDeferred or
// CommitDeferred), then folds the steps staged, by any process (see
// staged.go), and returns what kept it from folding them. The committer
// goes on while it folds: the steps queued meanwhile come after the read.
func (x *Index) settle() error {
	x.settleQueue()
	if err := x.foldIfStaged(context.Background()); err != nil {
		return x.connError(err)
	}
	return nil
}

// settleQueue is settle without the fold: for a write, whose transaction
// folds.
func (x *Index) settleQueue() {
	d := &x.deferred
	if d.on {
		d.mu.Lock()
		defer d.mu.Unlock()
		x.settleQueueLocked()
	}
}

// settleQueueLocked records the steps queued and commits the open
// transaction. The caller holds d.mu.
func (x *Index) settleQueueLocked() {
	x.drainQueueLocked()
	if x.deferred.tx != nil {
		if err := x.endDeferred(nil); err != nil {
			x.queue.note(err)
		}
	}
}
