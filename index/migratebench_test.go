package index

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/toolcas/toolcas/migrations"
)

// BenchmarkMigrateLatest times Open migrating a SQLite index of each size
// of -index.scale, filled at the version before the latest with a part per
// row of SQL (a blob for every two parts, 40 runs of 25 tools, and a
// thousandth of the blobs unused), to the latest:
//
//	go test ./index -run '^$' -bench MigrateLatest -benchtime 1x -index.scale 1000000
func BenchmarkMigrateLatest(b *testing.B) {
	ctx := context.Background()
	for _, f := range strings.Split(*scaleSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 10 {
			b.Fatalf("-index.scale %q: want sizes of 10 parts or more", *scaleSizes)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				path := filepath.Join(b.TempDir(), "index.db")
				t0 := time.Now()
				latest := fillBeforeLatest(b, path, n)
				fill := time.Since(t0)
				b.StartTimer()
				t0 = time.Now()
				x, err := Open(ctx, path)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(time.Since(t0).Seconds(), "s/migration")
				b.ReportMetric(fill.Seconds(), "s/fill")
				b.StopTimer()
				if x.schemaVersion() != latest {
					b.Fatalf("at version %d, want %d", x.schemaVersion(), latest)
				}
				t0 = time.Now()
				if _, err := x.Stats(ctx, ""); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, "ms/stats")
				if drift, err := x.CountDrift(ctx); err != nil || len(drift) > 0 {
					b.Fatalf("counters after the migration: %v %v", drift, err)
				}
				x.Close()
				b.StartTimer()
			}
		})
	}
}

// fillBeforeLatest makes a SQLite index at the schema version before the
// latest with n parts, and returns the latest version.
func fillBeforeLatest(tb testing.TB, path string, n int) int64 {
	tb.Helper()
	ctx := context.Background()
	if err := create(ctx, path); err != nil {
		tb.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.FS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		tb.Fatal(err)
	}
	srcs := p.ListSources()
	latest := srcs[len(srcs)-1].Version
	if _, err := p.UpTo(ctx, latest-1); err != nil {
		tb.Fatal(err)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO runs (id, name, prefix) WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 40)
			SELECT n, 'run-' || n, 'run-' || n || '/' FROM i`, nil},
		{`INSERT INTO blobs (id, digest, ext, size, first_stored, last_referenced)
			WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ? / 2 + ? / 2000)
			SELECT n, randomblob(32), '.txt', 4096 + n % 1000, n, n FROM i`, []any{n, n}},
		{`INSERT INTO parts (id, run_id, key, step, tool, call_id, part, version, kind, mime, filename, chars, bytes, blob_id, created_at)
			WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?)
			SELECT n, 1 + n % 40, n || '_tool' || (n % 25) || '_call-' || n || '.txt', n, 'tool' || (n % 25), 'call-' || n, -1, 1,
				'text', 'text/plain', '', 4096, 4096, 1 + (n - 1) / 2, n FROM i`, []any{n}},
	} {
		if _, err := db.ExecContext(ctx, q.sql, q.args...); err != nil {
			tb.Fatalf("%.60s…: %v", q.sql, err)
		}
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		tb.Fatal(err)
	}
	return latest
}
