package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// PruneOptions says which parts Prune removes; exactly one criterion is set.
type PruneOptions struct {
	// Run removes every part of the run.
	Run string
	// Runs removes every part of these runs, in one transaction.
	Runs []string
	// Before removes every part created before this time.
	Before time.Time
	// KeepRuns removes every part of all but the KeepRuns runs with the
	// newest parts.
	KeepRuns int
	// Expired, when set (to the time now), removes every part of the runs
	// whose own ttl (NewPart.RunTTL) has run out: whose newest part is
	// older than Expired minus the ttl.
	Expired time.Time
	// DryRun counts what would be removed and removes nothing.
	DryRun bool
	// ActiveSince, when set, keeps every part of the runs with a part
	// created at or after it, whatever the criterion picks: a run still
	// being written to is never cut short.
	ActiveSince time.Time
	// Rule names, in the removal log, what asked for the prune
	// (RuleByName when empty).
	Rule string
	// Batch, when set, removes the parts Batch at a time, each batch in a
	// transaction of its own, folding the log into the database after
	// each: on a disk with little room, a prune of any size then needs
	// room for one batch's pages only. A prune that fails partway leaves
	// the batches before it done.
	Batch int
}

// PruneResult says what Prune removed (or would remove, on a dry run).
type PruneResult struct {
	RemovedParts int64
	// Runs lists the runs that lost parts.
	Runs []string
}

// pruneBeforeDatesSQL sets the dates of the groups that a prune of the
// parts older than its argument changes: a group that keeps parts starts at
// its oldest part not removed (a walk of parts_run from that time), and one
// that keeps none has no dates, without a walk: its walk would find none
// of its parts, and read every later part of the run to learn so.
const pruneBeforeDatesSQL = `UPDATE counts SET first_at = CASE WHEN last_at >= ? THEN (SELECT created_at FROM parts
		WHERE run_id = counts.run_id AND tool = counts.tool AND created_at >= ? ORDER BY created_at LIMIT 1) ELSE NULL END,
	last_at = CASE WHEN last_at >= ? THEN last_at ELSE NULL END
	WHERE first_at < ?`

// expiredRunsCond picks the parts of the runs whose ttl has run out at its
// argument (a time): whose newest part, over every row of the run (a run
// whose keys were rendered two ways has two), is older than the time minus
// the ttl. It reads parts, not the counters' dates, which a prune clears
// before it deletes.
const expiredRunsCond = `run_id IN (SELECT id FROM runs WHERE name IN (SELECT r.name FROM runs r WHERE r.ttl IS NOT NULL
		AND ` + runNewestPartSQL + ` < ? - r.ttl))`

// runNewestPartSQL is when the newest part of the run r was made, over
// every row of the run's name.
const runNewestPartSQL = `(SELECT max(p.created_at) FROM parts p JOIN runs rr ON rr.id = p.run_id WHERE rr.name = r.name)`

// Prune removes index rows. Their blobs stay until gc finds them unused.
func (x *Index) Prune(ctx context.Context, o PruneOptions) (PruneResult, error) {
	set := 0
	if o.Run != "" {
		set++
	}
	if len(o.Runs) > 0 {
		set++
	}
	if !o.Before.IsZero() {
		set++
	}
	if o.KeepRuns != 0 {
		set++
	}
	if !o.Expired.IsZero() {
		set++
	}
	if set != 1 {
		return PruneResult{}, errors.New("prune: give exactly one of a run (or runs), an age, a number of runs to keep or the time the runs' ttls are checked at")
	}
	if o.KeepRuns < 0 {
		return PruneResult{}, fmt.Errorf("prune: cannot keep %d runs", o.KeepRuns)
	}
	var cond, what, dates string
	var args, datesArgs []any
	switch {
	case o.Run != "":
		what = "run"
		cond, args = "run_id IN (SELECT id FROM runs WHERE name = ?)", []any{o.Run}
	case len(o.Runs) > 0:
		what = "runs"
		cond = "run_id IN (SELECT id FROM runs WHERE name IN (?" + strings.Repeat(", ?", len(o.Runs)-1) + "))"
		for _, r := range o.Runs {
			args = append(args, r)
		}
	case !o.Before.IsZero():
		what = "created_at"
		cond, args = "created_at < ?", []any{o.Before.UnixNano()}
		dates = pruneBeforeDatesSQL
		datesArgs = []any{o.Before.UnixNano(), o.Before.UnixNano(), o.Before.UnixNano(), o.Before.UnixNano()}
	case !o.Expired.IsZero():
		what = "run ttl"
		cond, args = expiredRunsCond, []any{o.Expired.UnixNano()}
	default:
		what = "run"
		cond = `run_id IN (SELECT id FROM runs WHERE name NOT IN (SELECT r.name FROM parts p JOIN runs r ON r.id = p.run_id
			GROUP BY r.name ORDER BY max(p.created_at) DESC, r.name LIMIT ?))`
		args = []any{o.KeepRuns}
	}
	if !o.ActiveSince.IsZero() {
		active := ` AND run_id NOT IN (SELECT run_id FROM counts WHERE last_at >= ?)`
		cond += active
		args = append(args, o.ActiveSince.UnixNano())
		if dates != "" {
			dates += active
			datesArgs = append(datesArgs, o.ActiveSince.UnixNano())
		}
	}
	if o.Rule == "" {
		o.Rule = RuleByName
	}
	if dates == "" {
		// Every group of a run removed keeps no part.
		dates, datesArgs = `UPDATE counts SET first_at = NULL, last_at = NULL WHERE `+cond, args
	}
	var res PruneResult
	var log []Removal
	err := x.write(ctx, func(tx *sql.Tx) error {
		res, log = PruneResult{}, nil
		rows, err := tx.QueryContext(ctx, `SELECT (SELECT name FROM runs WHERE id = run_id) AS run, count(*), min(created_at), max(created_at)
			FROM parts WHERE `+cond+` GROUP BY run ORDER BY run`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		now := x.now()
		for rows.Next() {
			var run string
			var n, first, last int64
			if err := rows.Scan(&run, &n, &first, &last); err != nil {
				return err
			}
			res.Runs = append(res.Runs, run)
			res.RemovedParts += n
			log = append(log, Removal{At: now, Run: run, Rule: o.Rule, Parts: n,
				FirstCreated: time.Unix(0, first), LastCreated: time.Unix(0, last)})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if o.DryRun || res.RemovedParts == 0 || o.Batch > 0 {
			return nil
		}
		if err := logRemovals(ctx, tx, log); err != nil {
			return err
		}
		// The triggers of parts look a group's oldest or newest part up
		// again each time the part at that bound goes, which a prune, as
		// it removes the oldest parts first, would do for nearly every
		// part. Each group's dates are set first to what they will be
		// once the parts are gone, so that no part removed is at a bound.
		if _, err := tx.ExecContext(ctx, dates, datesArgs...); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM parts WHERE `+cond, args...)
		return err
	})
	if err == nil && o.Batch > 0 && !o.DryRun && res.RemovedParts > 0 {
		err = x.pruneBatches(ctx, o.Batch, cond, args, dates, datesArgs)
		if err == nil {
			// Logged once every batch is done: a prune that stops
			// partway logs nothing, and the next one logs what it removes.
			err = x.write(ctx, func(tx *sql.Tx) error { return logRemovals(ctx, tx, log) })
		}
	}
	if err != nil {
		return PruneResult{}, fmt.Errorf("prune where %s: %w", what, err)
	}
	return res, nil
}

// pruneBatches removes the parts cond picks, n at a time (see
// PruneOptions.Batch): each batch sets the dates of the groups it changes
// to what they are once every part cond picks is gone, as a whole prune
// does, then removes its parts, and the log is folded into the database
// before the next. A batch the disk has no room for is rolled back, its
// log folded in, and tried again at half the size, down to one part.
func (x *Index) pruneBatches(ctx context.Context, n int, cond string, args []any, dates string, datesArgs []any) error {
	for {
		var gone int64
		err := x.write(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, dates, datesArgs...); err != nil {
				return err
			}
			r, err := tx.ExecContext(ctx, `DELETE FROM parts WHERE id IN (SELECT id FROM parts WHERE `+cond+` ORDER BY id LIMIT ?)`,
				append(slices.Clone(args), n)...)
			if err != nil {
				return err
			}
			gone, err = r.RowsAffected()
			return err
		})
		if isFull(err) && n > 1 {
			n /= 2
			x.Checkpoint(ctx)
			continue
		}
		if err != nil {
			return err
		}
		if gone < int64(n) {
			return nil
		}
		if err := x.Checkpoint(ctx); err != nil {
			return err
		}
	}
}

// RemovalLogMax is how many entries the removal log keeps: the oldest go
// as new ones come, so that a store pruned for years keeps a log of
// bounded size.
const RemovalLogMax = 100_000

// logRemovals adds log to the removal log, in tx, and trims the log to
// RemovalLogMax entries.
func logRemovals(ctx context.Context, tx *sql.Tx, log []Removal) error {
	for _, m := range log {
		if _, err := tx.ExecContext(ctx, `INSERT INTO removals (at, run, rule, parts, first_at, last_at) VALUES (?, ?, ?, ?, ?, ?)`,
			m.At.UnixNano(), m.Run, m.Rule, m.Parts, m.FirstCreated.UnixNano(), m.LastCreated.UnixNano()); err != nil {
			return err
		}
	}
	if len(log) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM removals WHERE id <= (SELECT max(id) FROM removals) - ?`, RemovalLogMax)
	return err
}
