package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/migrations"
)

// fixtureAt makes a database at schema version v by applying the
// migrations up to v, and fills it with rows written as a build of that
// version wrote them.
// Under forEachBackend's postgres subtest, the database is a new PostgreSQL
// one, made with the PostgreSQL migrations.
func fixtureAt(t *testing.T, v int64) string {
	t.Helper()
	ctx := context.Background()
	path := newIndexPath(t)
	db := openFixture(t, path)
	defer db.Close()
	dialect, fsys := goose.DialectSQLite3, fs.FS(migrations.FS)
	if IsPostgresURL(path) {
		dialect, fsys = goose.DialectPostgres, migrations.Postgres()
	}
	p, err := goose.NewProvider(dialect, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if v > 0 {
		if _, err := p.UpTo(ctx, v); err != nil {
			t.Fatalf("migrate fixture to %d: %v", v, err)
		}
	}
	if got, _ := p.GetDBVersion(ctx); v > 0 && got != v {
		t.Fatalf("fixture at version %d, want %d", got, v)
	}
	if fill := fixtureRows[v]; fill != nil {
		fill(t, db)
	}
	if IsPostgresURL(path) {
		// The fixtures give their rows ids, which PostgreSQL's identity
		// columns do not count: move each on past its table's rows, as
		// rows a build wrote would have.
		for _, table := range []string{"blobs", "parts", "packs", "runs"} {
			var n int
			mustQuery(t, db, &n, `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?`, table)
			if n == 1 {
				mustExec(t, db, `SELECT setval(pg_get_serial_sequence('`+table+`', 'id'), coalesce(max(id), 0) + 1, false) FROM `+table)
			}
		}
	}
	return path
}

// openFixture opens a fixture's database without the index: a SQLite file,
// or a PostgreSQL database whose statements take ? placeholders as the
// index's do.
func openFixture(t *testing.T, path string) *sql.DB {
	t.Helper()
	if !IsPostgresURL(path) {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	cfg, err := pgx.ParseConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return sql.OpenDB(rebindConnector{stdlib.GetConnector(*cfg)})
}

func mustQuery(t *testing.T, db *sql.DB, dst any, q string, args ...any) {
	t.Helper()
	if err := db.QueryRow(q, args...).Scan(dst); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// Every SQLite migration has its PostgreSQL twin, of the same version and
// name, and no twin is without its SQLite migration.
func TestPostgresMigrationsMatch(t *testing.T) {
	names := func(fsys fs.FS) []string {
		entries, err := fs.ReadDir(fsys, ".")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".sql") {
				out = append(out, e.Name())
			}
		}
		return out
	}
	sqlite, pg := names(migrations.FS), names(migrations.Postgres())
	if strings.Join(sqlite, " ") != strings.Join(pg, " ") {
		t.Errorf("SQLite migrations %v, PostgreSQL migrations %v: want the same files", sqlite, pg)
	}
}

// fixtureRows holds, for each schema version, the rows a build of that
// version wrote: the statements must stay as they were, whatever the schema
// becomes.
var fixtureRows = map[int64]func(*testing.T, *sql.DB){
	1: fixtureV1,
	2: func(t *testing.T, db *sql.DB) {
		fixtureV1(t, db)
		mustExec(t, db, `UPDATE blobs SET verified_at = 5 WHERE id = 1`)
	},
	3: func(t *testing.T, db *sql.DB) {
		fixtureV1(t, db)
		mustExec(t, db, `UPDATE blobs SET verified_at = 5 WHERE id = 1`)
		mustExec(t, db, `INSERT INTO packs (id, name, size, raw, blobs, created_at) VALUES (1, 'pack-x.zst', 40, 100, 1, 7)`)
		mustExec(t, db, `UPDATE blobs SET pack_id = 1 WHERE id = 2`)
	},
	4: fixtureV4,
	// 00005 only dropped two indexes: the rows are version 4's.
	5: fixtureV4,
	// 00006's triggers fill its counters from the rows themselves.
	6: fixtureV4,
	// 00007's table starts empty. A blob no part uses is counted as unused
	// by 00008.
	7: fixtureV7,
	// 00008 changed counters and triggers: the rows are version 7's, whose
	// blobs 00009 counts the parts of, none for the unused one.
	8: fixtureV7,
	// 00009 counted the blobs' parts: its triggers count them as the rows
	// go in. 00010 makes the blobs table again.
	9: fixtureV7,
	// 00011 adds the search index, empty: no blob is covered yet.
	10: fixtureV7,
	// 00012 adds the settings and the removal log, both empty.
	11: fixtureV7,
	// 00013 stores postings by group: version 12's segments go, and their
	// blobs are indexed again.
	12: fixtureV12,
	// 00014 gives runs a ttl, NULL on every run written before it.
	13: fixtureV7,
	// 00015 adds the table of staged steps, empty.
	14: fixtureV7,
}

// fixtureV12 adds to fixtureV7 a search segment of version 12 that covers
// blobs 1 and 2 (a posting a trigram), with blob 4 marked as having
// nothing to index.
func fixtureV12(t *testing.T, db *sql.DB) {
	fixtureV7(t, db)
	mustExec(t, db, `INSERT INTO search_segments (id, blob_ids, blobs, bytes, created_at) VALUES (1, ?, 2, 200, 9)`, []byte{0, 1, 0, 1, 2})
	mustExec(t, db, `INSERT INTO search_postings (trigram, segment, list) VALUES (6713957, 1, ?)`, []byte{0, 1})
	mustExec(t, db, `UPDATE blobs SET search_segment = 1 WHERE id IN (1, 2)`)
	mustExec(t, db, `UPDATE blobs SET search_segment = 0 WHERE id = 4`)
	mustExec(t, db, `UPDATE search_state SET low = 2`)
}

// TestMigrateDropsOldSearchSegments migrates a version 12 index whose
// segments hold postings a trigram a row: they go, their blobs are the
// lag again (read in full by a search until indexed), and a blob with
// nothing to index stays marked.
func TestMigrateDropsOldSearchSegments(t *testing.T) {
	forEachBackend(t, testMigrateDropsOldSearchSegments)
}

func testMigrateDropsOldSearchSegments(t *testing.T) {
	ctx := context.Background()
	path := fixtureAt(t, 12)
	x, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	segs, err := x.SearchSegments(ctx)
	if err != nil || len(segs) != 0 {
		t.Errorf("segments after migrating from 12: %+v, %v; want none", segs, err)
	}
	v, err := x.SearchView(ctx, []uint32{6713957})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.Lag, []int64{1, 2, 3}) || len(v.Postings) != 0 {
		t.Errorf("after migrating from 12: lag %v, postings %v; want blobs 1, 2 and 3, none", v.Lag, v.Postings)
	}
	var marked int64
	if err := x.db.GetContext(ctx, &marked, `SELECT count(*) FROM blobs WHERE search_segment = 0`); err != nil || marked != 1 {
		t.Errorf("%d blobs marked as having nothing to index, want 1 (%v)", marked, err)
	}
}

// moreV9 adds to fixtureV7's rows, at version 9, more to lose: two
// versions of a key, blobs two parts share, a digest stored under two
// extensions, a second run and tool.
func moreV9(t *testing.T, db *sql.DB) {
	d := cas.Sum([]byte("fixture0"))
	mustExec(t, db, `INSERT INTO blobs (id, digest, ext, size, first_stored, last_referenced) VALUES (5, ?, '.json', 100, 3, 4)`, d[:])
	mustExec(t, db, `INSERT INTO runs (id, name, prefix) VALUES (2, 'other-run', 'other-run/')`)
	for _, r := range []struct {
		run, step, version, blob int
		key, tool                string
	}{
		{1, 0, 2, 5, "0_read_file_c0.txt", "read_file"},
		{2, 1, 1, 1, "1_bash_c1.json", "bash"},
		{2, 2, 1, 2, "2_bash_c2.json", "bash"},
	} {
		mustExec(t, db, `INSERT INTO parts (run_id, key, step, tool, call_id, part, version, kind, mime, filename, chars, bytes, blob_id, created_at)
			VALUES (?, ?, ?, ?, 'c', -1, ?, 'text', 'text/plain', '', 100, 100, ?, ?)`,
			r.run, r.key, r.step, r.tool, r.version, r.blob, 2000+r.step)
	}
}

// TestMigrateKeepsEveryRow migrates a version 9 index (fixtureV7 and moreV9) to the latest version
// and finds every row of it as it was, and the lookups by digest of the
// rebuilt blobs table working: a blob stored again is found, not doubled.
func TestMigrateKeepsEveryRow(t *testing.T) { forEachBackend(t, testMigrateKeepsEveryRow) }

func testMigrateKeepsEveryRow(t *testing.T) {
	ctx := context.Background()
	path := fixtureAt(t, 9)
	db := openFixture(t, path)
	moreV9(t, db)
	if IsPostgresURL(path) {
		for _, table := range []string{"blobs", "parts", "runs"} {
			mustExec(t, db, `SELECT setval(pg_get_serial_sequence('`+table+`', 'id'), max(id) + 1, false) FROM `+table)
		}
	}
	tables := []string{"parts", "blobs", "runs", "counts", "packs", "unused_blobs"}
	before := map[string][]string{}
	for _, tb := range tables {
		before[tb] = tableRows(t, db, tb)
	}
	db.Close()
	if n := len(before["parts"]); n != 6 {
		t.Fatalf("fixture has %d parts, want 6", n)
	}
	x, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.schemaVersion() != latestVersion(t) {
		t.Fatalf("at version %d", x.schemaVersion())
	}
	for _, tb := range tables {
		after := tableRows(t, x.db.DB, tb)
		if strings.Join(after, "\n") != strings.Join(before[tb], "\n") {
			t.Errorf("%s after the migration:\n%s\nwant:\n%s", tb, strings.Join(after, "\n"), strings.Join(before[tb], "\n"))
		}
	}
	checkCounts(t, x, "after the migration")
	d := cas.Sum([]byte("fixture0"))
	for ext, want := range map[string]int64{".txt": 2, ".json": 1} {
		b, err := x.Blob(ctx, cas.Blob{Digest: d, Ext: ext})
		if err != nil || b.Parts != want {
			t.Errorf("blob %s: %+v, %v; want %d parts", ext, b, err, want)
		}
	}
	if got, err := x.Resolve(ctx, Ref{Kind: RefKey, Key: "old-run/0_read_file_c0.txt", text: "k"}, ""); err != nil || got.Version != 2 || got.Blob.Ext != ".json" {
		t.Errorf("the key's newest version: %+v, %v", got, err)
	}
	// Stored again, each blob is found: no second row.
	np := newPart("new-run", 1, "t", "c", "fixture0")
	np.Blob.Ext = ".json"
	rec, err := x.Record(ctx, []NewPart{np})
	if err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := x.db.GetContext(ctx, &rows, `SELECT count(*) FROM blobs WHERE digest = ?`, d[:]); err != nil || rows != 2 {
		t.Errorf("%d rows of the digest after storing it again, want 2 (%v)", rows, err)
	}
	if b, err := x.Blob(ctx, np.Blob); err != nil || b.Parts != 2 {
		t.Errorf("blob stored again: %+v, %v; want 2 parts", b, err)
	}
	if rec[0].SameAs != "" {
		t.Errorf("same content as %q in a new run", rec[0].SameAs)
	}
	checkCounts(t, x, "after storing a blob again")
}

// laterColumns are columns that migrations after version 9 add to the
// tables tableRows prints, NULL on every row written before them: what an
// older version's rows are compared without.
var laterColumns = map[string]bool{"search_segment": true, "ttl": true}

// tableQueries counts tableRows's queries.
var tableQueries atomic.Int64

// tableRows returns a table's rows, each its columns' values printed, by id.
func tableRows(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	// A statement text of its own each time: PostgreSQL's connection caches
	// a statement's plan, which a migration that adds a column invalidates.
	tableQueries.Add(1)
	rows, err := db.Query(fmt.Sprintf(`SELECT * FROM %s ORDER BY id /* %d */`, table, tableQueries.Load()))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for i, v := range vals {
			if laterColumns[cols[i]] {
				if v != nil {
					t.Errorf("%s.%s = %v, want NULL on a row written before the column was", table, cols[i], v)
				}
				continue
			}
			if s, ok := v.([]byte); ok {
				v = fmt.Sprintf("%x", s)
			}
			fmt.Fprintf(&b, "%s=%v ", cols[i], v)
		}
		out = append(out, b.String())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func fixtureV7(t *testing.T, db *sql.DB) {
	fixtureV4(t, db)
	d := cas.Sum([]byte("fixture unused"))
	mustExec(t, db, `INSERT INTO blobs (id, digest, ext, size, first_stored, last_referenced) VALUES (4, ?, '.txt', 60, 1, 2)`, d[:])
}

func fixtureV4(t *testing.T, db *sql.DB) {
	for i := range 3 {
		d := cas.Sum([]byte(fmt.Sprint("fixture", i)))
		mustExec(t, db, `INSERT INTO blobs (id, digest, ext, size, first_stored, last_referenced) VALUES (?, ?, '.txt', 100, 1, 2)`, i+1, d[:])
	}
	mustExec(t, db, `UPDATE blobs SET verified_at = 5 WHERE id = 1`)
	mustExec(t, db, `INSERT INTO packs (id, name, size, raw, blobs, created_at) VALUES (1, 'pack-x.zst', 40, 100, 1, 7)`)
	mustExec(t, db, `UPDATE blobs SET pack_id = 1 WHERE id = 2`)
	mustExec(t, db, `INSERT INTO runs (id, name, prefix) VALUES (1, 'old-run', 'old-run/')`)
	for i := range 3 {
		mustExec(t, db, `INSERT INTO parts (run_id, key, step, tool, call_id, part, version, kind, mime, filename, chars, bytes, blob_id, created_at)
			VALUES (1, ?, ?, 'read_file', ?, -1, 1, 'text', 'text/plain', '', 100, 100, ?, ?)`,
			fmt.Sprintf("%d_read_file_c%d.txt", i, i), i, fmt.Sprint("c", i), i+1, 1000+i)
	}
}

func fixtureV1(t *testing.T, db *sql.DB) {
	{
		for i := range 3 {
			d := cas.Sum([]byte(fmt.Sprint("fixture", i)))
			mustExec(t, db, `INSERT INTO blobs (id, digest, ext, size, first_stored, last_referenced) VALUES (?, ?, '.txt', 100, 1, 2)`, i+1, d[:])
			mustExec(t, db, `INSERT INTO parts (key, run, step, tool, call_id, part, version, kind, mime, filename, chars, bytes, blob_id, created_at)
				VALUES (?, 'old-run', ?, 'read_file', ?, -1, 1, 'text', 'text/plain', '', 100, 100, ?, ?)`,
				fmt.Sprintf("old-run/%d_read_file_c%d.txt", i, i), i, fmt.Sprint("c", i), i+1, 1000+i)
		}
	}
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func latestVersion(t *testing.T) int64 {
	var n int64
	for _, v := range versions(t) {
		n = max(n, v)
	}
	return n
}

// versions lists the migrations' version numbers, from their file names.
func versions(t *testing.T) []int64 {
	entries, err := migrations.FS.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range entries {
		if num, _, ok := strings.Cut(e.Name(), "_"); ok && strings.HasSuffix(e.Name(), ".sql") {
			v, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				t.Fatalf("migration %s: %v", e.Name(), err)
			}
			out = append(out, v)
		}
	}
	return out
}

func TestMigrateFresh(t *testing.T) { forEachBackend(t, testMigrateFresh) }

func testMigrateFresh(t *testing.T) {
	x := MustOpen(t)
	if got, want := x.schemaVersion(), latestVersion(t); got != want {
		t.Errorf("fresh index at version %d, want %d", got, want)
	}
	// Reopening does not migrate again.
	x.Close()
	y, err := Open(context.Background(), x.Path())
	if err != nil {
		t.Fatal(err)
	}
	y.Close()
}

func TestMigrateFromEveryEarlierVersion(t *testing.T) {
	forEachBackend(t, testMigrateFromEveryEarlierVersion)
}

func testMigrateFromEveryEarlierVersion(t *testing.T) {
	ctx := context.Background()
	latest := latestVersion(t)
	if latest < 2 {
		t.Fatalf("only %d migrations: this test needs an earlier version to start from", latest)
	}
	for _, v := range append([]int64{0}, versions(t)...) {
		if v == latest {
			continue
		}
		t.Run(fmt.Sprint("from ", v), func(t *testing.T) {
			if v > 0 && fixtureRows[v] == nil {
				t.Fatalf("no fixture rows for schema version %d: add them to fixtureRows", v)
			}
			path := fixtureAt(t, v)
			x, err := Open(ctx, path)
			if err != nil {
				t.Fatalf("open version %d: %v", v, err)
			}
			defer x.Close()
			if x.schemaVersion() != latest {
				t.Errorf("migrated to %d, want %d", x.schemaVersion(), latest)
			}
			ps, err := x.List(ctx, ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantParts := 0
			if v > 0 {
				wantParts = 3
			}
			if len(ps) != wantParts {
				t.Fatalf("%d parts after migration, want %d", len(ps), wantParts)
			}
			for _, p := range ps {
				got, err := x.Resolve(ctx, Ref{Kind: RefKey, Key: p.Key, text: p.Key}, "old-run")
				if err != nil || got.Bytes != 100 || got.Tool != "read_file" || got.Blob.Ext != ".txt" {
					t.Errorf("Resolve(%s) after migration = %+v, %v", p.Key, got, err)
				}
			}
			if v > 0 {
				b, err := x.Blob(ctx, ps[0].Blob)
				if err != nil {
					t.Fatal(err)
				}
				if b.Parts != 1 {
					t.Errorf("blob from version %d counts %d parts, want 1", v, b.Parts)
				}
				if v < 2 && !b.VerifiedAt.IsZero() {
					t.Errorf("blob from version %d has verified_at %v, want never", v, b.VerifiedAt)
				}
			}
			// The migrated index takes new rows.
			if _, err := x.Record(ctx, []NewPart{newPart("new-run", 1, "t", "c", "after migration")}); err != nil {
				t.Errorf("record after migration: %v", err)
			}
			// The counters were filled from the rows, and kept since.
			checkCounts(t, x, fmt.Sprint("after migrating from ", v))
			if s, _ := x.Stats(ctx, ""); v > 0 && s.Parts != 4 {
				t.Errorf("stats after migrating from %d count %d parts, want 4", v, s.Parts)
			}
			if s, _ := x.Stats(ctx, ""); v >= 7 && (s.UnreferencedBlobs != 1 || s.UnreferencedBytes != 60) {
				t.Errorf("stats after migrating from %d: %d unreferenced blobs of %d bytes, want 1 of 60",
					v, s.UnreferencedBlobs, s.UnreferencedBytes)
			}
		})
	}
}

func TestNewerSchemaRefused(t *testing.T) { forEachBackend(t, testNewerSchemaRefused) }

func testNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	path := fixtureAt(t, latestVersion(t))
	db := openFixture(t, path)
	mustExec(t, db, `INSERT INTO goose_db_version (version_id, is_applied, tstamp) VALUES (99, ?, ?)`, true, time.Now())
	db.Close()
	_, err := Open(ctx, path)
	if !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("Open(newer) = %v, want ErrNewerSchema", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "version 99") || !strings.Contains(msg, fmt.Sprintf("up to %d", latestVersion(t))) {
		t.Errorf("message %q does not name both versions", msg)
	}
}

// A migration that waits for a reader's lock on a table it alters (lock
// timeout, 55P03) is tried again until the reader is done, within the busy
// total, not failed at the first lock timeout.
func TestPostgresMigrationWaitsForReader(t *testing.T) {
	t.Run("postgres", testPostgresMigrationWaitsForReader)
}

func testPostgresMigrationWaitsForReader(t *testing.T) {
	ctx := context.Background()
	path := fixtureAt(t, 3)
	reader, err := sql.Open("pgx", path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	tx, err := reader.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM parts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	type result struct {
		x   *Index
		err error
	}
	done := make(chan result, 1)
	go func() {
		x, err := Open(ctx, path, WithBusyTimeout(50*time.Millisecond, time.Minute))
		done <- result{x, err}
	}()
	// Wait, polling with a deadline, until the migration has waited for
	// the reader's lock in two transactions: its first try timed out.
	deadline := time.Now().Add(30 * time.Second)
	tries := map[string]bool{}
	for len(tries) < 2 {
		select {
		case r := <-done:
			if r.x != nil {
				r.x.Close()
			}
			t.Fatalf("Open returned while the reader held its lock: %v", r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the migration waited for the reader's lock in %d transactions, want 2", len(tries))
		}
		var vxid sql.NullString
		if err := reader.QueryRowContext(ctx, `SELECT min(l.virtualtransaction) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE NOT l.granted AND c.relname = 'parts'`).Scan(&vxid); err != nil {
			t.Fatal(err)
		}
		if vxid.Valid {
			tries[vxid.String] = true
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("Open after the reader was done = %v", r.err)
	}
	defer r.x.Close()
	if r.x.schemaVersion() != latestVersion(t) {
		t.Errorf("migrated to %d, want %d", r.x.schemaVersion(), latestVersion(t))
	}
}

// TestMigrateDownKeepsEveryRow takes a latest index with fixtureV7's and
// moreV9's rows back to version 9 and up again: the rows are all there each
// time, and version 9's unique index of (digest, ext) comes back with them.
func TestMigrateDownKeepsEveryRow(t *testing.T) { forEachBackend(t, testMigrateDownKeepsEveryRow) }

func testMigrateDownKeepsEveryRow(t *testing.T) {
	ctx := context.Background()
	path := fixtureAt(t, 9)
	db := openFixture(t, path)
	defer db.Close()
	moreV9(t, db)
	dialect, fsys := goose.DialectSQLite3, fs.FS(migrations.FS)
	if IsPostgresURL(path) {
		dialect, fsys = goose.DialectPostgres, migrations.Postgres()
	}
	p, err := goose.NewProvider(dialect, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	tables := []string{"parts", "blobs", "runs", "counts", "packs", "unused_blobs"}
	snapshot := func() string {
		var b strings.Builder
		for _, tb := range tables {
			fmt.Fprintf(&b, "%s:\n%s\n", tb, strings.Join(tableRows(t, db, tb), "\n"))
		}
		return b.String()
	}
	want := snapshot()
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(); got != want {
		t.Errorf("rows after up:\n%s\nwant:\n%s", got, want)
	}
	if _, err := p.DownTo(ctx, 9); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(); got != want {
		t.Errorf("rows after down:\n%s\nwant:\n%s", got, want)
	}
	// Version 9 refuses a second row of a (digest, ext).
	d := cas.Sum([]byte("fixture0"))
	if _, err := db.Exec(`INSERT INTO blobs (digest, ext, size, first_stored, last_referenced) VALUES (?, '.txt', 1, 1, 1)`, d[:]); err == nil {
		t.Errorf("version 9 took a second row of a blob")
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(); got != want {
		t.Errorf("rows after up again:\n%s\nwant:\n%s", got, want)
	}
}
