package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/catalog"
)

// List with a limit and no run reads the runs newest first and stops early;
// it must give exactly what the plain query (every part, sorted) gives, in
// the same order, for every combination of the other options: over many
// runs and tools, versions, parts recorded in the same instant, parts
// imported with times older than the runs around them, keys and runs
// removed, and a run whose keys were rendered two ways.
func TestListNewestMatchesPlainQuery(t *testing.T) {
	forEachBackend(t, testListNewestMatchesPlainQuery)
}

func testListNewestMatchesPlainQuery(t *testing.T) {
	ctx := context.Background()
	base := time.Unix(1_000_000, 0)
	c := &clock{base}
	x := MustOpen(t, WithClock(c.now))
	rng := rand.New(rand.NewPCG(3, 11))
	runs := []string{"a", "b", "c", "d", "e", "f", "g", "two"}
	tools := []string{"read_file", "grep", "run_tests", "list_dir"}

	// Parts recorded elsewhere long ago, imported half way: old times in
	// runs of their own and in a run x also writes.
	oc := &clock{base.Add(-time.Hour)}
	y := MustOpen(t, WithClock(oc.now))
	for i := range 40 {
		oc.t = oc.t.Add(time.Duration(rng.IntN(2)) * time.Second)
		run := []string{"old", "a", "older"}[i%3]
		mustRecord(t, y, newPart(run, 100+i%9, tools[i%len(tools)], "c", fmt.Sprint("old ", i)))
	}
	old, err := y.List(ctx, ListOptions{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}

	for i := range 400 {
		// Often no time passes: parts of the same instant, ordered by id.
		c.t = c.t.Add(time.Duration(rng.IntN(3)) * time.Second)
		switch op := rng.IntN(60); {
		case i == 200:
			if _, err := x.Import(ctx, old); err != nil {
				t.Fatal(err)
			}
		case op == 0 && i < 350:
			if _, err := x.Prune(ctx, PruneOptions{Run: runs[rng.IntN(len(runs))]}); err != nil {
				t.Fatal(err)
			}
		case i == 150:
			if _, err := x.Prune(ctx, PruneOptions{Before: c.t.Add(-time.Minute)}); err != nil {
				t.Fatal(err)
			}
		case op < 5:
			ps, err := x.List(ctx, ListOptions{AllVersions: true, Limit: 6})
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) > 0 {
				p := ps[rng.IntN(len(ps))]
				if _, err := x.DeleteKey(ctx, p.Key, p.Version); err != nil {
					t.Fatal(err)
				}
			}
		default:
			var ps []NewPart
			for j := range 1 + rng.IntN(3) {
				run := runs[rng.IntN(len(runs))]
				// Few steps and calls: keys come back as new versions.
				p := newPart(run, rng.IntN(5), tools[rng.IntN(len(tools))], fmt.Sprint("c", j), fmt.Sprint("content ", rng.IntN(30)))
				if rng.IntN(4) == 0 {
					p.Kind, p.MIME, p.Blob.Ext = catalog.KindImage, "image/png", ".png"
					p.Key = strings.TrimSuffix(p.Key, ".txt") + ".png"
				}
				if run == "two" && rng.IntN(2) == 0 {
					p.Key = "two~x/" + strings.TrimPrefix(p.Key, "two/")
				}
				ps = append(ps, p)
			}
			mustRecord(t, x, ps...)
		}
	}
	var ids []int64
	if err := x.db.SelectContext(ctx, &ids, `SELECT id FROM runs WHERE name = 'two'`); err != nil || len(ids) != 2 {
		t.Fatalf("run two has ids %v, %v; want two", ids, err)
	}
	all, err := x.listAll(ctx, ListOptions{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	imported, same := 0, 0
	for i, p := range all {
		if p.CreatedAt.Before(base) {
			imported++
		}
		if i > 0 && p.CreatedAt.Equal(all[i-1].CreatedAt) {
			same++
		}
	}
	if imported == 0 || same < 20 || len(all) < 200 {
		t.Fatalf("the history has %d parts, %d imported, %d as new as the one before: too plain to test", len(all), imported, same)
	}
	mid := all[len(all)/2].CreatedAt
	limits := []int{1, 2, 3, 7, 50, 10000}
	if testing.Short() {
		// Half the listings under -short (the race detector's run, where
		// they took 40 s): a page of one, one of a few, and all.
		limits = []int{1, 7, 10000}
	}
	checked := 0
	for _, tool := range append([]string{"", "none"}, tools...) {
		for _, kind := range []catalog.Kind{"", catalog.KindText, catalog.KindImage} {
			for _, since := range []time.Time{{}, mid, base.Add(-30 * time.Minute), c.t.Add(time.Hour)} {
				for _, allv := range []bool{false, true} {
					for _, limit := range limits {
						o := ListOptions{Tool: tool, Kind: kind, Since: since, AllVersions: allv, Limit: limit}
						got, err := x.List(ctx, o)
						if err != nil {
							t.Fatal(err)
						}
						want, err := x.listAll(ctx, o)
						if err != nil {
							t.Fatal(err)
						}
						if g, w := listed(got), listed(want); g != w {
							t.Fatalf("List(%+v):\n%s\nthe plain query:\n%s", o, g, w)
						}
						if len(want) > 0 {
							checked++
						}
					}
				}
			}
		}
	}
	t.Logf("%d parts, %d imported, %d as new as the one before; %d non-empty listings agree", len(all), imported, same, checked)
}

// listed renders a listing one part a line, for comparison.
func listed(ps []Part) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%d %s@%d %s %s %s %d\n", p.ID, p.Key, p.Version, p.Run, p.Tool, p.Kind, p.CreatedAt.UnixNano())
	}
	return b.String()
}
