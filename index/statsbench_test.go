package index

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/procstat"
)

// BenchmarkStatsManyTools times, on a SQLite index of each size of
// -index.scale filled with 40 runs of 25 tools each (1,000 groups, a blob
// for every two parts), the whole index's stats, and the prune of the
// oldest tenth of the parts, each part of which is its group's oldest as it
// goes (each op prunes the next tenth, so run it at most 9 times), on the
// clock and in the process's CPU time:
//
//	go test ./index -run '^$' -bench StatsManyTools -benchtime 1x -index.scale 1000000
func BenchmarkStatsManyTools(b *testing.B) {
	ctx := context.Background()
	for _, f := range strings.Split(*scaleSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1000 {
			b.Fatalf("-index.scale %q: want sizes of 1,000 parts or more", *scaleSizes)
		}
		x := MustOpen(b, WithDurability(cas.SyncNone))
		t0 := time.Now()
		fillManyTools(b, x, n)
		fill := time.Since(t0)
		x.Checkpoint(ctx)
		b.Run(fmt.Sprintf("%d/stats", n), func(b *testing.B) {
			for b.Loop() {
				s, err := x.Stats(ctx, "")
				if err != nil {
					b.Fatal(err)
				}
				if s.Parts != int64(n) || len(s.ByTool) != 25 || len(s.ByRun) != 40 {
					b.Fatalf("stats of %d parts, %d tools, %d runs", s.Parts, len(s.ByTool), len(s.ByRun))
				}
			}
			b.ReportMetric(fill.Seconds(), "s/fill")
		})
		b.Run(fmt.Sprintf("%d/prune-tenth", n), func(b *testing.B) {
			tenth := 0
			cpu := procstat.CPUTime()
			for b.Loop() {
				if tenth++; tenth > 9 {
					b.Fatal("nine tenths pruned: run it at most 9 times")
				}
				res, err := x.Prune(ctx, PruneOptions{Before: time.Unix(0, int64(tenth*n/10)+1)})
				if err != nil {
					b.Fatal(err)
				}
				if res.RemovedParts != int64(n/10) {
					b.Fatalf("pruned %d parts, want %d", res.RemovedParts, n/10)
				}
			}
			// The process's CPU time is less at the mercy of a busy
			// machine than the time on the clock.
			b.ReportMetric((procstat.CPUTime()-cpu).Seconds()/float64(b.N), "cpu-s/op")
		})
		x.Close()
	}
}

// fillManyTools records n parts by SQL, the counters kept by the triggers
// as for any write: part i (from 1) of run 1 + i % 40 and tool i / 40 % 25,
// at i nanoseconds after the epoch, using blob (i + 1) / 2.
func fillManyTools(tb testing.TB, x *Index, n int) {
	tb.Helper()
	ctx := context.Background()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO runs (id, name, prefix) WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 40)
			SELECT n, 'run-' || n, 'run-' || n || '/' FROM i`, nil},
		{`INSERT INTO blobs (id, digest, ext, size, first_stored, last_referenced)
			WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < (? + 1) / 2)
			SELECT n, randomblob(32), '.txt', 4096 + n % 1000, n, n FROM i`, []any{n}},
		{`INSERT INTO parts (id, run_id, key, step, tool, call_id, part, version, kind, mime, filename, chars, bytes, blob_id, created_at)
			WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?)
			SELECT n, 1 + n % 40, n || '_tool' || (n / 40 % 25) || '_call-' || n || '.txt', n, 'tool' || (n / 40 % 25),
				'call-' || n, -1, 1, 'text', 'text/plain', '', 4096, 4096, (n + 1) / 2, n FROM i`, []any{n}},
	} {
		if _, err := x.db.ExecContext(ctx, q.sql, q.args...); err != nil {
			tb.Fatalf("%.60s…: %v", q.sql, err)
		}
	}
}

// BenchmarkTotalsManyRuns compares, on a SQLite index of 13,600 runs of 8
// parts each (as many runs as the retention benchmark writes), the whole
// index's stats (a row per run, grouped in Go) with what a write's check of
// the retention policy reads instead: the totals (a quota), and the runs'
// counts (max_age, keep_runs):
//
//	go test ./index -run '^$' -bench TotalsManyRuns
func BenchmarkTotalsManyRuns(b *testing.B) {
	ctx := context.Background()
	const runs, perRun = 13_600, 8
	x := MustOpen(b, WithDurability(cas.SyncNone))
	fillManyRuns(b, x, runs, perRun)
	x.Checkpoint(ctx)
	b.Run("stats", func(b *testing.B) {
		for b.Loop() {
			if s, err := x.Stats(ctx, ""); err != nil || s.Runs != runs {
				b.Fatalf("stats of %d runs, %v", s.Runs, err)
			}
		}
	})
	b.Run("totals", func(b *testing.B) {
		for b.Loop() {
			if s, err := x.Totals(ctx); err != nil || s.Parts != runs*perRun {
				b.Fatalf("totals of %d parts, %v", s.Parts, err)
			}
		}
	})
	b.Run("count-runs", func(b *testing.B) {
		for b.Loop() {
			n, err := x.CountRuns(ctx, time.Unix(0, runs*perRun/2), time.Unix(0, runs*perRun/4))
			if err != nil || n.Runs != runs || n.Inactive == 0 || n.Aged == 0 {
				b.Fatalf("CountRuns = %+v, %v", n, err)
			}
		}
	})
	x.Close()
}

// fillManyRuns records runs × perRun parts by SQL, the counters kept by
// the triggers: part i (from 1) of run 1 + (i - 1) / perRun, tool i % 3,
// at i nanoseconds after the epoch, each with a blob of its own.
func fillManyRuns(tb testing.TB, x *Index, runs, perRun int) {
	tb.Helper()
	ctx := context.Background()
	n := runs * perRun
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO runs (id, name, prefix) WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?)
			SELECT n, 'run-' || n, 'run-' || n || '/' FROM i`, []any{runs}},
		{`INSERT INTO blobs (id, digest, ext, size, first_stored, last_referenced)
			WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?)
			SELECT n, randomblob(32), '.txt', 4096 + n % 1000, n, n FROM i`, []any{n}},
		{`INSERT INTO parts (id, run_id, key, step, tool, call_id, part, version, kind, mime, filename, chars, bytes, blob_id, created_at)
			WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?)
			SELECT n, 1 + (n - 1) / ?, n || '_tool' || (n % 3) || '_call-' || n || '.txt', n, 'tool' || (n % 3),
				'call-' || n, -1, 1, 'text', 'text/plain', '', 4096, 4096, n, n FROM i`, []any{n, perRun}},
	} {
		if _, err := x.db.ExecContext(ctx, q.sql, q.args...); err != nil {
			tb.Fatalf("%.60s…: %v", q.sql, err)
		}
	}
}
