package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolcas/toolcas/catalog"
)

// Setting returns the value of the named setting, and whether it is set.
func (x *Index) Setting(ctx context.Context, name string) (string, bool, error) {
	var v string
	err := x.read(ctx, func() error {
		return x.db.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&v)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("setting %s: %w", name, err)
	}
	return v, true, nil
}

// SetSetting sets the named setting to value, or removes it when value is
// empty.
func (x *Index) SetSetting(ctx context.Context, name, value string) error {
	err := x.write(ctx, func(tx *sql.Tx) error {
		if value == "" {
			_, err := tx.ExecContext(ctx, `DELETE FROM settings WHERE name = ?`, name)
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value)
		return err
	})
	if err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	return nil
}

// Removal is one entry of the removal log.
type Removal = catalog.Removal

// RuleByName is the removal log's rule for a prune asked for directly
// (casctl prune), rather than by the store's retention policy.
const RuleByName = "prune"

// Removals returns the removal log, newest first: the most recent limit
// entries (all when limit is 0), and since, when set, only entries from
// then on.
func (x *Index) Removals(ctx context.Context, since time.Time, limit int) ([]Removal, error) {
	type row struct {
		At      int64         `db:"at"`
		Run     string        `db:"run"`
		Rule    string        `db:"rule"`
		Parts   int64         `db:"parts"`
		FirstAt sql.NullInt64 `db:"first_at"`
		LastAt  sql.NullInt64 `db:"last_at"`
	}
	q := `SELECT at, run, rule, parts, first_at, last_at FROM removals WHERE at >= ? ORDER BY at DESC, id DESC`
	args := []any{since.UnixNano()}
	if since.IsZero() {
		args[0] = int64(0)
	}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := selectRows[row](ctx, x, q, args...)
	if err != nil {
		return nil, fmt.Errorf("removals: %w", err)
	}
	return convertRows(rows, func(r row) (Removal, error) {
		m := Removal{At: time.Unix(0, r.At), Run: r.Run, Rule: r.Rule, Parts: r.Parts}
		if r.FirstAt.Valid {
			m.FirstCreated = time.Unix(0, r.FirstAt.Int64)
		}
		if r.LastAt.Valid {
			m.LastCreated = time.Unix(0, r.LastAt.Int64)
		}
		return m, nil
	})
}

// RemovalTotals sums the removal log: its entries, the parts they removed,
// and when the last was.
func (x *Index) RemovalTotals(ctx context.Context) (entries, parts int64, last time.Time, err error) {
	var at sql.NullInt64
	err = x.read(ctx, func() error {
		return x.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(parts), 0), max(at) FROM removals`).Scan(&entries, &parts, &at)
	})
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("removals: %w", err)
	}
	if at.Valid {
		last = time.Unix(0, at.Int64)
	}
	return entries, parts, last, nil
}

// RunActivity is when a run was last written to: its newest part's time.
type RunActivity struct {
	Run  string
	Last time.Time
	// Parts counts the run's parts.
	Parts int64
}

// RunsByActivity returns every run that has parts, the least recently
// written first, from the kept counters.
func (x *Index) RunsByActivity(ctx context.Context) ([]RunActivity, error) {
	type row struct {
		Run   string `db:"run"`
		Last  int64  `db:"last"`
		Parts int64  `db:"parts"`
	}
	rows, err := selectRows[row](ctx, x, `SELECT r.name AS run, max(c.last_at) AS last, sum(c.parts) AS parts
		FROM counts c JOIN runs r ON r.id = c.run_id WHERE c.parts > 0 AND c.last_at IS NOT NULL
		GROUP BY r.name ORDER BY last, r.name`)
	if err != nil {
		return nil, fmt.Errorf("runs by activity: %w", err)
	}
	return convertRows(rows, func(r row) (RunActivity, error) {
		return RunActivity{Run: r.Run, Last: time.Unix(0, r.Last), Parts: r.Parts}, nil
	})
}

// RunCounts counts runs by when their parts were created, from the kept
// counters, with the dates Stats gives each run in ByRun.
type RunCounts struct {
	// Runs counts the runs that have parts.
	Runs int64
	// Inactive counts those of them with no part created at or after the
	// activeSince given to CountRuns.
	Inactive int64
	// Aged counts the inactive runs whose oldest part was created before
	// the agedBefore given to CountRuns.
	Aged int64
}

// CountRuns counts the runs that have parts, those of them not written to
// since activeSince, and those of these whose oldest part is older than
// agedBefore: what retention rules decide on, in one aggregate row.
func (x *Index) CountRuns(ctx context.Context, activeSince, agedBefore time.Time) (RunCounts, error) {
	var a RunCounts
	err := x.read(ctx, func() error {
		return x.db.QueryRowContext(ctx, countRunsSQL, activeSince.UnixNano(), activeSince.UnixNano(), agedBefore.UnixNano()).
			Scan(&a.Runs, &a.Inactive, &a.Aged)
	})
	if err != nil {
		return RunCounts{}, fmt.Errorf("count runs: %w", err)
	}
	return a, nil
}

// countRunsSQL dates a run as countedStats does: by name (a run whose keys
// were rendered two ways has two rows), from the groups whose dates are
// both set, and at time 0 when none are. A group without parts has no
// dates (its triggers clear them with its last part), so the groups with
// parts alone date the run.
const countRunsSQL = `SELECT count(*), coalesce(sum(CASE WHEN l < ? THEN 1 ELSE 0 END), 0),
	coalesce(sum(CASE WHEN l < ? AND f < ? THEN 1 ELSE 0 END), 0)
	FROM (SELECT coalesce(min(CASE WHEN c.last_at IS NULL THEN NULL ELSE c.first_at END), 0) AS f,
		coalesce(max(CASE WHEN c.first_at IS NULL THEN NULL ELSE c.last_at END), 0) AS l
		FROM counts c JOIN runs r ON r.id = c.run_id WHERE c.parts > 0 GROUP BY r.name) g`

// HasRunTTLs reports whether any run has a ttl of its own
// (NewPart.RunTTL), through the partial index of those that have one.
func (x *Index) HasRunTTLs(ctx context.Context) (bool, error) {
	var n int64
	err := x.read(ctx, func() error {
		return x.db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM runs WHERE ttl IS NOT NULL LIMIT 1) t`).Scan(&n)
	})
	if err != nil {
		return false, fmt.Errorf("run ttls: %w", err)
	}
	return n > 0, nil
}

// HasExpiredRuns reports whether a run's own ttl (NewPart.RunTTL) has run
// out at now, as a prune with Expired set to now would find, among the
// runs not written to since activeSince.
func (x *Index) HasExpiredRuns(ctx context.Context, now, activeSince time.Time) (bool, error) {
	var n int64
	err := x.read(ctx, func() error {
		return x.db.QueryRowContext(ctx, expiredRunsSQL, now.UnixNano(), activeSince.UnixNano()).Scan(&n)
	})
	if err != nil {
		return false, fmt.Errorf("expired runs: %w", err)
	}
	return n > 0, nil
}

// expiredRunsSQL finds a run whose ttl ran out at its first argument and
// that was not written to since its second: through the partial index of
// the runs that have a ttl, then each one's newest part through parts_run.
const expiredRunsSQL = `SELECT count(*) FROM (SELECT 1 FROM runs r WHERE r.ttl IS NOT NULL
	AND ` + runNewestPartSQL + ` < ? - r.ttl
	AND ` + runNewestPartSQL + ` < ?
	LIMIT 1) e`
