package index

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestPruneLog: a prune of several runs at once, one that spares the runs
// written to since a time, and the removal log each leaves.
func TestPruneLog(t *testing.T) { forEachBackend(t, testPruneLog) }

func testPruneLog(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1000, 0)}
	x := MustOpen(t, WithClock(c.now))
	for _, run := range []string{"a", "b", "c", "d"} {
		mustRecord(t, x, newPart(run, 1, "t", "x", run+"1"), newPart(run, 2, "t", "y", run+"2"))
		c.t = c.t.Add(time.Hour)
	}
	// d was written last, at 1000 s + 3 h: a window from then spares it.
	res, err := x.Prune(ctx, PruneOptions{Runs: []string{"a", "d", "none"}, ActiveSince: time.Unix(1000, 0).Add(3 * time.Hour), Rule: "max_bytes"})
	if err != nil || res.RemovedParts != 2 || strings.Join(res.Runs, ",") != "a" {
		t.Errorf("prune of runs a, d = %+v, %v; want a's 2 parts", res, err)
	}
	res, err = x.Prune(ctx, PruneOptions{Before: time.Unix(1000, 0).Add(5 * time.Hour), ActiveSince: time.Unix(1000, 0).Add(2 * time.Hour)})
	if err != nil || res.RemovedParts != 2 || strings.Join(res.Runs, ",") != "b" {
		t.Errorf("prune by age sparing c and d = %+v, %v; want b's 2 parts", res, err)
	}
	// The dates kept for the runs spared are untouched: c still counts
	// as written at 1000 s + 2 h.
	runs, err := x.RunsByActivity(ctx)
	if err != nil || len(runs) != 2 || runs[0].Run != "c" || !runs[0].Last.Equal(time.Unix(1000, 0).Add(2*time.Hour)) || runs[0].Parts != 2 {
		t.Errorf("RunsByActivity = %+v, %v", runs, err)
	}
	log, err := x.Removals(ctx, time.Time{}, 0)
	if err != nil || len(log) != 2 {
		t.Fatalf("Removals = %+v, %v; want 2 entries", log, err)
	}
	if m := log[0]; m.Run != "b" || m.Rule != RuleByName || m.Parts != 2 || !m.FirstCreated.Equal(time.Unix(1000, 0).Add(time.Hour)) {
		t.Errorf("newest entry %+v: want b's 2 parts by prune", m)
	}
	if m := log[1]; m.Run != "a" || m.Rule != "max_bytes" || m.Parts != 2 {
		t.Errorf("oldest entry %+v: want a's 2 parts by max_bytes", m)
	}
	if got, _ := x.Removals(ctx, time.Time{}, 1); len(got) != 1 || got[0].Run != "b" {
		t.Errorf("Removals limited to 1 = %+v", got)
	}
	if n, parts, last, err := x.RemovalTotals(ctx); err != nil || n != 2 || parts != 4 || !last.Equal(c.t) {
		t.Errorf("RemovalTotals = %d, %d, %v, %v", n, parts, last, err)
	}
	// A dry run and a batched prune log nothing, and all once done.
	if _, err := x.Prune(ctx, PruneOptions{Run: "c", DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Prune(ctx, PruneOptions{Run: "c", Batch: 1}); err != nil {
		t.Fatal(err)
	}
	if n, parts, _, _ := x.RemovalTotals(ctx); n != 3 || parts != 6 {
		t.Errorf("after a dry run and a batched prune: %d entries, %d parts; want 3, 6", n, parts)
	}
}

// TestNamedLease: one holder at a time; the holder renews; a lease whose
// time has passed is free; a release for nothing is not counted.
func TestNamedLease(t *testing.T) { forEachBackend(t, testNamedLease) }

func testNamedLease(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1000, 0)}
	x := MustOpen(t, WithClock(c.now))
	try := func(holder string, want bool) {
		t.Helper()
		if ok, err := x.TryLease(ctx, "m", holder, time.Minute); err != nil || ok != want {
			t.Errorf("TryLease(%s) = %v, %v; want %v", holder, ok, err, want)
		}
	}
	try("a", true)
	try("b", false)
	try("a", true) // renewed, not taken again
	c.t = c.t.Add(2 * time.Minute)
	try("b", true) // a's time passed
	if err := x.ReleaseLease(ctx, "m", "a", false); err != nil {
		t.Fatal(err)
	}
	try("c", false) // a no longer held it: b still does
	if err := x.ReleaseLease(ctx, "m", "b", false); err != nil {
		t.Fatal(err)
	}
	try("c", true)
	if err := x.ReleaseLease(ctx, "m", "c", true); err != nil {
		t.Fatal(err)
	}
	if n, err := x.LeaseTaken(ctx, "m"); err != nil || n != 2 {
		t.Errorf("LeaseTaken = %d, %v; want 2 (a, b; c's for nothing)", n, err)
	}
	if n, err := x.LeaseTaken(ctx, "other"); err != nil || n != 0 {
		t.Errorf("LeaseTaken of a lease never taken = %d, %v", n, err)
	}
}

// TestRemovalLogBounded: the removal log keeps its newest RemovalLogMax
// entries.
func TestRemovalLogBounded(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	if _, err := x.db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO removals (at, run, rule, parts) SELECT i, 'old', 'prune', 1 FROM n`, RemovalLogMax+5); err != nil {
		t.Fatal(err)
	}
	mustRecord(t, x, newPart("r", 1, "t", "x", "one"))
	if _, err := x.Prune(ctx, PruneOptions{Run: "r"}); err != nil {
		t.Fatal(err)
	}
	n, parts, _, err := x.RemovalTotals(ctx)
	if err != nil || n != RemovalLogMax || parts != RemovalLogMax {
		t.Errorf("log after a prune: %d entries, %d parts, %v; want %d", n, parts, err, RemovalLogMax)
	}
	if log, _ := x.Removals(ctx, time.Time{}, 1); len(log) != 1 || log[0].Run != "r" {
		t.Errorf("newest entry %+v, want run r's", log)
	}
}

// TestRunTTL: a run's own ttl, kept from its latest write that gives one,
// removes the whole run once its newest part is older than the ttl, and
// only then; a run without one never goes by it.
func TestRunTTL(t *testing.T) { forEachBackend(t, testRunTTL) }

func testRunTTL(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(100_000, 0)
	c := &clock{t0}
	x := MustOpen(t, WithClock(c.now))
	ttl := func(p NewPart, d time.Duration) NewPart { p.RunTTL = d; return p }
	mustRecord(t, x, newPart("b", 0, "bash", "c0", "b0"))
	if has, err := x.HasRunTTLs(ctx); err != nil || has {
		t.Errorf("HasRunTTLs before any ttl = %v, %v; want false", has, err)
	}
	mustRecord(t, x, ttl(newPart("a", 1, "bash", "c1", "a1"), time.Hour), newPart("b", 1, "bash", "c1", "b1"),
		ttl(newPart("c", 1, "bash", "c1", "c1"), 3*time.Hour))
	c.t = t0.Add(30 * time.Minute)
	mustRecord(t, x, newPart("a", 2, "bash", "c2", "a2")) // no ttl given: a keeps its hour
	c.t = t0.Add(40 * time.Minute)
	mustRecord(t, x, ttl(newPart("c", 2, "bash", "c2", "c2"), 10*time.Minute)) // c's ttl is now 10 min
	if has, err := x.HasRunTTLs(ctx); err != nil || !has {
		t.Errorf("HasRunTTLs = %v, %v; want true", has, err)
	}
	if _, err := x.Record(ctx, []NewPart{ttl(newPart("d", 1, "bash", "c1", "d1"), -time.Second)}); !errors.Is(err, ErrInvalidPart) {
		t.Errorf("Record with a negative run ttl: %v, want ErrInvalidPart", err)
	}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for _, tc := range []struct {
		now, activeSince time.Time
		want             bool
	}{
		{at(45), at(41), false}, // c's newest part (40 min) is 5 min old
		{at(55), at(41), true},  // c's is 15 min old, over its 10
		{at(55), at(40), false}, // but c was written within the window
		{at(89), at(60), true},  // a's newest (30 min) is 59 min old: c only
		{at(120), at(60), true}, // a's and c's
	} {
		if got, err := x.HasExpiredRuns(ctx, tc.now, tc.activeSince); err != nil || got != tc.want {
			t.Errorf("HasExpiredRuns(%v, %v) = %v, %v; want %v", tc.now.Sub(t0), tc.activeSince.Sub(t0), got, err, tc.want)
		}
	}
	// At 80 min, with a window of 39 min: only c has run out.
	res, err := x.Prune(ctx, PruneOptions{Expired: at(80), ActiveSince: at(41), Rule: "ttl"})
	if err != nil || res.RemovedParts != 2 || strings.Join(res.Runs, ",") != "c" {
		t.Errorf("prune of expired runs at 80 min = %+v, %v; want c's 2 parts", res, err)
	}
	res, err = x.Prune(ctx, PruneOptions{Expired: at(200), Rule: "ttl"})
	if err != nil || res.RemovedParts != 2 || strings.Join(res.Runs, ",") != "a" {
		t.Errorf("prune of expired runs at 200 min = %+v, %v; want a's 2 parts", res, err)
	}
	if got, err := x.HasExpiredRuns(ctx, at(10_000), at(10_000)); err != nil || got {
		t.Errorf("HasExpiredRuns once a and c are gone = %v, %v; want false: b has no ttl", got, err)
	}
	log, err := x.Removals(ctx, time.Time{}, 0)
	if err != nil || len(log) != 2 || log[0].Rule != "ttl" || log[0].Run != "a" || log[1].Run != "c" {
		t.Errorf("removal log %+v, %v; want a then c by ttl", log, err)
	}
}
