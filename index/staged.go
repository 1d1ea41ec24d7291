package index

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
)

// Staged steps: the committer of an index that defers its commits
// (WithDeferredCommit) does not run a part's statements for a step whose
// writer it answered already (see RecordQueued). It commits the step's
// parts in the table staged instead: a row for each run of a batch, which
// holds the run's steps encoded in one value (see encodeStaged), not the
// seven or so rows, index entries and counters a part makes. The
// statements run later, when the index folds the staged steps into
// parts, blobs, runs and the counters, in the order they were staged, in
// one transaction that also removes them:
//   - before any other read or write through an Index that may write (see
//     settle), whichever process's it is, and inside every write
//     transaction (see commitTx), so that no read and no gc decides
//     without the steps staged before it;
//   - before a step the committer could not answer is recorded (see
//     recordDeferredLocked), so that its statements see them;
//   - by the index that staged them, once it has nothing queued for
//     StagedFoldAfter, or once its staged steps are StagedFoldAge old or
//     hold StagedFoldParts parts: in a goroutine of its own, a chunk of
//     rows a transaction (see foldInBackground and stagedFoldChunk),
//     beside the committer;
//   - at Close.
//
// A staged step is committed: a crash loses none of it (what a crash may
// lose is what waits in the queue, as before). An index opened read-only
// cannot fold: it sees a step once its writer, or any other process that
// may write, folded it.
const (
	StagedFoldAfter = 20 * time.Millisecond
	StagedFoldAge   = 250 * time.Millisecond
	StagedFoldParts = 1 << 12
)

const (
	insertStagedSQL = `INSERT INTO staged (run, at, parts) VALUES (?, ?, ?)`
	stagedAnySQL    = `SELECT EXISTS (SELECT 1 FROM staged)`
	stagedRowsSQL   = `SELECT id, run, parts FROM staged ORDER BY id LIMIT ?`
	deleteStagedSQL = `DELETE FROM staged WHERE id <= ?`
)

// A staged row holds steps of one run, in the order they were queued:
// stagedFormat, the number of steps, then for each step its time stamp
// (Unix nanoseconds), the number of its parts, and for each part its key,
// step, tool, call id, position, kind, MIME type, file name, characters,
// bytes, digest (32 bytes), extension, run ttl, and what its writer was
// told it is recorded as (key and version), to count a fold that records
// it otherwise (QueueMismatches). Strings are a length (uvarint) and their
// bytes, counts uvarints, other numbers varints.
const stagedFormat = 1

// stagedStep is a step of a staged row: its parts, stamped at, and what
// its writer was told.
type stagedStep struct {
	at       int64
	ps       []NewPart
	answered []Recorded
}

// encodeStaged encodes steps of one run for a staged row.
func encodeStaged(steps []stagedStep) []byte {
	b := append(make([]byte, 0, 1+160*len(steps)), stagedFormat)
	b = binary.AppendUvarint(b, uint64(len(steps)))
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, st := range steps {
		b = binary.AppendVarint(b, st.at)
		b = binary.AppendUvarint(b, uint64(len(st.ps)))
		for i, p := range st.ps {
			str(p.Key)
			b = binary.AppendVarint(b, int64(p.Step))
			str(p.Tool)
			str(p.CallID)
			b = binary.AppendVarint(b, int64(p.Part))
			str(string(p.Kind))
			str(p.MIME)
			str(p.Filename)
			b = binary.AppendVarint(b, p.Chars)
			b = binary.AppendVarint(b, p.Bytes)
			b = append(b, p.Blob.Digest[:]...)
			str(p.Blob.Ext)
			b = binary.AppendVarint(b, int64(p.RunTTL))
			str(st.answered[i].Key)
			b = binary.AppendVarint(b, int64(st.answered[i].Version))
		}
	}
	return b
}

// stagedReader reads what encodeStaged wrote, keeping its first failure.
type stagedReader struct {
	b   []byte
	err error
}

func (r *stagedReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s cut short or malformed", what)
	}
	r.b = nil
}

func (r *stagedReader) varint(what string) int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a count of things that take at least least bytes each: no
// count can be over what is left of the row divided by that.
func (r *stagedReader) count(what string, least int) int {
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > uint64(len(r.b)-k)/uint64(least) {
		r.fail(what)
		return 0
	}
	r.b = r.b[k:]
	return int(n)
}

func (r *stagedReader) str(what string) string {
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > uint64(len(r.b)-k) {
		r.fail(what)
		return ""
	}
	s := string(r.b[k : k+int(n)])
	r.b = r.b[k+int(n):]
	return s
}

// decodeStaged decodes a staged row of run: its steps, their parts
// checked as a write's are.
func decodeStaged(run string, data []byte) ([]stagedStep, error) {
	if len(data) == 0 || data[0] != stagedFormat {
		return nil, errors.New("not a staged row of this format")
	}
	// A part takes 40 bytes at the least, a step 2 and a part.
	r := &stagedReader{b: data[1:]}
	steps := make([]stagedStep, r.count("step count", 42))
	for i := range steps {
		st := &steps[i]
		st.at = r.varint("time stamp")
		n := r.count("part count", 40)
		if n == 0 && r.err == nil {
			r.fail("part count")
		}
		for j := 0; j < n && r.err == nil; j++ {
			p := NewPart{Run: run}
			p.Key = r.str("key")
			p.Step = int(r.varint("step"))
			p.Tool = r.str("tool")
			p.CallID = r.str("call id")
			p.Part = int(r.varint("position"))
			p.Kind = catalog.Kind(r.str("kind"))
			p.MIME = r.str("MIME type")
			p.Filename = r.str("file name")
			p.Chars = r.varint("characters")
			p.Bytes = r.varint("bytes")
			if len(r.b) < len(p.Blob.Digest) {
				r.fail("digest")
				break
			}
			r.b = r.b[copy(p.Blob.Digest[:], r.b):]
			p.Blob.Ext = r.str("extension")
			p.RunTTL = time.Duration(r.varint("run ttl"))
			rec := Recorded{Key: r.str("answered key"), Version: int(r.varint("answered version"))}
			if r.err != nil {
				break
			}
			if err := checkPart(p); err != nil {
				return nil, fmt.Errorf("step %d, part %d: %w", i, j, err)
			}
			st.ps, st.answered = append(st.ps, p), append(st.answered, rec)
		}
		if r.err != nil {
			return nil, fmt.Errorf("step %d, part %d: %w", i, len(st.ps), r.err)
		}
	}
	switch {
	case r.err != nil:
		return nil, r.err
	case len(r.b) != 0:
		return nil, fmt.Errorf("%d bytes after the last step", len(r.b))
	}
	return steps, nil
}

// stageSteps commits nothing yet: it adds the answered steps sts to the
// open transaction as staged rows (beginning it if none is open), and
// their committed functions to the transaction's. When it fails, the
// open transaction is rolled back, and every writer of its steps and of
// sts told so, and the failure kept for the next caller. The caller holds
// d.mu.
func (x *Index) stageSteps(ctx context.Context, sts []*queuedStep) {
	d := &x.deferred
	if d.tx == nil {
		if err := x.beginDeferred(ctx); err != nil {
			err = fmt.Errorf("stage steps: %w", x.connError(err))
			for _, st := range sts {
				if st.committed != nil {
					st.committed(err)
				}
			}
			x.queue.note(err)
			return
		}
	}
	for _, st := range sts {
		if st.committed != nil {
			d.committed = append(d.committed, st.committed)
		}
	}
	if err := x.insertStaged(ctx, sts); err != nil {
		err = fmt.Errorf("stage steps: %w", x.connError(err))
		x.endDeferred(err)
		x.queue.note(err)
	}
}

// insertStaged runs stageSteps's statements in the open transaction: a
// row for each run of sts, which holds that run's steps in their order.
func (x *Index) insertStaged(ctx context.Context, sts []*queuedStep) error {
	d := &x.deferred
	ins := d.r.stmt(ctx, &d.r.insertStaged, x.stmts.insertStaged)
	var runs []string
	byRun := map[string][]stagedStep{}
	parts := 0
	for _, st := range sts {
		for _, run := range runsOf(st.parts) {
			s := stagedStep{at: st.at}
			for i, p := range st.parts {
				if p.Run == run {
					s.ps, s.answered = append(s.ps, p), append(s.answered, st.answered[i])
				}
			}
			if byRun[run] == nil {
				runs = append(runs, run)
			}
			byRun[run] = append(byRun[run], s)
		}
		parts += len(st.parts)
	}
	for _, run := range runs {
		if _, err := ins.ExecContext(ctx, run, byRun[run][0].at, encodeStaged(byRun[run])); err != nil {
			return err
		}
	}
	d.rows += parts
	if d.stagedParts == 0 {
		d.stagedSince = time.Now()
	}
	d.stagedParts += parts
	q := &x.queue
	q.mu.Lock()
	if q.inTx == nil {
		q.inTx = map[string]bool{}
	}
	for _, run := range runs {
		q.inTx[run] = true
	}
	q.mu.Unlock()
	return nil
}

// foldStaged records the staged steps in tx, through r (whose time stamp
// it restores), in the order they were staged, and removes them: every
// one when parts is 0, else the first rows that hold at least parts parts
// (or all there are), whole rows, a row holding the steps of one run that
// one batch staged, whatever their number. It returns whether rows are
// left, and, as dropped, why steps whose statements failed were removed
// without their parts: such a step is taken back alone, as a
// queued step's is, and the others folded. A failure for want of room, or
// one the savepoint cannot take back, is err: the caller rolls tx back,
// and every step stays staged.
//
// With alone, tx holds nothing before the fold, so that a failed step
// can be taken back by rolling it back whole: the steps are recorded
// without a savepoint, whose journal would copy every page they change
// (for a chunk of hundreds of parts, more pages than SQLite keeps in
// memory, written to a temporary file), and a step that fails makes err
// errRefold, for the caller to roll tx back and fold again without alone
// (see foldFirst).
func (x *Index) foldStaged(ctx context.Context, tx *sql.Tx, r *recorder, parts int, alone bool) (more bool, dropped, err error) {
	if x.pg || x.readOnly {
		return false, nil, nil
	}
	limit := parts // a row holds one part at least
	if parts == 0 {
		limit = -1 // SQLite's no limit
	}
	type row struct {
		id   int64
		run  string
		data []byte
	}
	var staged []row
	rs, err := r.stmt(ctx, &r.stagedRows, x.stmts.stagedRows).QueryContext(ctx, limit)
	err = eachRow(rs, err, func(rs *sql.Rows) error {
		var s row
		if err := rs.Scan(&s.id, &s.run, &s.data); err != nil {
			return err
		}
		staged = append(staged, s)
		return nil
	})
	if err != nil || len(staged) == 0 {
		return false, nil, err
	}
	more = len(staged) == limit
	defer func(now int64) { r.now = now }(r.now)
	// step is a step of staged row id.
	type step struct {
		stagedStep
		id  int64
		run string
	}
	steps := make([]step, 0, len(staged))
	taken := 0
	for i, s := range staged {
		if parts > 0 && taken >= parts {
			staged, more = staged[:i], true
			break
		}
		sts, err := decodeStaged(s.run, s.data)
		if err != nil {
			// No fold could ever record it: kept, it would stop every one.
			dropped = errors.Join(dropped, fmt.Errorf("staged row %d of run %s dropped: unreadable: %w", s.id, clip(s.run), err))
			continue
		}
		for _, st := range sts {
			steps = append(steps, step{st, s.id, s.run})
			taken += len(st.ps)
		}
	}
	// record records a step, and notes a run whose step it records
	// otherwise than answered.
	var mismatched []string
	record := func(s step) error {
		r.now = s.at
		same := true
		for i, p := range s.ps {
			rec, err := r.record(ctx, p)
			if err != nil {
				return err
			}
			same = same && rec.Key == s.answered[i].Key && rec.Version == s.answered[i].Version
		}
		if !same {
			mismatched = append(mismatched, s.run)
		}
		return nil
	}
	recordAll := func() error {
		for _, s := range steps {
			if err := record(s); err != nil {
				return fmt.Errorf("staged row %d, step %d: %w", s.id, s.ps[0].Step, err)
			}
		}
		return nil
	}
	if alone {
		err = recordAll()
		if err != nil && !isFull(err) {
			return false, nil, fmt.Errorf("%w: %w", errRefold, err)
		}
	} else {
		// Every step under one savepoint; should one fail, each under its
		// own, so that only the failed one is taken back.
		err = x.underSavepoint(ctx, tx, r, recordAll)
	}
	if err != nil && !isFull(err) && !errors.Is(err, errFoldBroken) {
		mismatched = nil
		for _, s := range steps {
			err = x.underSavepoint(ctx, tx, r, func() error { return record(s) })
			if err != nil && !isFull(err) && !errors.Is(err, errFoldBroken) {
				dropped = errors.Join(dropped, fmt.Errorf("step %d of run %s, staged in row %d, dropped: %w", s.ps[0].Step, clip(s.run), s.id, err))
				err = nil
			}
			if err != nil {
				break
			}
		}
	}
	switch {
	case isFull(err):
		// Nothing is dropped for want of room: the steps stay staged.
		return false, nil, fmt.Errorf("%w: %w", cas.ErrDiskFull, err)
	case err != nil:
		return false, nil, err
	}
	if _, err := tx.ExecContext(ctx, deleteStagedSQL, staged[len(staged)-1].id); err != nil {
		return false, nil, err
	}
	if len(mismatched) > 0 {
		// What this index knows of those runs is not what the rows say.
		q := &x.queue
		q.mismatches.Add(int64(len(mismatched)))
		q.mu.Lock()
		for _, run := range mismatched {
			q.forgetRun(run)
		}
		q.mu.Unlock()
	}
	return more, dropped, nil
}

// underSavepoint runs f's statements under a savepoint (a deferred step's:
// the two never nest), and takes them back when f fails. It returns f's
// failure, or errFoldBroken when they could not be taken back.
func (x *Index) underSavepoint(ctx context.Context, tx *sql.Tx, r *recorder, f func() error) error {
	if _, err := r.stmt(ctx, &r.savepoint, x.stmts.savepoint).ExecContext(ctx); err != nil {
		return err
	}
	runs := len(r.newRuns)
	err := f()
	if err == nil {
		if _, err = r.stmt(ctx, &r.release, x.stmts.release).ExecContext(ctx); err == nil {
			return nil
		}
	}
	if _, rerr := tx.ExecContext(ctx, `ROLLBACK TO deferred_step; RELEASE deferred_step`); rerr != nil {
		return fmt.Errorf("%w: %w", errFoldBroken, errors.Join(err, rerr))
	}
	if len(r.newRuns) != runs {
		r.newRuns = map[runKey]int64{} // a run the statements made is not there after all
	}
	r.ttls = nil
	return err
}

// errFoldBroken says a fold could not take back a staged step's
// statements: its transaction is in no known state, and is rolled back.
var errFoldBroken = errors.New("the fold's transaction could not be rolled back to a savepoint")

// errRefold says a fold without savepoints (foldStaged's alone) found a
// step whose statements fail: its transaction is to be rolled back, and
// the fold made again with a savepoint for each step.
var errRefold = errors.New("a staged step failed in a fold without savepoints")

// foldFirst begins a transaction with begin and folds in it, first, the
// steps staged (at most parts of them, 0 for all; see foldStaged): alone,
// and, should a step fail, again in a new transaction, each step under a
// savepoint of its own. It returns the transaction, open, unless err.
func (x *Index) foldFirst(ctx context.Context, begin func() (*sql.Tx, error), parts int) (tx *sql.Tx, more bool, dropped, err error) {
	for _, alone := range []bool{true, false} {
		if tx, err = begin(); err != nil {
			return nil, false, nil, err
		}
		more, dropped, err = x.foldStaged(ctx, tx, x.newRecorder(tx, 0), parts, alone)
		if err == nil {
			return tx, more, dropped, nil
		}
		tx.Rollback()
		if !errors.Is(err, errRefold) {
			break
		}
	}
	return nil, false, nil, err
}

// foldIfStaged folds the steps staged, if there are any, in a transaction
// of its own. A read-only index, or one in PostgreSQL, stages and folds
// nothing.
func (x *Index) foldIfStaged(ctx context.Context) error {
	if x.pg || x.readOnly {
		return nil
	}
	// One look at a time: reads at once take one connection for it, not
	// one each (a connection of an index read through a map maps it).
	x.foldMu.Lock()
	defer x.foldMu.Unlock()
	var any bool
	if err := x.stmts.stagedAny.QueryRowContext(ctx).Scan(&any); err != nil || !any {
		return err
	}
	return retryBusy(ctx, x.retry, func() error {
		return x.commitTx(ctx, x.db, func(*sql.Tx) error { return nil }) // commitTx folds
	})
}

// stagedFoldChunk is how many staged parts a fold in the background takes
// in one transaction, in whole rows: a few milliseconds of statements,
// which is as long as the committer's next batch waits for the write lock
// (a row of one run holds as many parts as its batch had of that run).
const stagedFoldChunk = 256

// foldChunk folds the first stagedFoldChunk staged parts in a transaction
// of its own, and says whether there may be more.
func (x *Index) foldChunk(ctx context.Context) (more bool, err error) {
	x.foldMu.Lock()
	defer x.foldMu.Unlock()
	var dropped error
	err = retryBusy(ctx, x.retry, func() error {
		x.writeTurn.Lock()
		defer x.writeTurn.Unlock()
		var tx *sql.Tx
		tx, more, dropped, err = x.foldFirst(ctx, func() (*sql.Tx, error) { return x.db.BeginTx(ctx, nil) }, stagedFoldChunk)
		if err != nil {
			return err
		}
		return tx.Commit()
	})
	if err == nil && dropped != nil {
		x.queue.note(dropped)
	}
	return more, err
}

// withoutFoldKey marks a context made by WithoutFold.
type withoutFoldKey struct{}

// WithoutFold returns ctx for reads that do not fold the steps staged
// first: they may miss what was staged since the last fold (within
// StagedFoldAge of this process's writes, by StagedFoldAfter once they
// pause). It is for a look that tolerates that and runs beside the
// writes, such as whether maintenance is due, which would otherwise make
// every fold a writer's. Writes fold whatever their context.
func WithoutFold(ctx context.Context) context.Context {
	return context.WithValue(ctx, withoutFoldKey{}, true)
}

// FoldStaged folds every step staged so far into the index's rows (see
// the top of this file), as the next read would, and returns what kept it
// from that, or why it dropped a step (which the next caller would be
// told otherwise).
func (x *Index) FoldStaged(ctx context.Context) error {
	if err := x.settle(); err != nil {
		return fmt.Errorf("fold staged steps: %w", err)
	}
	return x.queue.takeLost()
}
