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
// run is read alone, as on PostgreSQL; so are the first runDirAfter runs
// an index meets, so that a process that writes a step or two (a hook
// run once a call) does not read the names of a store's thousands of
// runs for them.
const (
	runDirFresh = DeferredCommitAfter
	runDirMax   = 1 << 14
	runDirAfter = 4
)

// runDirSQL reads the runs rows after id ?1, at most ?2 of them, and,
// with id 0, the runs with staged steps.
const runDirSQL = `SELECT id, name FROM (SELECT id, name FROM runs WHERE id > ?1 ORDER BY id LIMIT ?2)
	UNION ALL SELECT 0, run FROM staged GROUP BY run`

type runDir struct {
	// mu guards what was read; reading lets one writer read at a time,
	// without mu, so that the others go on with what was read before.
	mu      sync.RWMutex
	reading sync.Mutex
	// names holds the runs rows' names up to id last; staged the runs
	// with staged steps, as read at; read is gen when the read began.
	names  map[string]bool
	staged map[string]bool
	last   int64
	at     time.Time
	read   int64
	// gen counts what the index forgot of its runs: a directory read
	// before is read again before use. met counts the runs writers
	// looked for.
	gen atomic.Int64
	met atomic.Int64
	// off: the store has more runs than max (runDirMax but in tests).
	off bool
	max int
	// stmt is runDirSQL, prepared at its first use (under reading).
	stmt *sql.Stmt
}

// close closes the statement the directory prepared.
func (d *runDir) close() {
	d.reading.Lock()
	defer d.reading.Unlock()
	if d.stmt != nil {
		d.stmt.Close()
		d.stmt = nil
	}
}

// stale makes the next writer read the directory again.
func (d *runDir) stale() { d.gen.Add(1) }

// runsWithoutRows reports, for each of runs, whether the directory shows
// it has no rows and no staged steps, reading it first if it is older
// than runDirFresh; nil when the index keeps no directory or the read
// failed. While another writer reads it, a writer goes on with the
// directory read before, unless the index forgot runs since that read.
func (x *Index) runsWithoutRows(ctx context.Context, runs []string) []bool {
	d := &x.queue.dir
	if x.pg || x.readOnly || d.met.Add(int64(len(runs))) <= runDirAfter {
		return nil
	}
	// A directory the index has not forgotten since its read serves: when
	// fresh, while another writer reads it again, or once read here.
	for try := 0; try < 3; try++ {
		now := x.now()
		d.mu.RLock()
		valid := !d.off && d.names != nil && d.read == d.gen.Load()
		if valid && (try > 0 || now.Sub(d.at) < runDirFresh && !now.Before(d.at)) {
			out := make([]bool, len(runs))
			for i, r := range runs {
				out[i] = !d.names[r] && !d.staged[r]
			}
			d.mu.RUnlock()
			return out
		}
		off := d.off
		d.mu.RUnlock()
		switch {
		case off:
			return nil // too many runs
		case d.reading.TryLock():
			err := x.readRunDir(ctx, d, now)
			d.reading.Unlock()
			if err != nil {
				return nil
			}
		case !valid:
			d.reading.Lock() // wait for another writer's read
			d.reading.Unlock()
		}
	}
	return nil // forgotten again while read
}

// readRunDir reads the runs rows added since the directory's last read,
// and the runs with staged steps, and keeps them as read at now. The
// caller holds d.reading.
func (x *Index) readRunDir(ctx context.Context, d *runDir, now time.Time) (err error) {
	gen := d.gen.Load()
	d.mu.RLock()
	names, last, limit := d.names, d.last, d.max
	d.mu.RUnlock()
	if limit == 0 {
		limit = runDirMax
	}
	defer func() {
		if err != nil {
			d.mu.Lock()
			d.names = nil // read whole again next time
			d.mu.Unlock()
		}
	}()
	if names == nil {
		// Ids only grow from 1: the highest bounds the rows, and a store
		// with too many is told without reading them.
		var top int64
		if err := x.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM runs`).Scan(&top); err != nil {
			return err
		}
		if top > int64(limit) {
			d.mu.Lock()
			d.off = true
			d.mu.Unlock()
			return nil
		}
		last = 0
	}
	if d.stmt == nil {
		if d.stmt, err = x.db.PrepareContext(ctx, runDirSQL); err != nil {
			return err
		}
	}
	room := limit - len(names)
	rs, err := d.stmt.QueryContext(ctx, last, room+1)
	var added []string
	staged := map[string]bool{}
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
		added = append(added, name)
		last = max(last, id)
		return nil
	})
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(added) > room {
		d.off, d.names, d.staged = true, nil, nil
		return nil
	}
	if d.names == nil {
		d.names = make(map[string]bool, len(added))
	}
	for _, name := range added {
		d.names[name] = true
	}
	d.staged, d.last, d.at, d.read = staged, last, now, gen
	return nil
}
