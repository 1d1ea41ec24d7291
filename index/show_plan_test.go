package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"modernc.org/sqlite/vfs"

	"github.com/toolcas/toolcas/cas"
)

// What show reads of a blob that very many parts share: its row, whose
// part_count counts them, and the first page of them, a walk of
// parts_blob that stops at the page's end. Neither may read an entry for
// each part sharing the blob, as counting them in parts_blob did.

// countingSQL is how Blob counted the parts of a blob before its row kept
// the count: the tests show that their measures see such a read.
const countingSQL = `SELECT b.digest, b.ext, b.size, b.first_stored, b.last_referenced, b.verified_at,
	(SELECT count(*) FROM parts p WHERE p.blob_id = b.id) AS parts
	FROM blobs b WHERE ` + blobDigestIs + ` AND b.ext = ?`

// showPage is the page of sharing parts the tests ask for, as show asks
// for its ten and the part itself.
const showPage = 11

// recordSharing records a blob "few" that few parts share and a blob
// "many" that many parts share, step by step in the same runs, with a
// part of its own between each, so that both blobs' first parts lie in
// the same pages of parts; it returns both blobs.
func recordSharing(t *testing.T, x *Index, few, many int) (cas.Blob, cas.Blob) {
	t.Helper()
	var ps []NewPart
	for i := range many {
		run := fmt.Sprint("r", i/1000)
		ps = append(ps, newPart(run, i, "t", fmt.Sprint("m", i), "shared by many"))
		ps = append(ps, newPart(run, i, "u", fmt.Sprint("o", i), fmt.Sprint("its own ", i)))
		if i < few {
			ps = append(ps, newPart(run, i, "f", fmt.Sprint("f", i), "shared by few"))
		}
		if len(ps) >= 3000 {
			mustRecord(t, x, ps...)
			ps = ps[:0]
		}
	}
	mustRecord(t, x, ps...)
	blob := func(content string) cas.Blob { return newPart("", 0, "", "", content).Blob }
	return blob("shared by few"), blob("shared by many")
}

// TestShowPlans checks on SQLite that show's read of a blob's row reads no
// part, and that its page of the parts sharing the blob walks parts_blob
// in order, sorting nothing but the page, and reads the page's parts by
// id.
func TestShowPlans(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	_, many := recordSharing(t, x, 12, 300)
	if _, err := x.db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	args := []any{digestKey(many.Digest), many.Digest[:], many.Ext}
	// readsParts returns the plan's lines that read parts.
	readsParts := func(plan string) []string {
		var out []string
		for _, line := range strings.Split(plan, "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && (f[0] == "SCAN" || f[0] == "SEARCH") && (f[1] == "p" || f[1] == "q" || f[1] == "parts") {
				out = append(out, line)
			}
		}
		return out
	}
	if got := readsParts(explain(t, x, countingSQL, args...)); len(got) == 0 {
		t.Errorf("counting a blob's parts reads no part, the check sees nothing")
	}
	plan := explain(t, x, blobSQL, args...)
	t.Logf("a blob's row:\n%s", plan)
	if got := readsParts(plan); len(got) > 0 {
		t.Errorf("a blob's row reads parts: %q", got)
	}
	if !strings.Contains(plan, "SEARCH b USING INDEX blobs_digest (<expr>=?)") {
		t.Errorf("a blob's row is not looked up by its digest:\n%s", plan)
	}
	plan = explain(t, x, sharingPageSQL, digestKey(many.Digest), many.Digest[:], many.Ext, showPage)
	t.Logf("the page's ids:\n%s", plan)
	if got := readsParts(plan); len(got) != 1 || got[0] != "SEARCH q USING COVERING INDEX parts_blob (blob_id=?)" ||
		strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("the page's ids are not a walk of parts_blob in order:\n%s", plan)
	}
	plan = explain(t, x, sharingFirstSQL, digestKey(many.Digest), many.Digest[:], many.Ext, showPage)
	t.Logf("the page:\n%s", plan)
	for _, line := range readsParts(plan) {
		if line != "SEARCH p USING INTEGER PRIMARY KEY (rowid=?)" && line != "SEARCH q USING COVERING INDEX parts_blob (blob_id=?)" {
			t.Errorf("the page reads parts by %q:\n%s", line, plan)
		}
	}
}

// countingFS is a directory whose files count the bytes read from them.
type countingFS struct {
	dir  string
	read *atomic.Int64
}

func (c countingFS) Open(name string) (fs.File, error) {
	f, err := os.Open(filepath.Join(c.dir, filepath.FromSlash(name)))
	if err != nil {
		return nil, err
	}
	return countingFile{f, c.read}, nil
}

type countingFile struct {
	*os.File
	read *atomic.Int64
}

func (f countingFile) Read(b []byte) (int, error) {
	n, err := f.File.Read(b)
	f.read.Add(int64(n))
	return n, err
}

// TestShowReadsAPageSQLite counts the pages SQLite reads, its cache empty,
// for show's queries of a blob that 20,000 parts share (5,000 with -short:
// 40,000 rows took over a minute and a half under the race detector) and
// of one that 12 parts share: the same, give or take a page or two, where
// counting the parts in parts_blob reads dozens more.
func TestShowReadsAPageSQLite(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	sharing := 20_000
	if testing.Short() {
		sharing = 5_000
	}
	few, many := recordSharing(t, x, 12, sharing)
	if err := x.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	// A copy of the database out of WAL mode, which a read-only file
	// system can open, read through files that count.
	dir := t.TempDir()
	b, err := os.ReadFile(x.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.db"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	var pageSize int64
	if _, err := db.ExecContext(ctx, `PRAGMA journal_mode = DELETE`); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	db.Close()
	var read atomic.Int64
	name, fsys, err := vfs.New(countingFS{dir, &read})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	// pages returns how many pages q reads on a new connection, once it
	// has read the schema.
	pages := func(q string, args ...any) int64 {
		t.Helper()
		db, err := sql.Open("sqlite", "file:index.db?vfs="+name+"&mode=ro&immutable=1")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		before := read.Load()
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for rows.Next() {
			got++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if got == 0 {
			t.Fatalf("%s found no row", q)
		}
		return (read.Load() - before + pageSize - 1) / pageSize
	}
	for _, tc := range []struct {
		name  string
		q     string
		extra []any
		most  int64 // more pages read for many than for few
	}{
		{"a blob's row", blobSQL, nil, 1},
		{"the page's ids", sharingPageSQL, []any{showPage}, 2},
		{"the page", sharingFirstSQL, []any{showPage}, 2},
	} {
		f := pages(tc.q, append([]any{digestKey(few.Digest), few.Digest[:], few.Ext}, tc.extra...)...)
		m := pages(tc.q, append([]any{digestKey(many.Digest), many.Digest[:], many.Ext}, tc.extra...)...)
		t.Logf("%s: %d pages for a blob 12 parts share, %d for one %d share", tc.name, f, m, sharing)
		if m > f+tc.most {
			t.Errorf("%s: %d pages for a blob 12 parts share, %d for one %d share: it reads the parts sharing it",
				tc.name, f, m, sharing)
		}
	}
	f := pages(countingSQL, digestKey(few.Digest), few.Digest[:], few.Ext)
	m := pages(countingSQL, digestKey(many.Digest), many.Digest[:], many.Ext)
	t.Logf("counting: %d pages for a blob 12 parts share, %d for one %d share", f, m, sharing)
	if m < f+20 {
		t.Errorf("counting the parts of a blob %d parts share reads %d pages, %d for 12: the count sees no scan", sharing, m, f)
	}
}

// TestShowReadsAPagePostgres runs show's queries of a blob that 1,000
// parts share under EXPLAIN ANALYZE on PostgreSQL: no step of either
// query reads more rows of parts, or of its indexes, than the page holds.
func TestShowReadsAPagePostgres(t *testing.T) { t.Run("postgres", testShowReadsAPagePostgres) }

func testShowReadsAPagePostgres(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	_, many := recordSharing(t, x, 12, 1_000)
	conn, err := x.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	// partsRead returns the most rows any step of q's plan read from parts
	// or its indexes, in all its loops, and the plan.
	// With walk, it runs q in a transaction as SharingFirst does, after
	// walkIndexSQL.
	partsRead := func(walk bool, q string, args ...any) (float64, string) {
		t.Helper()
		tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if walk {
			if _, err := tx.ExecContext(ctx, walkIndexSQL); err != nil {
				t.Fatal(err)
			}
		}
		var out string
		if err := tx.QueryRowContext(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+q, args...).Scan(&out); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var plans []struct {
			Plan map[string]any `json:"Plan"`
		}
		if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
			t.Fatalf("EXPLAIN of %s: %v: %s", q, err, out)
		}
		var most float64
		var visit func(n map[string]any)
		visit = func(n map[string]any) {
			rel, _ := n["Relation Name"].(string)
			ix, _ := n["Index Name"].(string)
			if rel == "parts" || strings.HasPrefix(ix, "parts") {
				rows, _ := n["Actual Rows"].(float64)
				loops, _ := n["Actual Loops"].(float64)
				removed, _ := n["Rows Removed by Filter"].(float64)
				most = max(most, (rows+removed)*loops)
			}
			subs, _ := n["Plans"].([]any)
			for _, s := range subs {
				if m, ok := s.(map[string]any); ok {
					visit(m)
				}
			}
		}
		visit(plans[0].Plan)
		return most, out
	}
	if got, _ := partsRead(false, countingSQL, digestKey(many.Digest), many.Digest[:], many.Ext); got < 1_000 {
		t.Errorf("counting a blob's parts reads at most %v rows of parts in a step, want 1,000: the check sees nothing", got)
	}
	page := []any{digestKey(many.Digest), many.Digest[:], many.Ext, showPage}
	// What the setting is for: the planner may read them all by bitmap.
	got, _ := partsRead(false, sharingFirstSQL, page...)
	t.Logf("the page, bitmap scans allowed: at most %v rows of parts in a step", got)
	for _, tc := range []struct {
		name string
		walk bool
		q    string
		args []any
		most float64
	}{
		{"a blob's row", false, blobSQL, []any{digestKey(many.Digest), many.Digest[:], many.Ext}, 0},
		{"the page's ids", true, sharingPageSQL, page, showPage},
		{"the page", true, sharingFirstSQL, page, showPage},
	} {
		got, plan := partsRead(tc.walk, tc.q, tc.args...)
		t.Logf("%s: at most %v rows of parts in a step", tc.name, got)
		if got > tc.most {
			t.Errorf("%s reads %v rows of parts in a step, want at most %v:\n%s", tc.name, got, tc.most, plan)
		}
	}
}
