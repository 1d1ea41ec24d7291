package index

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// Queued records: on an index opened WithDeferredCommit, RecordQueued
// hands a step's parts to a goroutine of the index (the committer), which
// records them in RecordDeferred's open transaction, in the order they
// came, while the writer goes on. The writer is answered at once when the
// index can tell, without a statement, what recording the parts will give
// (their keys, versions and same-content keys): when it knows their run.
// It reads a run's keys and blobs once: the writer itself, from the
// committed rows, when nothing of the run is queued or in the open
// transaction; else the committer, in the open transaction, once it
// recorded a step of the run. It keeps them up to date with every part
// it records or answers for. A step it cannot answer for (a run it could
// not read yet, a key another call of the run holds, a run with more parts
// than it keeps) waits for its statements, as RecordDeferred does, and so
// do the steps of that run queued after it.
//
// What it answers holds against the rows this Index knows of: a part that
// another process (or another Index on the same database) records in the
// same run meanwhile can make the committer record a part under another
// key than the one answered (key~2 instead of key, when the other part
// took key for another call), or with another version or same-content
// key. The fold that records the staged step then counts a mismatch
// (QueueMismatches), forgets the run, and the index reads it again at its
// next step. Any other write through
// this Index (a prune, a delete, gc) makes it forget every run, so that
// it answers nothing from rows that are gone.
//
// The committer records and commits the queue in batches: once its
// oldest step has waited DeferredCommitAfter, or sooner when the queue is
// half full (see batchDue) or a writer waits for its step's statements.
// Between batches it holds no transaction: the database's write lock is
// free for other processes most of the time, where a transaction kept
// open while steps trickle in held it nearly always, and another
// process's committer, whose waits for it SQLite spaces out to 100 ms,
// could wait for it for hundreds of milliseconds.
//
// Reads through this Index wait for the queue, as they wait for the open
// transaction: they see every part queued before them. Another process
// sees a part once its batch commits: within DeferredCommitAfter of its
// queuing, plus the time the committer takes to record the batch (see
// queueLag), and any wait for the write lock.

// A writer waits for room in the queue (a step of more parts, for an
// empty queue), so that what other processes see lags by a bounded time:
// while queueMax parts wait, or while what waits would take the committer
// over queueLag to record, at the pace it kept so far (on a slow machine,
// or under the race detector, a part costs milliseconds, not the few
// microseconds staging it takes). The pace starts at perPartGuess and
// moves an eighth of the way to each batch's: the first batch of a
// process, slow with everything cold, does not hold the writers back.
const (
	queueMax     = DeferredCommitRows
	queueLag     = 20 * time.Millisecond
	perPartGuess = 20 * time.Microsecond
)

// knownRunParts bounds the parts of a run the index keeps: a larger run's
// steps wait for their statements.
const knownRunParts = 1 << 16

// knownRunsMax bounds the runs the index keeps; past it, it starts again
// empty.
const knownRunsMax = 1024

// queue is what RecordQueued shares with the committer.
type queue struct {
	mu sync.Mutex
	// room is signalled when the committer has recorded a step.
	room  *sync.Cond
	items []*queuedStep
	// parts counts the parts queued or being recorded; perPart is the
	// committer's time a part, a moving average.
	parts   int
	perPart time.Duration
	// running says the committer's goroutine runs; oldest is when the
	// oldest step queued was, on this process's clock; kick wakes the
	// committer before its batch is due by time.
	running bool
	oldest  time.Time
	kick    chan struct{}
	// runs are the runs known (see above), by name.
	runs map[string]*knownRun
	// waiting counts, for each run, the steps queued that wait for their
	// statements: the run's later steps wait too. queued counts each
	// run's steps queued, inTx marks the runs with rows in the open
	// transaction, and loading the runs a writer reads (see loadable).
	waiting map[string]int
	queued  map[string]int
	inTx    map[string]bool
	loading map[string]bool
	// forgotten counts forgetRuns's calls: what a writer read before one
	// is not kept.
	forgotten int
	// lost is the first failure, since a caller was last told, of a step
	// whose writer had its answer already.
	lost       error
	mismatches atomic.Int64
	// dir tells the runs without rows (see runDir).
	dir runDir
}

// queuedStep is a step waiting for the committer.
type queuedStep struct {
	parts     []NewPart
	at        int64 // the rows' time stamp
	committed func(error)
	// answered holds what the writer was told; nil when it waits on done
	// for recs and err.
	answered []Recorded
	done     chan struct{}
	recs     []Recorded
	err      error
}

// knownRun is what the index knows of a run's rows: each key's owner and
// newest version, and, for each blob, the first two keys whose parts use
// it, oldest first (a part's same-content key is the oldest other one).
type knownRun struct {
	prefix string
	keys   map[string]keyHolder // by the key's rest (see splitKey)
	blobs  map[cas.Blob][2]string
	parts  int
}

// newKnownRun returns what the index knows of a run without rows.
func newKnownRun(prefix string) *knownRun {
	return &knownRun{prefix: prefix, keys: map[string]keyHolder{}, blobs: map[cas.Blob][2]string{}}
}

// keyHolder is the call that owns a key, and the key's newest version.
type keyHolder struct {
	step         int
	tool, callID string
	part         int
	version      int
}

// QueueMismatches counts the steps RecordQueued answered for that were
// recorded otherwise (see above).
func (x *Index) QueueMismatches() int64 { return x.queue.mismatches.Load() }

// RecordQueued records ps as RecordDeferred does, through the committer
// (see above): it returns what the parts are recorded as, at once when
// the index can tell (an answer leaves Recorded.ID 0: the row has none
// yet), otherwise once they are. committed (if not nil) is
// called once their transaction ends, with nil once committed, or with
// what lost them; when RecordQueued returns an error, nothing of ps is
// recorded and committed is never called. A part answered for whose
// recording or commit failed afterwards makes the next RecordQueued,
// RecordDeferred or CommitDeferred return that failure. On an index that
// does not defer its commits, it is RecordDeferred.
func (x *Index) RecordQueued(ctx context.Context, ps []NewPart, committed func(error)) ([]Recorded, error) {
	if !x.deferred.on {
		return x.RecordDeferred(ctx, ps, committed)
	}
	ps, err := recordable(ps)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	q := &x.queue
	q.mu.Lock()
	if q.room == nil {
		q.room = sync.NewCond(&q.mu)
	}
	for q.parts > 0 && (q.parts+len(ps) > queueMax || time.Duration(q.parts+len(ps))*q.perPart > queueLag) {
		q.wake()
		q.room.Wait()
	}
	if err := q.lost; err != nil {
		q.lost = nil
		q.mu.Unlock()
		return nil, lostError(err)
	}
	if q.waiting == nil {
		q.waiting, q.queued, q.loading = map[string]int{}, map[string]int{}, map[string]bool{}
	}
	st := &queuedStep{parts: ps, at: x.now().UnixNano(), committed: committed}
	st.answered = q.answer(ps, st.at)
	var runs []string
	if st.answered == nil {
		runs = q.loadable(ps)
	}
	if runs != nil {
		// Runs that have no rows but committed ones are read here, beside
		// the committer, rather than by it once it reached this step.
		for _, r := range runs {
			q.loading[r] = true
		}
		forgotten := q.forgotten
		q.mu.Unlock()
		// Bounded reads, not to be interrupted: a context that can be
		// cancelled costs each statement a goroutine of the driver's
		// watching it, more than a point lookup's own work.
		lctx := context.WithoutCancel(ctx)
		empty := x.runsWithoutRows(lctx, runs)
		loaded := make([]*knownRun, len(runs))
		for i, r := range runs {
			if empty != nil && empty[i] {
				loaded[i] = newKnownRun(prefixOf(ps, r))
				continue
			}
			loaded[i], _ = x.loadCommittedRun(lctx, r, prefixOf(ps, r))
		}
		q.mu.Lock()
		for i, r := range runs {
			delete(q.loading, r)
			if loaded[i] != nil && q.forgotten == forgotten && q.runs[r] == nil && q.queued[r] == 0 && !q.inTx[r] {
				q.install(r, loaded[i])
			}
		}
		st.answered = q.answer(ps, st.at)
	}
	for _, r := range runsOf(ps) {
		q.queued[r]++
	}
	if st.answered == nil {
		st.done = make(chan struct{})
		for _, r := range runsOf(ps) {
			q.waiting[r]++
		}
	}
	if len(q.items) == 0 {
		q.oldest = time.Now()
	}
	q.items = append(q.items, st)
	q.parts += len(ps)
	if !q.running {
		q.running = true
		if q.kick == nil {
			q.kick = make(chan struct{}, 1)
		}
		go x.commitQueued()
	} else if st.done != nil || q.batchDue(time.Now()) {
		q.wake()
	}
	q.mu.Unlock()
	if st.done == nil {
		return st.answered, nil
	}
	<-st.done
	return st.recs, st.err
}

// loadable returns the runs of ps the index does not know and may read
// from committed rows alone (none of their steps is queued or in the open
// transaction, and no writer reads them), or nil when any run of ps is
// known, or is not so. The caller holds q.mu.
func (q *queue) loadable(ps []NewPart) []string {
	runs := runsOf(ps)
	for _, r := range runs {
		if q.runs[r] != nil || q.queued[r] > 0 || q.inTx[r] || q.loading[r] {
			return nil
		}
	}
	return runs
}

// install notes what the index knows of run. The caller holds q.mu.
func (q *queue) install(run string, kr *knownRun) {
	if q.runs == nil || len(q.runs) >= knownRunsMax {
		if len(q.runs) > 0 {
			q.dir.stale()
		}
		q.runs = map[string]*knownRun{}
	}
	q.runs[run] = kr
}

// runsOf returns the runs of ps, each once.
func runsOf(ps []NewPart) []string {
	var out []string
	for _, p := range ps {
		seen := false
		for _, r := range out {
			seen = seen || r == p.Run
		}
		if !seen {
			out = append(out, p.Run)
		}
	}
	return out
}

// prefixOf returns the key prefix of run's first part in ps.
func prefixOf(ps []NewPart, run string) string {
	for _, p := range ps {
		if p.Run == run {
			prefix, _ := splitKey(p.Key)
			return prefix
		}
	}
	return ""
}

// answer returns what recording ps will give, and notes it in the runs
// known, or returns nil, noting nothing, when it cannot tell. The caller
// holds q.mu.
func (q *queue) answer(ps []NewPart, at int64) []Recorded {
	type change struct {
		run  *knownRun
		rest string
		key  keyHolder
		blob cas.Blob
		full string
	}
	changes := make([]change, 0, len(ps))
	out := make([]Recorded, 0, len(ps))
	// look finds a key as the parts before it in ps leave it.
	look := func(kr *knownRun, rest string) (keyHolder, bool) {
		for i := len(changes) - 1; i >= 0; i-- {
			if changes[i].run == kr && changes[i].rest == rest {
				return changes[i].key, true
			}
		}
		h, ok := kr.keys[rest]
		return h, ok
	}
	sameAs := func(kr *knownRun, b cas.Blob, own string) string {
		firsts := kr.blobs[b]
		for i := range changes {
			if c := changes[i]; c.run == kr && c.blob == b {
				firsts = addKey(firsts, c.full)
			}
		}
		for _, k := range firsts {
			if k != "" && k != own {
				return k
			}
		}
		return ""
	}
	for _, p := range ps {
		kr := q.runs[p.Run]
		prefix, rest := splitKey(p.Key)
		if kr == nil || q.waiting[p.Run] > 0 || kr.prefix != prefix || kr.parts+len(ps) > knownRunParts {
			return nil
		}
		h := keyHolder{step: p.Step, tool: p.Tool, callID: p.CallID, part: p.Part, version: 1}
		if old, ok := look(kr, rest); ok {
			if old.step != h.step || old.tool != h.tool || old.callID != h.callID || old.part != h.part {
				return nil // another call's key: its statements choose key~N
			}
			h.version = old.version + 1
		}
		out = append(out, Recorded{Key: p.Key, Version: h.version, SameAs: sameAs(kr, p.Blob, p.Key), CreatedAt: time.Unix(0, at)})
		changes = append(changes, change{run: kr, rest: rest, key: h, blob: p.Blob, full: p.Key})
	}
	for _, c := range changes {
		c.run.keys[c.rest] = c.key
		c.run.blobs[c.blob] = addKey(c.run.blobs[c.blob], c.full)
		c.run.parts++
	}
	return out
}

// addKey adds key to the first two keys of a blob's parts, if it is not
// one of them and there is room.
func addKey(firsts [2]string, key string) [2]string {
	switch {
	case firsts[0] == key || firsts[1] == key:
	case firsts[0] == "":
		firsts[0] = key
	case firsts[1] == "":
		firsts[1] = key
	}
	return firsts
}

// forgetRun drops what the index knows of run. The caller holds q.mu.
func (q *queue) forgetRun(run string) {
	delete(q.runs, run)
	q.dir.stale()
}

// forget drops every run known: rows may have gone.
func (x *Index) forgetRuns() {
	q := &x.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	q.runs = nil
	q.forgotten++
	q.dir.stale()
}

// commitQueued is the committer: it records and commits the steps queued
// in batches (see above) until there are none.
func (x *Index) commitQueued() {
	q, d := &x.queue, &x.deferred
	var timer *time.Timer
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			q.running = false
			q.mu.Unlock()
			x.foldWhenIdle()
			return
		}
		// A writer waiting for its step's statements (q.waiting) waits for
		// no batch.
		var wait time.Duration
		if !q.batchDue(time.Now()) && len(q.waiting) == 0 {
			wait = DeferredCommitAfter - time.Since(q.oldest)
		}
		q.mu.Unlock()
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-q.kick:
				timer.Stop()
			}
			continue
		}
		d.mu.Lock()
		// The turn first, so that a chunk of a background fold under way
		// delays the batch without counting in the pace its statements
		// keep (see drainQueueLocked), which bounds the queue: a pace
		// that counted the wait made writers wait for room they had.
		x.writeTurn.Lock()
		x.drainQueueLocked()
		if err := x.endDeferred(nil); err != nil {
			q.note(err)
		}
		x.writeTurn.Unlock()
		if d.stagedParts >= StagedFoldParts || d.stagedParts > 0 && time.Since(d.stagedSince) >= StagedFoldAge {
			x.foldInBackground()
		}
		d.mu.Unlock()
	}
}

// foldInBackground folds the steps staged in a goroutine of its own, a
// chunk at a time (see foldInChunks), unless one already does: the
// committer goes on staging meanwhile, and waits for a chunk at most. The
// caller holds d.mu.
func (x *Index) foldInBackground() {
	d := &x.deferred
	d.stagedParts = 0
	if d.folding || d.closed {
		return
	}
	d.folding = true
	d.folds.Add(1)
	go func() {
		defer d.folds.Done()
		x.foldInChunks()
		d.mu.Lock()
		d.folding = false
		d.mu.Unlock()
	}()
}

// foldInChunks folds the steps staged, stagedFoldChunk parts a transaction,
// until none is left or the index closes; a failure is kept for the next
// caller.
func (x *Index) foldInChunks() {
	for !x.closing() {
		more, err := x.foldChunk(context.Background())
		if err != nil {
			x.queue.note(fmt.Errorf("fold staged steps: %w", x.connError(err)))
			return
		}
		if !more {
			return
		}
	}
}

// closing says Close has begun.
func (x *Index) closing() bool {
	d := &x.deferred
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// foldWhenIdle folds the steps this index staged once nothing has been
// queued for StagedFoldAfter.
func (x *Index) foldWhenIdle() {
	d := &x.deferred
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stagedParts == 0 {
		return
	}
	if d.fold != nil {
		d.fold.Reset(StagedFoldAfter)
		return
	}
	d.fold = time.AfterFunc(StagedFoldAfter, func() {
		q := &x.queue
		q.mu.Lock()
		busy := q.running
		q.mu.Unlock()
		if busy {
			return // the committer arms the timer again when it stops
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		x.settleQueueLocked()
		x.foldInBackground()
	})
}

// batchDue says the queue is due for the committer: its oldest step has
// waited DeferredCommitAfter, or it holds half the parts, or half the
// work, a writer may queue before it waits for room. The caller holds
// q.mu.
func (q *queue) batchDue(now time.Time) bool {
	return len(q.items) > 0 && (now.Sub(q.oldest) >= DeferredCommitAfter ||
		2*q.parts >= queueMax || 2*time.Duration(q.parts)*q.perPart >= queueLag)
}

// wake tells the committer to look at the queue again. The caller holds
// q.mu.
func (q *queue) wake() {
	if q.kick == nil {
		return
	}
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// drainQueueLocked records the steps queued, in order, in the open
// transaction. The caller holds d.mu, so that a step taken from the queue
// is recorded before anyone else reads or writes through the index.
func (x *Index) drainQueueLocked() {
	q := &x.queue
	q.mu.Lock()
	items := q.items
	q.items = nil
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		for _, st := range items {
			for _, r := range runsOf(st.parts) {
				if q.queued[r]--; q.queued[r] <= 0 {
					delete(q.queued, r)
				}
			}
		}
	}()
	// done tells the writers waiting for room that steps left the queue,
	// which took the committer since start.
	done := func(sts []*queuedStep, start time.Time) {
		parts := 0
		for _, st := range sts {
			parts += len(st.parts)
		}
		took := time.Since(start) / time.Duration(max(1, parts))
		q.mu.Lock()
		q.perPart = cmp.Or(q.perPart, perPartGuess)
		q.perPart += (took - q.perPart) / 8
		q.parts -= parts
		q.room.Broadcast()
		q.mu.Unlock()
	}
	// Steps answered already are staged together (see staged.go); a step
	// that waits for its statements is recorded after them.
	var answered []*queuedStep
	start := time.Now()
	stage := func() {
		if len(answered) == 0 {
			return
		}
		x.stageSteps(context.Background(), answered)
		done(answered, start)
		answered = nil
	}
	for _, st := range items {
		if st.answered != nil {
			answered = append(answered, st)
			continue
		}
		stage()
		start = time.Now()
		x.recordQueued(st)
		done([]*queuedStep{st}, start)
		start = time.Now()
	}
	stage()
}

// recordQueued records a step taken from the queue whose writer waits
// for its statements (the committer stages the others: see staged.go),
// and tells the writer. The caller holds d.mu.
func (x *Index) recordQueued(st *queuedStep) {
	q := &x.queue
	st.recs, st.err = x.recordDeferredLocked(context.Background(), st.parts, st.at, st.committed)
	if st.err == nil {
		x.learn(st.parts, st.recs)
	}
	q.mu.Lock()
	for _, r := range runsOf(st.parts) {
		if q.waiting[r]--; q.waiting[r] <= 0 {
			delete(q.waiting, r)
		}
	}
	q.mu.Unlock()
	close(st.done)
}

// takeLost returns, once, the failure note kept.
func (q *queue) takeLost() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	err := q.lost
	q.lost = nil
	if err != nil {
		return lostError(err)
	}
	return nil
}

// lostError says that err lost steps whose writers were told before.
func lostError(err error) error {
	return fmt.Errorf("record: an earlier step failed after its write returned: %w", err)
}

// note keeps err for the next caller, if none is kept.
func (q *queue) note(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lost == nil {
		q.lost = err
	}
}

// learn notes in the runs known the parts ps recorded as recs, reading
// the rows of each run not known yet in the open transaction. The caller
// holds d.mu.
func (x *Index) learn(ps []NewPart, recs []Recorded) {
	q := &x.queue
	for _, run := range runsOf(ps) {
		q.mu.Lock()
		kr := q.runs[run]
		q.mu.Unlock()
		if kr == nil {
			// Read without q.mu: writers of other runs go on meanwhile.
			// Only the committer adds runs, and it holds d.mu.
			if x.deferred.tx == nil {
				continue
			}
			loaded, err := x.loadTxRun(context.Background(), run, prefixOf(ps, run))
			if err != nil || loaded == nil {
				continue
			}
			q.mu.Lock()
			if q.runs[run] == nil {
				q.install(run, loaded)
			}
			q.mu.Unlock()
			continue // it has ps's rows
		}
		q.mu.Lock()
		if q.runs[run] == kr {
			for i, p := range ps {
				if p.Run != run {
					continue
				}
				_, rest := splitKey(recs[i].Key)
				kr.keys[rest] = keyHolder{step: p.Step, tool: p.Tool, callID: p.CallID, part: p.Part, version: recs[i].Version}
				kr.blobs[p.Blob] = addKey(kr.blobs[p.Blob], recs[i].Key)
				kr.parts++
			}
		}
		q.mu.Unlock()
	}
}

// runsNamedSQL finds the runs rows of a run (one a key prefix: a prefix
// is its run's name, escaped, or with ~N after it: see keyInRun), and on
// SQLite, first, a row with id -1 when steps of the run are staged (see
// staged.go), whose parts are not in its rows yet;
// runPartsSQL reads a run's parts, oldest first.
const (
	runsNamedSQL       = `SELECT id, prefix FROM runs WHERE name = ?`
	runsNamedStagedSQL = `SELECT -1, '' WHERE EXISTS (SELECT 1 FROM staged WHERE run = ?1)
		UNION ALL SELECT id, prefix FROM runs WHERE name = ?1`
	runPartsSQL = `SELECT p.key, p.step, p.tool, p.call_id, p.part, p.version, b.digest, b.ext
		FROM parts p JOIN blobs b ON b.id = p.blob_id WHERE p.run_id = ? ORDER BY p.id LIMIT ?`
)

// loadCommittedRun reads what the index knows of a run from its
// committed rows (see loadRun).
func (x *Index) loadCommittedRun(ctx context.Context, run, prefix string) (*knownRun, error) {
	return loadRun(ctx, x.stmts.runsNamed, x.stmts.runParts, run, prefix)
}

// loadTxRun reads what the index knows of a run in the open transaction.
func (x *Index) loadTxRun(ctx context.Context, run, prefix string) (*knownRun, error) {
	tx := x.deferred.tx
	return loadRun(ctx, tx.StmtContext(ctx, x.stmts.runsNamed), tx.StmtContext(ctx, x.stmts.runParts), run, prefix)
}

// loadRun reads what the index knows of a run whose keys start with
// prefix, with the statements runsNamedSQL and runPartsSQL make: nothing
// for a run with no rows; nil when it keeps nothing of it (its name has
// rows under another prefix too, whose keys its same-content keys may
// name, or it has more than knownRunParts parts).
func loadRun(ctx context.Context, runsNamed, runParts *sql.Stmt, run, prefix string) (*knownRun, error) {
	kr := newKnownRun(prefix)
	var id int64
	rows := 0
	rs, err := runsNamed.QueryContext(ctx, run)
	err = eachRow(rs, err, func(r *sql.Rows) error {
		var pre string
		rows++
		if err := r.Scan(&id, &pre); err != nil {
			return err
		}
		if pre != prefix {
			id = -1
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case rows == 0:
		return kr, nil
	case rows > 1 || id < 0:
		return nil, nil
	}
	rs, err = runParts.QueryContext(ctx, id, knownRunParts+1)
	err = eachRow(rs, err, func(r *sql.Rows) error {
		var (
			rest   string
			h      keyHolder
			digest []byte
			b      cas.Blob
		)
		if err := r.Scan(&rest, &h.step, &h.tool, &h.callID, &h.part, &h.version, &digest, &b.Ext); err != nil {
			return err
		}
		var err error
		if b.Digest, err = digestOf(digest); err != nil {
			return err
		}
		kr.parts++
		kr.keys[rest] = h // rows come oldest first: the newest version stays
		kr.blobs[b] = addKey(kr.blobs[b], prefix+rest)
		return nil
	})
	if err != nil || kr.parts > knownRunParts {
		return nil, err
	}
	return kr, nil
}
