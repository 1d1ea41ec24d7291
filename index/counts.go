package index

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// The counters behind Stats live in the counts and unused_blobs tables and
// in each blob row's counted_in, and triggers on parts and blobs keep them
// in the transaction that changes the rows (see the migration that makes
// them). Nothing in Go updates them, so no write path can forget to. Each
// blob row's part_count, which show reads, is kept the same way and checked
// and fixed with them.

// countedStats is Stats of the whole index, read from the counters: a row
// per (run, tool), which holds the group's dates too, a row of the unused
// blobs and the packs. No query reads parts.
func (x *Index) countedStats(ctx context.Context) (Stats, error) {
	var s Stats
	err := x.read(ctx, func() error {
		s = Stats{}
		tools, runs := map[string]*GroupStats{}, map[string]*GroupStats{}
		add := func(m map[string]*GroupStats, name string, parts, logical, stored int64, first, last sql.NullInt64) {
			g := m[name]
			if g == nil {
				g = &GroupStats{Name: name}
				m[name] = g
			}
			g.Parts += parts
			g.LogicalBytes += logical
			g.StoredBytes += stored
			if !first.Valid || !last.Valid {
				return
			}
			f, l := time.Unix(0, first.Int64), time.Unix(0, last.Int64)
			if g.First.IsZero() || f.Before(g.First) {
				g.First = f
			}
			if l.After(g.Last) {
				g.Last = l
			}
		}
		err := queryRows(ctx, x.db, countedStatsSQL, nil, func(rows *sql.Rows) error {
			var run, tool string
			var parts, logical, blobs, stored, packedBlobs, packed int64
			var first, last sql.NullInt64
			if err := rows.Scan(&run, &tool, &parts, &logical, &blobs, &stored, &packedBlobs, &packed, &first, &last); err != nil {
				return err
			}
			s.Parts += parts
			s.LogicalBytes += logical
			s.Blobs += blobs
			s.StoredBytes += stored
			s.PackedBlobs += packedBlobs
			s.PackedBytes += packed
			add(tools, tool, parts, logical, stored, first, last)
			add(runs, run, parts, logical, stored, first, last)
			return nil
		})
		if err != nil {
			return err
		}
		// A group whose parts are all gone may still count blobs that
		// other groups use: they stay in the totals, the group does not.
		for _, m := range []map[string]*GroupStats{tools, runs} {
			for k, g := range m {
				if g.Parts == 0 {
					delete(m, k)
				}
			}
		}
		s.Runs = int64(len(runs))
		s.ByTool, s.ByRun = sortGroups(tools), sortGroups(runs)
		return x.readUnusedAndPacks(ctx, &s)
	})
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	x.finish(&s)
	return s, nil
}

// Totals is Stats of the whole index without its groups: the sums of the
// counters, added up by the database, so that it costs a fraction of Stats
// on an index of many runs. Runs is not counted (it is 0), nor are ByRun
// and ByTool listed: counting the runs costs more than the sums. It is what
// a check that runs often (is the store past its quota?) reads.
func (x *Index) Totals(ctx context.Context) (Stats, error) {
	var s Stats
	err := x.read(ctx, func() error {
		s = Stats{}
		if err := x.db.QueryRowContext(ctx, totalsSQL).Scan(&s.Parts, &s.LogicalBytes, &s.Blobs, &s.StoredBytes,
			&s.PackedBlobs, &s.PackedBytes); err != nil {
			return err
		}
		return x.readUnusedAndPacks(ctx, &s)
	})
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	x.finish(&s)
	return s, nil
}

// readUnusedAndPacks reads into s the counters of the unused blobs (those
// no group is charged with) and the packs' totals.
func (x *Index) readUnusedAndPacks(ctx context.Context, s *Stats) error {
	if err := x.db.QueryRowContext(ctx, unusedBlobsSQL).Scan(&s.UnreferencedBlobs, &s.UnreferencedBytes); err != nil {
		return fmt.Errorf("unused blobs: %w", err)
	}
	return x.db.QueryRowContext(ctx, packTotalsSQL).Scan(&s.Packs, &s.PackRawBytes, &s.PackFileBytes)
}

// The queries of countedStats, each a read of a few rows however many
// parts there are.
const (
	countedStatsSQL = `SELECT coalesce(r.name, ''), c.tool, c.parts, c.logical, c.blobs, c.stored,
		c.packed_blobs, c.packed, c.first_at, c.last_at FROM counts c LEFT JOIN runs r ON r.id = c.run_id`
	unusedBlobsSQL = `SELECT blobs, bytes FROM unused_blobs WHERE id = 1`
	packTotalsSQL  = `SELECT count(*), coalesce(sum(raw), 0), coalesce(sum(size), 0) FROM packs`
	totalsSQL      = `SELECT coalesce(sum(parts), 0), coalesce(sum(logical), 0), coalesce(sum(blobs), 0), coalesce(sum(stored), 0),
		coalesce(sum(packed_blobs), 0), coalesce(sum(packed), 0) FROM counts`
)

func sortGroups(m map[string]*GroupStats) []GroupStats {
	out := make([]GroupStats, 0, len(m))
	for _, g := range m {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].LogicalBytes != out[j].LogicalBytes {
			return out[i].LogicalBytes > out[j].LogicalBytes
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// A driftCheck recounts one kind of counter: q returns a row for each
// counter that differs from its recount, and line says what the row means
// (in a line for each counter of the row that is off, when it has several).
type driftCheck struct {
	q    string
	line func(cols []any) string
}

// driftChecks recount every counter behind Stats, and each blob's parts.
var driftChecks = []driftCheck{
	{ // Parts and logical bytes of each (run, tool), and the dates of
		// its oldest and newest parts: one pass over the parts for both.
		`SELECT coalesce(g.run_id, c.run_id), coalesce(g.tool, c.tool), coalesce(c.parts, 0), coalesce(c.logical, 0),
			coalesce(g.n, 0), coalesce(g.bytes, 0),
			coalesce(c.parts, 0) <> coalesce(g.n, 0) OR coalesce(c.logical, 0) <> coalesce(g.bytes, 0),
			c.id IS NOT NULL AND (c.first_at IS DISTINCT FROM g.f OR c.last_at IS DISTINCT FROM g.l),
			c.first_at, c.last_at, g.f, g.l
		FROM (SELECT run_id, tool, count(*) AS n, sum(bytes) AS bytes, min(created_at) AS f, max(created_at) AS l
			FROM parts GROUP BY run_id, tool) g
		FULL OUTER JOIN counts c ON c.run_id = g.run_id AND c.tool = g.tool
		WHERE coalesce(c.parts, 0) <> coalesce(g.n, 0) OR coalesce(c.logical, 0) <> coalesce(g.bytes, 0)
			OR (c.id IS NOT NULL AND (c.first_at IS DISTINCT FROM g.f OR c.last_at IS DISTINCT FROM g.l))`,
		func(c []any) string {
			var out []string
			if isTrue(c[6]) {
				out = append(out, fmt.Sprintf("run %v tool %q: counted %v parts of %v bytes, recounted %v of %v",
					c[0], c[1], c[2], c[3], c[4], c[5]))
			}
			if isTrue(c[7]) {
				out = append(out, fmt.Sprintf("run %v tool %q: counted first and last part at %v and %v, recounted %v and %v",
					c[0], c[1], c[8], c[9], c[10], c[11]))
			}
			return strings.Join(out, "\n")
		},
	},
	{ // A blob used and not counted.
		`SELECT b.digest, b.ext FROM blobs b
		WHERE b.counted_in IS NULL AND EXISTS (SELECT 1 FROM parts p WHERE p.blob_id = b.id)`,
		func(c []any) string { return fmt.Sprintf("blob %x%v: used by parts, counted nowhere", c[0], c[1]) },
	},
	{ // A blob counted in a group none of whose parts uses it.
		`SELECT b.digest, b.ext, b.counted_in FROM blobs b
		WHERE b.counted_in IS NOT NULL AND NOT EXISTS (SELECT 1 FROM parts p JOIN counts c ON c.run_id = p.run_id
			AND c.tool = p.tool WHERE p.blob_id = b.id AND c.id = b.counted_in)`,
		func(c []any) string {
			return fmt.Sprintf("blob %x%v: counted in counts row %v, whose parts do not use it", c[0], c[1], c[2])
		},
	},
	{ // The blobs each counts row counts.
		`SELECT c.id, c.blobs, c.stored, c.packed_blobs, c.packed,
			coalesce(a.n, 0), coalesce(a.bytes, 0), coalesce(a.pn, 0), coalesce(a.pbytes, 0)
		FROM counts c LEFT JOIN (` + countedBlobsSQL + `) a ON a.counted_in = c.id
		WHERE c.blobs <> coalesce(a.n, 0) OR c.stored <> coalesce(a.bytes, 0) OR c.packed_blobs <> coalesce(a.pn, 0)
			OR c.packed <> coalesce(a.pbytes, 0)`,
		func(c []any) string {
			return fmt.Sprintf("counts row %v: counted %v blobs of %v bytes (%v of %v packed), recounted %v of %v (%v of %v)",
				c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8])
		},
	},
	{ // The parts each blob row counts, for show. Counted blob by blob
		// through parts_blob: grouping every part first held a table of
		// all the counts (22 MiB more at a million parts, and slower).
		`SELECT b.digest, b.ext, b.part_count, (SELECT count(*) FROM parts p WHERE p.blob_id = b.id)
		FROM blobs b WHERE b.part_count <> (SELECT count(*) FROM parts p WHERE p.blob_id = b.id)`,
		func(c []any) string {
			return fmt.Sprintf("blob %x%v: counted %v parts using it, recounted %v", c[0], c[1], c[2], c[3])
		},
	},
	{ // The blobs no group is charged with.
		`SELECT t.blobs, t.bytes, a.n, a.bytes
		FROM (SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM blobs WHERE counted_in IS NULL) a
			LEFT JOIN unused_blobs t ON t.id = 1
		WHERE t.blobs IS NULL OR t.blobs <> a.n OR t.bytes <> a.bytes`,
		func(c []any) string {
			if c[0] == nil {
				return fmt.Sprintf("unused blobs: no counter, recounted %v blobs of %v bytes", c[2], c[3])
			}
			return fmt.Sprintf("unused blobs: counted %v blobs of %v bytes, recounted %v of %v", c[0], c[1], c[2], c[3])
		},
	},
}

// isTrue reports whether a column read into an any is true: a bool on
// PostgreSQL, an integer other than 0 on SQLite.
func isTrue(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case int64:
		return v != 0
	}
	return false
}

// queryer is a database or a transaction.
type queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// drift runs the checks and returns their lines.
func drift(ctx context.Context, db queryer) ([]string, error) {
	var out []string
	for _, d := range driftChecks {
		rows, err := db.QueryContext(ctx, d.q)
		if err != nil {
			return nil, err
		}
		cols, err := rows.Columns()
		if err != nil {
			rows.Close()
			return nil, err
		}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, err
			}
			for _, l := range strings.Split(d.line(vals), "\n") {
				if l != "" {
					out = append(out, l)
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// groupDatesSQL finds each (run, tool)'s oldest and newest parts' dates.
const groupDatesSQL = `SELECT run_id, tool, min(created_at) AS f, max(created_at) AS l FROM parts GROUP BY run_id, tool`

// countedBlobsSQL sums the blobs of each counts row.
const countedBlobsSQL = `SELECT counted_in, count(*) AS n, sum(size) AS bytes,
	sum(CASE WHEN pack_id IS NULL THEN 0 ELSE 1 END) AS pn, sum(CASE WHEN pack_id IS NULL THEN 0 ELSE size END) AS pbytes
	FROM blobs WHERE counted_in IS NOT NULL GROUP BY counted_in`

// CountDrift recounts the rows that Stats' counters summarise and returns
// one line for each counter that differs from its recount: none on a sound
// index. It reads every part and blob row, in one read transaction.
func (x *Index) CountDrift(ctx context.Context) ([]string, error) {
	var lines []string
	// One transaction: every check reads the same snapshot, whatever
	// writers commit meanwhile.
	err := x.readTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		lines, err = drift(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("recount: %w", err)
	}
	return lines, nil
}

// FixCounts sets every counter behind Stats to its recount, in one
// transaction, and returns how many counters were off before.
func (x *Index) FixCounts(ctx context.Context) (int, error) {
	var n int
	err := x.write(ctx, func(tx *sql.Tx) error {
		lines, err := drift(ctx, tx)
		if err != nil {
			return err
		}
		if n = len(lines); n == 0 {
			return nil
		}
		for _, q := range []string{
			`INSERT INTO counts (run_id, tool) SELECT DISTINCT run_id, tool FROM parts WHERE true
				ON CONFLICT (run_id, tool) DO NOTHING`,
			`UPDATE blobs SET counted_in = NULL WHERE counted_in IS NOT NULL
				AND NOT EXISTS (SELECT 1 FROM parts p JOIN counts c ON c.run_id = p.run_id AND c.tool = p.tool
					WHERE p.blob_id = blobs.id AND c.id = blobs.counted_in)`,
			`UPDATE blobs SET counted_in = (SELECT c.id FROM parts p JOIN counts c ON c.run_id = p.run_id AND c.tool = p.tool
				WHERE p.blob_id = blobs.id ORDER BY p.id LIMIT 1) WHERE counted_in IS NULL`,
			// The updates above moved counters by trigger; set them all
			// from the rows now.
			`UPDATE counts SET parts = 0, logical = 0, blobs = 0, stored = 0, packed_blobs = 0, packed = 0,
				first_at = NULL, last_at = NULL`,
			`UPDATE counts SET parts = g.n, logical = g.bytes
				FROM (SELECT run_id, tool, count(*) AS n, sum(bytes) AS bytes FROM parts GROUP BY run_id, tool) AS g
				WHERE g.run_id = counts.run_id AND g.tool = counts.tool`,
			`UPDATE counts SET first_at = g.f, last_at = g.l FROM (` + groupDatesSQL + `) AS g
				WHERE g.run_id = counts.run_id AND g.tool = counts.tool`,
			`UPDATE counts SET blobs = a.n, stored = a.bytes, packed_blobs = a.pn, packed = a.pbytes
				FROM (` + countedBlobsSQL + `) AS a WHERE a.counted_in = counts.id`,
			`INSERT INTO unused_blobs (id, blobs, bytes) SELECT 1, count(*), coalesce(sum(size), 0) FROM blobs
				WHERE counted_in IS NULL ON CONFLICT (id) DO UPDATE SET blobs = excluded.blobs, bytes = excluded.bytes`,
			`UPDATE blobs SET part_count = 0 WHERE part_count <> 0`,
			`UPDATE blobs SET part_count = g.n FROM (SELECT blob_id, count(*) AS n FROM parts GROUP BY blob_id) AS g
				WHERE g.blob_id = blobs.id`,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("fix counts: %w", err)
	}
	return n, nil
}
