package index

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// TestTotals: Totals adds up what Stats does, without groups or runs, through
// writes, shared blobs, a pack, a prune that leaves a blob unused and one
// that empties a run.
func TestTotals(t *testing.T) { forEachBackend(t, testTotals) }

func testTotals(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	check := func(when string) {
		t.Helper()
		st, err := x.Stats(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := x.Totals(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.ByRun != nil || got.ByTool != nil {
			t.Errorf("%s: Totals has groups: %+v", when, got)
		}
		st.ByRun, st.ByTool, st.Runs = nil, nil, 0
		got.IndexBytes = st.IndexBytes // the file may grow between the two reads
		if !reflect.DeepEqual(got, st) {
			t.Errorf("%s: Totals = %+v,\nwant Stats' %+v", when, got, st)
		}
	}
	check("empty")
	shared := newPart("a", 1, "bash", "c1", "shared content")
	mustRecord(t, x, shared, newPart("a", 2, "grep", "c2", "alpha"), newPart("b", 1, "bash", "c1", "shared content"),
		newPart("b", 2, "bash", "c2", "beta beta"), newPart("c", 1, "read", "c1", "gamma"))
	check("written")
	if err := x.RecordPack(ctx, PackRecord{Name: "pack-1.zst", Size: 7, Raw: 14, Blobs: []cas.Blob{shared.Blob}}); err != nil {
		t.Fatal(err)
	}
	check("packed")
	if _, err := x.Prune(ctx, PruneOptions{Run: "c"}); err != nil {
		t.Fatal(err)
	}
	check("c pruned")
	if _, err := x.Prune(ctx, PruneOptions{Run: "a"}); err != nil {
		t.Fatal(err)
	}
	check("a pruned")
	if st, _ := x.Totals(ctx); st.Parts != 2 || st.UnreferencedBlobs != 2 || st.PackedBlobs != 1 {
		t.Errorf("Totals after the prunes = %+v; want 2 parts, 2 unused blobs, 1 packed", st)
	}
}

// TestCountRuns: CountRuns counts runs by their newest and oldest parts as
// a scan of Stats' runs would, and leaves out runs without parts.
func TestCountRuns(t *testing.T) { forEachBackend(t, testCountRuns) }

func testCountRuns(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(100_000, 0)
	c := &clock{t0}
	x := MustOpen(t, WithClock(c.now))
	// a: parts at 0 h and 10 h; b: at 2 h; c: at 4 h, then pruned; d: at 6 h.
	at := func(h int, parts ...NewPart) {
		c.t = t0.Add(time.Duration(h) * time.Hour)
		mustRecord(t, x, parts...)
	}
	at(0, newPart("a", 1, "bash", "c1", "a1"))
	at(2, newPart("b", 1, "bash", "c1", "b1"), newPart("b", 2, "grep", "c2", "b2"))
	at(4, newPart("c", 1, "bash", "c1", "c1"))
	at(6, newPart("d", 1, "read", "c1", "d1"))
	at(10, newPart("a", 2, "grep", "c2", "a2"))
	if _, err := x.Prune(ctx, PruneOptions{Run: "c"}); err != nil {
		t.Fatal(err)
	}
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	for _, tc := range []struct {
		activeSince, agedBefore time.Time
		want                    RunCounts
	}{
		{h(11), h(0), RunCounts{Runs: 3, Inactive: 3, Aged: 0}},
		{h(11), h(1), RunCounts{Runs: 3, Inactive: 3, Aged: 1}}, // a started at 0 h
		{h(11), h(3), RunCounts{Runs: 3, Inactive: 3, Aged: 2}}, // and b at 2 h
		{h(10), h(3), RunCounts{Runs: 3, Inactive: 2, Aged: 1}}, // a written at 10 h is active
		{h(3), h(12), RunCounts{Runs: 3, Inactive: 1, Aged: 1}}, // only b is older than 3 h
		{h(1), h(12), RunCounts{Runs: 3, Inactive: 0, Aged: 0}}, // every run written since 1 h
		{h(7), h(7), RunCounts{Runs: 3, Inactive: 2, Aged: 2}},  // b and d
		{h(6), h(12), RunCounts{Runs: 3, Inactive: 1, Aged: 1}}, // d at 6 h is active
	} {
		got, err := x.CountRuns(ctx, tc.activeSince, tc.agedBefore)
		if err != nil || got != tc.want {
			t.Errorf("CountRuns(%v, %v) = %+v, %v; want %+v", tc.activeSince.Sub(t0), tc.agedBefore.Sub(t0), got, err, tc.want)
		}
	}
	// A run whose keys were rendered two ways (an older build's escaping)
	// has two runs rows: it counts once, dated by both.
	var id int64
	if err := x.db.QueryRowContext(ctx, `INSERT INTO runs (name, prefix) VALUES ('d', 'old-d/') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := x.db.ExecContext(ctx, `INSERT INTO parts (run_id, key, step, tool, call_id, part, version, kind, mime, filename,
		chars, bytes, blob_id, created_at) VALUES (?, '0_bash_c0.txt', 0, 'bash', 'c0', -1, 1, 'text', 'text/plain', '', 2, 2,
		(SELECT min(id) FROM blobs), ?)`, id, h(1).UnixNano()); err != nil {
		t.Fatal(err)
	}
	if got, err := x.CountRuns(ctx, h(7), h(2)); err != nil || got != (RunCounts{Runs: 3, Inactive: 2, Aged: 1}) {
		t.Errorf("CountRuns with d's second row = %+v, %v; want 3 runs, b and d inactive, d older than 2 h by that row", got, err)
	}
}
