package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// Resolve of a digest or path that more than newestWalkAbove parts share
// walks the runs newest first; it finds the part the plain lookup finds,
// whatever the runs' order in time, parts stamped at the same time in
// several runs, the same digest under two extensions, pruned runs, a
// deleted newest part, and an old run given the newest part.
func TestResolveSharedFindsTheNewest(t *testing.T) {
	forEachBackend(t, testResolveSharedFindsTheNewest)
}

func testResolveSharedFindsTheNewest(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	x := MustOpen(t, WithClock(c.now))
	rng := rand.New(rand.NewPCG(7, 13))
	hot := "shared by many parts"
	step := 0
	// record records n parts in random runs of 12, a third of them the hot
	// content under .txt or .json, the clock moving on by 0 to 2 ms a part.
	record := func(n int) {
		var ps []NewPart
		for range n {
			run := fmt.Sprint("r", rng.IntN(12))
			content := fmt.Sprint("own ", step)
			if rng.IntN(3) == 0 {
				content = hot
			}
			p := newPart(run, step, "t", fmt.Sprint("c", step), content)
			if rng.IntN(4) == 0 {
				p.Blob.Ext = ".json"
				p.Key = strings.TrimSuffix(p.Key, ".txt") + ".json"
			}
			ps = append(ps, p)
			step++
			if len(ps) == 20 {
				mustRecord(t, x, ps...)
				ps = ps[:0]
			}
			c.t = c.t.Add(time.Duration(rng.IntN(3)) * time.Millisecond)
		}
		mustRecord(t, x, ps...)
	}
	d := cas.Sum([]byte(hot))
	check := func(when string) {
		t.Helper()
		var n int64
		if err := x.db.GetContext(ctx, &n, sharedCountSQL, digestArgs(d)...); err != nil {
			t.Fatal(err)
		}
		if n <= newestWalkAbove {
			t.Fatalf("%s: %d parts share the digest, want more than %d: the walk is not tested", when, n, newestWalkAbove)
		}
		for _, tc := range []struct {
			ref  Ref
			q    string
			args []any
		}{
			{Ref{Kind: RefDigest, Digest: d, text: "digest"}, resolveSQL(RefDigest, false), digestArgs(d)},
			{Ref{Kind: RefPrefix, Prefix: d.Hex()[:12], text: "prefix"}, resolveSQL(RefDigest, false), digestArgs(d)},
			{Ref{Kind: RefPath, Blob: cas.Blob{Digest: d, Ext: ".txt"}, text: "txt path"}, resolveSQL(RefPath, false), append(digestArgs(d), ".txt")},
			{Ref{Kind: RefPath, Blob: cas.Blob{Digest: d, Ext: ".json"}, text: "json path"}, resolveSQL(RefPath, false), append(digestArgs(d), ".json")},
		} {
			var want []partRow
			if err := x.db.SelectContext(ctx, &want, tc.q, tc.args...); err != nil || len(want) != 1 {
				t.Fatalf("%s: the plain lookup of the %s: %d rows, %v", when, tc.ref.text, len(want), err)
			}
			got, err := x.Resolve(ctx, tc.ref, "")
			if err != nil {
				t.Fatalf("%s: resolve the %s: %v", when, tc.ref.text, err)
			}
			if got.ID != want[0].ID {
				t.Errorf("%s: the %s resolves to part %d (%s, at %v), the plain lookup to %d (%s, at %d)",
					when, tc.ref.text, got.ID, got.Key, got.CreatedAt.UnixNano(), want[0].ID, want[0].Key, want[0].CreatedAt)
			}
		}
	}
	record(600)
	check("recorded")
	// Parts stamped at the same time in several runs: the newest is the
	// one with the highest id.
	record(30)
	c.t = c.t.Add(time.Second)
	var same []NewPart
	for i := range 5 {
		same = append(same, newPart(fmt.Sprint("r", 11-i), step, "t", fmt.Sprint("c", step), hot))
		step++
	}
	mustRecord(t, x, same...)
	check("ties")
	// The newest part deleted: the next newest, maybe in another run.
	if _, err := x.db.ExecContext(ctx, `DELETE FROM parts WHERE id = (SELECT max(id) FROM parts)`); err != nil {
		t.Fatal(err)
	}
	check("newest deleted")
	for _, run := range []string{"r3", "r7"} {
		if _, err := x.Prune(ctx, PruneOptions{Run: run}); err != nil {
			t.Fatal(err)
		}
	}
	check("pruned")
	// An old run gets the newest part.
	c.t = c.t.Add(time.Second)
	mustRecord(t, x, newPart("r0", step, "t", fmt.Sprint("c", step), hot))
	step++
	check("an old run's new part")
	record(200)
	check("recorded again")
	// A run scope still reads that run's parts alone.
	got, err := x.Resolve(ctx, Ref{Kind: RefDigest, Digest: d, text: "digest"}, "r5")
	if err != nil || got.Run != "r5" {
		t.Errorf("resolve in run r5 = %+v, %v", got, err)
	}
}

// TestResolveSharedPlans checks on SQLite that each run's look of the walk
// reads the blob's parts of that run alone, and the runs' dates no part.
func TestResolveSharedPlans(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	recordSharing(t, x, 12, 300)
	if _, err := x.db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	d := cas.Sum([]byte("shared by many"))
	for _, kind := range []RefKind{RefDigest, RefPath} {
		args := digestArgs(d)
		if kind == RefPath {
			args = append(args, ".txt")
		}
		plan := explain(t, x, newestInRunSQL(kind), append(args, 1)...)
		t.Logf("a run's newest part:\n%s", plan)
		if !strings.Contains(plan, "SEARCH p USING INDEX parts_blob (blob_id=? AND run_id=?)") || strings.Contains(plan, "SCAN") {
			t.Errorf("a run's newest part is not read by blob and run:\n%s", plan)
		}
	}
	plan := explain(t, x, runsNewestSQL)
	t.Logf("the runs newest first:\n%s", plan)
	if strings.Contains(plan, " p ") || strings.Contains(plan, "parts") {
		t.Errorf("the runs' dates read parts:\n%s", plan)
	}
}
