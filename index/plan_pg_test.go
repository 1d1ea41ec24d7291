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

// The lookups that run on every read and every gc can use an index on
// PostgreSQL too: with sequential scans priced out (the test's tables are
// small enough that the planner would rightly scan them), no plan reads
// parts whole.
func TestQueryPlansPostgres(t *testing.T) { t.Run("postgres", testQueryPlansPostgres) }

func testQueryPlansPostgres(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	var ps []NewPart
	for i := range 200 {
		ps = append(ps, newPart(fmt.Sprint("r", i%7), i, "t", fmt.Sprint("c", i), fmt.Sprint("content ", i%50)))
	}
	mustRecord(t, x, ps...)
	conn, err := x.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{`ANALYZE`, `SET enable_seqscan = off`} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	d := cas.Sum([]byte("x"))
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
	} {
		rows, err := conn.QueryContext(ctx, "EXPLAIN "+tc.q, tc.args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var lines []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, line)
		}
		rows.Close()
		plan := strings.Join(lines, "\n")
		t.Logf("%s:\n%s", tc.name, plan)
		if strings.Contains(plan, "Seq Scan on parts") {
			t.Errorf("%s scans parts:\n%s", tc.name, plan)
		}
		if !strings.Contains(plan, "Index") {
			t.Errorf("%s uses no index:\n%s", tc.name, plan)
		}
		if byDigest[tc.name] && (!strings.Contains(plan, "using blobs_digest on blobs") || strings.Contains(plan, "Seq Scan on blobs")) {
			t.Errorf("%s does not find blobs through blobs_digest:\n%s", tc.name, plan)
		}
		delete(byDigest, tc.name)
	}
	if len(byDigest) > 0 {
		t.Errorf("lookups by digest not checked: %v", byDigest)
	}
}

// TestStatsPlansPostgres checks on PostgreSQL what TestStatsPlans checks
// on SQLite: the whole index's stats reads no part, and the triggers'
// lookup of a group's new bound walks parts_run in order, sorting nothing.
func TestStatsPlansPostgres(t *testing.T) { t.Run("postgres", testStatsPlansPostgres) }

func testStatsPlansPostgres(t *testing.T) {
	x := MustOpen(t)
	var ps []NewPart
	for i := range 500 {
		ps = append(ps, newPart(fmt.Sprint("r", i%7), i, fmt.Sprint("t", i%25), fmt.Sprint("c", i), fmt.Sprint("content ", i%50)))
	}
	mustRecord(t, x, ps...)
	explainPG := pgExplainer(t, x)
	for _, q := range statsQueries {
		plan := explainPG(q)
		t.Logf("%s:\n%s", q, plan)
		if strings.Contains(plan, " on parts") || strings.Contains(plan, "using parts") {
			t.Errorf("stats reads parts:\n%s\n%s", q, plan)
		}
	}
	migration, err := fs.ReadFile(migrations.Postgres(), "00008_unused_blobs.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT p.created_at FROM parts p WHERE p.run_id = r AND p.tool = t ORDER BY p.created_at LIMIT 1`,
		`SELECT p.created_at FROM parts p WHERE p.run_id = r AND p.tool = t ORDER BY p.created_at DESC LIMIT 1`,
	} {
		if n := strings.Count(string(migration), q); n != 1 {
			t.Errorf("the migration's functions run %q %d times, want 1", q, n)
		}
		q = strings.NewReplacer("= r ", "= ? ", "= t ", "= ? ").Replace(q)
		plan := explainPG(q, 3, "t4")
		t.Logf("%s:\n%s", q, plan)
		if !strings.Contains(plan, "using parts_run on parts") || strings.Contains(plan, "Sort") ||
			strings.Contains(plan, "Seq Scan") {
			t.Errorf("a group's bound is not a walk of parts_run in order:\n%s\n%s", q, plan)
		}
	}
}

// pgExplainer returns a function that gives PostgreSQL's plan of a query
// on x, on a connection of its own, closed when the test ends, where the
// tables are analyzed and sequential scans priced out: what an index can
// serve shows as an index scan however few rows the test has.
func pgExplainer(t *testing.T, x *Index) func(q string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := x.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	for _, q := range []string{`ANALYZE`, `SET enable_seqscan = off`} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return func(q string, args ...any) string {
		t.Helper()
		rows, err := conn.QueryContext(ctx, "EXPLAIN "+q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, line)
		}
		return strings.Join(lines, "\n")
	}
}
