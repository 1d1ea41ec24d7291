package index

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/migrations"
)

// The lookups that run on every read and every gc must use an index. Their
// plans, as SQLite reports them (EXPLAIN QUERY PLAN):
//
//	key lookup:     SEARCH p USING INDEX sqlite_autoindex_parts_1 (key=? AND run_id=?)
//	digest lookup:  SEARCH b USING INDEX blobs_digest (<expr>=?)
//	                SEARCH p USING INDEX parts_blob (blob_id=?)
//	gc anti-join:   SCAN b; CORRELATED SCALAR SUBQUERY / SEARCH p USING COVERING INDEX parts_blob (blob_id=?)
//
// The gc anti-join scans blobs, as it must, and searches parts by index.
func TestQueryPlans(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	var ps []NewPart
	for i := range 200 {
		ps = append(ps, newPart(fmt.Sprint("r", i%7), i, "t", fmt.Sprint("c", i), fmt.Sprint("content ", i%50)))
	}
	mustRecord(t, x, ps...)
	if _, err := x.db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	d := cas.Sum([]byte("x"))
	var plans []string
	// Each lookup of blobs by digest finds them through blobs_digest.
	byDigest := map[string]bool{"digest lookup": true, "digest lookup in a run": true, "path lookup in a run": true,
		"a blob's row": true, "a blob's new row": true, "a blob's last reference": true, "a digest prefix's blobs": true,
		"a shard's blobs": true, "a shard's blob ids": true, "a page of the parts sharing a blob": true}
	for _, tc := range []struct {
		name string
		q    string
		args []any
	}{
		{"key lookup", resolveSQL(RefKey, false), []any{"1_t_c1.txt", "r1/"}},
		{"key lookup in a run", resolveSQL(RefKey, true), []any{"1_t_c1.txt", "r1/", "r1"}},
		{"digest lookup", resolveSQL(RefDigest, false), digestArgs(d)},
		{"digest lookup in a run", resolveSQL(RefDigest, true), append(digestArgs(d), "r1")},
		{"path lookup in a run", resolveSQL(RefPath, true), append(digestArgs(d), ".txt", "r1")},
		{"a blob's row", blobSQL, append(digestArgs(d), ".txt")},
		{"a blob's new row", x.blobType(insertBlobSQL), append([]any{d[:], ".txt", 1, 1, 1, 1, "t"}, append(digestArgs(d), ".txt")...)},
		{"a blob's last reference", touchBlobSQL, append([]any{1}, append(digestArgs(d), ".txt")...)},
		{"a digest prefix's blobs", prefixSQL(true, false), []any{d[:4], d[:4], d[:4], d[:4]}},
		{"a shard's blobs", shardSQL(true), []any{d[:1], d[:1]}},
		{"a shard's blob ids", shardIDsSQL(true), []any{d[:1], d[:1]}},
		{"gc anti-join", unreferencedSQL, nil},
		{"same content as", sameAsSQL, []any{1, "r1", 1, "k"}},
		{"key owner", keyOwnerSQL, []any{"k", "r1/"}},
		{"a part of a new key", insertNewKeySQL, []any{1, "k", 1, "t", "c", -1, "text", "text/plain", "", 1, 1, 1, 1, "k", "r1/"}},
		{"run id", runIDSQL, []any{"r1", "r1/"}},
		{"a page of the parts sharing a blob", sharingFirstSQL, append(digestArgs(d), ".txt", 11)},
		{"list a run", `SELECT ` + partColumns + ` FROM parts p JOIN blobs b ON b.id = p.blob_id
			WHERE p.run_id = ? ORDER BY p.created_at DESC, p.id DESC`, []any{1}},
		{"a pack's blobs", `UPDATE blobs SET pack_id = NULL WHERE pack_id = ?`, []any{1}},
		{"runs whose ttl ran out", expiredRunsSQL, []any{1, 1}},
	} {
		plan := explain(t, x, tc.q, tc.args...)
		plans = append(plans, plan)
		t.Logf("%s:\n%s", tc.name, plan)
		for _, line := range strings.Split(plan, "\n") {
			if strings.Contains(line, "SCAN p") || strings.Contains(line, "SCAN parts") {
				t.Errorf("%s scans parts:\n%s", tc.name, plan)
			}
		}
		if !strings.Contains(plan, "USING INDEX") && !strings.Contains(plan, "USING COVERING INDEX") && !strings.Contains(plan, "PRIMARY KEY") {
			t.Errorf("%s uses no index:\n%s", tc.name, plan)
		}
		if byDigest[tc.name] && (!strings.Contains(plan, "USING INDEX blobs_digest (<expr>") || strings.Contains(plan, "SCAN b")) {
			t.Errorf("%s does not find blobs through blobs_digest:\n%s", tc.name, plan)
		}
		delete(byDigest, tc.name)
	}
	if len(byDigest) > 0 {
		t.Errorf("lookups by digest not checked: %v", byDigest)
	}
	// Every index of the tables a write changes costs it a page of the log:
	// none may be there that none of these lookups uses.
	var names []string
	if err := x.db.SelectContext(ctx, &names, `SELECT name FROM sqlite_schema
		WHERE type = 'index' AND tbl_name IN ('parts', 'blobs', 'runs')`); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(plans, "\n") + "\n"
	for _, n := range names {
		if !strings.Contains(all, "INDEX "+n+" ") && !strings.Contains(all, "INDEX "+n+"\n") {
			t.Errorf("index %s: no lookup uses it", n)
		}
	}
}

func explain(t *testing.T, x *Index, q string, args ...any) string {
	t.Helper()
	rows, err := x.db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	return strings.Join(lines, "\n")
}

// statsQueries are the queries the whole index's stats runs, in the order
// countedStats runs them.
var statsQueries = []string{countedStatsSQL, unusedBlobsSQL, packTotalsSQL}

// boundQueries are the lookups the triggers of parts run when a part at
// its group's oldest or newest time goes, as the SQLite migration writes
// them, with the removed part's run and tool as arguments.
var boundQueries = []string{
	`SELECT created_at FROM parts WHERE run_id = OLD.run_id AND tool = OLD.tool ORDER BY created_at LIMIT 1`,
	`SELECT created_at FROM parts WHERE run_id = OLD.run_id AND tool = OLD.tool ORDER BY created_at DESC LIMIT 1`,
}

// TestStatsPlans checks that no query of the whole index's stats reads
// parts (they read the counters), and that the triggers' lookup of a
// group's new bound walks parts_run in order rather than scanning parts or
// sorting them.
func TestStatsPlans(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	var ps []NewPart
	for i := range 500 {
		ps = append(ps, newPart(fmt.Sprint("r", i%7), i, fmt.Sprint("t", i%25), fmt.Sprint("c", i), fmt.Sprint("content ", i%50)))
	}
	mustRecord(t, x, ps...)
	if _, err := x.db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	// readsOnlyCounters names the first table, by its name or its alias,
	// that a plan reads and that is not a counter, the runs or the packs.
	readsOnlyCounters := func(plan string) string {
		for _, line := range strings.Split(plan, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || (f[0] != "SCAN" && f[0] != "SEARCH") {
				continue
			}
			switch f[1] {
			case "counts", "c", "runs", "r", "unused_blobs", "packs":
			default:
				return f[1]
			}
		}
		return ""
	}
	// The check sees a stats query that reads parts for a tool's dates.
	if bad := readsOnlyCounters(explain(t, x, `SELECT c.tool, (SELECT min(created_at) FROM parts p WHERE p.tool = c.tool)
		FROM (SELECT DISTINCT tool FROM counts WHERE parts > 0) c`)); bad != "p" {
		t.Errorf("a scan of parts for each tool reads %q, want p", bad)
	}
	for _, q := range statsQueries {
		plan := explain(t, x, q)
		t.Logf("%s:\n%s", q, plan)
		if bad := readsOnlyCounters(plan); bad != "" {
			t.Errorf("stats reads %s:\n%s\n%s", bad, q, plan)
		}
	}
	migration, err := fs.ReadFile(migrations.FS, "00008_unused_blobs.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range boundQueries {
		if n := strings.Count(string(migration), q); n != 2 {
			t.Errorf("the migration's triggers run %q %d times, want 2 (delete and update)", q, n)
		}
		q = strings.NewReplacer("OLD.run_id", "?", "OLD.tool", "?").Replace(q)
		plan := explain(t, x, q, 3, "t4")
		t.Logf("%s:\n%s", q, plan)
		if !strings.Contains(plan, "USING INDEX parts_run (run_id=?)") || strings.Contains(plan, "SCAN") ||
			strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("a group's bound is not a walk of parts_run in order:\n%s\n%s", q, plan)
		}
	}
	// A prune by age sets the dates it changes first, each a walk of
	// parts_run from the prune's time.
	plan := explain(t, x, pruneBeforeDatesSQL, 100, 100, 100, 100)
	t.Logf("%s:\n%s", pruneBeforeDatesSQL, plan)
	if !strings.Contains(plan, "USING INDEX parts_run (run_id=? AND created_at>?)") || strings.Contains(plan, "SCAN parts") ||
		strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("a prune's dates are not walks of parts_run in order:\n%s", plan)
	}
}
