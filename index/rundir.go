package index

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// The directory of runs: which runs have rows, so that RecordQueued can
// tell a run that has none (an agent's new task, most runs a writer
// meets) without a statement of its own for it. The index reads the
// names of every runs row at once, and then only the rows added since,
// with the runs that have staged steps, in one statement; it reads again
// when the directory is older than runDirFresh. Runs rows are never
// deleted, and SQLite has one writer at a time: a row committed later
// has a greater id, and none is missed (PostgreSQL's sequences give no
// such order, and there the index keeps no directory).
//
// A writer whose run is not in a directory read less than runDirFresh
// ago takes the run for one without rows. A run that another process
// starts meanwhile is missed for that long, as a run is whose steps
// another process has queued but not committed yet (see queued.go), and
// the fold counts the mismatch. What this index forgets of its own runs
// (forgetRuns, forgetRun, a full map of runs) makes it read the directory
// again before it trusts it: the runs' rows are committed or staged by
// then. Past runDirMax runs the index keeps no directory, and each new
// run is read alone, as on PostgreSQL.
const (
	runDirFresh = DeferredCommitAfter
	runDirMax   = 1 << 14
)

// runDirSQL reads the runs rows after id ?1, at most ?2 of them, and,
// with id 0, the runs with staged steps.
const runDirSQL = `SELECT id, name FROM (SELECT id, name FROM runs WHERE id > ?1 ORDER BY id LIMIT ?2)
	UNION ALL SELECT 0, run FROM staged GROUP BY run`

type runDir struct {
	mu sync.Mutex
	// names holds the runs rows' names up to id last; staged the runs
	// with staged steps, as read at; read is gen when the read began.
	names  map[string]bool
	staged map[string]bool
	last   int64
	at     time.Time
	read   int64
	// gen counts what the index forgot of its runs: a directory read
	// before is read again before use.
	gen atomic.Int64
	// off: the store has more runs than max (runDirMax but in tests).
	off bool
	max int
	// stmt is runDirSQL, prepared at its first use.
	stmt *sql.Stmt
}

// close closes the statement the directory prepared.
func (d *runDir) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stmt != nil {
		d.stmt.Close()
		d.stmt = nil
	}
}

// stale makes the next writer read the directory again.
func (d *runDir) stale() { d.gen.Add(1) }

// runsWithoutRows reports, for each of runs, whether the directory shows
// it has no rows and no staged steps, reading it first if it is not
// fresh; nil when the index keeps no directory or the read failed.
func (x *Index) runsWithoutRows(ctx context.Context, runs []string) []bool {
	d := &x.queue.dir
	if x.pg || x.readOnly {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := x.now()
	if gen := d.gen.Load(); !d.off && (d.names == nil || d.read != gen || now.Sub(d.at) >= runDirFresh || now.Before(d.at)) {
		if err := x.readRunDir(ctx, d); err != nil {
			d.names = nil
			return nil
		}
		d.at, d.read = now, gen
	}
	if d.off || d.gen.Load() != d.read {
		return nil // too many runs, or forgotten while read
	}
	out := make([]bool, len(runs))
	for i, r := range runs {
		out[i] = !d.names[r] && !d.staged[r]
	}
	return out
}

// readRunDir reads the runs rows added since the directory's last read,
// and the runs with staged steps. The caller holds d.mu.
func (x *Index) readRunDir(ctx context.Context, d *runDir) error {
	if d.max == 0 {
		d.max = runDirMax
	}
	if d.names == nil {
		// Ids only grow from 1: the highest bounds the rows, and a store
		// with too many is told without reading them.
		var top int64
		if err := x.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM runs`).Scan(&top); err != nil {
			return err
		}
		if top > int64(d.max) {
			d.off = true
			return nil
		}
		d.names, d.last = map[string]bool{}, 0
	}
	if d.stmt == nil {
		st, err := x.db.PrepareContext(ctx, runDirSQL)
		if err != nil {
			return err
		}
		d.stmt = st
	}
	room := d.max - len(d.names)
	rs, err := d.stmt.QueryContext(ctx, d.last, room+1)
	staged := map[string]bool{}
	added := 0
	err = eachRow(rs, err, func(r *sql.Rows) error {
		var (
			id   int64
			name string
		)
		if err := r.Scan(&id, &name); err != nil {
			return err
		}
		if id == 0 {
			staged[name] = true
			return nil
		}
		added++
		d.names[name] = true
		d.last = max(d.last, id)
		return nil
	})
	if err != nil {
		return err
	}
	d.staged = staged
	if added > room {
		d.off, d.names, d.staged = true, nil, nil
	}
	return nil
}
