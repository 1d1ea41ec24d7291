package index

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/catalog"
)

// Paging through a listing with ListPage, and streaming it with ListEach,
// give exactly what List gives (filtered by the key's text), in the same
// order, for every combination of options and page sizes, parts of the
// same instant included.
func TestListPageMatchesList(t *testing.T) {
	forEachBackend(t, testListPageMatchesList)
}

func testListPageMatchesList(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1_000_000, 0)}
	x := MustOpen(t, WithClock(c.now))
	rng := rand.New(rand.NewPCG(5, 17))
	runs := []string{"a", "b", "c"}
	tools := []string{"read_file", "grep", "run_tests"}
	for i := range 150 {
		c.t = c.t.Add(time.Duration(rng.IntN(3)) * time.Second)
		p := newPart(runs[rng.IntN(len(runs))], rng.IntN(20), tools[rng.IntN(len(tools))], fmt.Sprint("c", i%4), fmt.Sprint("content ", i))
		if rng.IntN(4) == 0 {
			p.Kind, p.MIME, p.Blob.Ext = catalog.KindImage, "image/png", ".png"
			p.Key = strings.TrimSuffix(p.Key, ".txt") + ".png"
		}
		mustRecord(t, x, p)
	}
	checked := 0
	for _, run := range []string{"", "a", "none"} {
		for _, tool := range []string{"", "grep"} {
			for _, kind := range []catalog.Kind{"", catalog.KindImage} {
				for _, key := range []string{"", "grep", "_c1", "1_", "b/1", "nothing"} {
					for _, allv := range []bool{false, true} {
						lo := ListOptions{Run: run, Tool: tool, Kind: kind, AllVersions: allv}
						all, err := x.List(ctx, lo)
						if err != nil {
							t.Fatal(err)
						}
						var want []Part
						for _, p := range all {
							if strings.Contains(p.Key, key) {
								want = append(want, p)
							}
						}
						o := PageOptions{ListOptions: lo, KeyContains: key}
						var each []Part
						if err := x.ListEach(ctx, o, func(p Part) error { each = append(each, p); return nil }); err != nil {
							t.Fatal(err)
						}
						if g, w := listed(each), listed(want); g != w {
							t.Fatalf("ListEach(%+v):\n%s\nList:\n%s", o, g, w)
						}
						for _, size := range []int{1, 3, 1000} {
							var paged []Part
							o.After, o.Limit = PageCursor{}, size
							for pages := 0; ; pages++ {
								ps, next, err := x.ListPage(ctx, o)
								if err != nil {
									t.Fatal(err)
								}
								if len(ps) > size || pages > len(want) {
									t.Fatalf("ListPage(%+v): %d parts, page %d", o, len(ps), pages)
								}
								paged = append(paged, ps...)
								if next.IsZero() {
									break
								}
								// The cursor goes through its text, as a client hands it back.
								if o.After, err = ParsePageCursor(next.String()); err != nil {
									t.Fatal(err)
								}
							}
							if g, w := listed(paged), listed(want); g != w {
								t.Fatalf("ListPage(%+v) in pages of %d:\n%s\nList:\n%s", o, size, g, w)
							}
						}
						if len(want) > 0 {
							checked++
						}
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d non-empty listings: too plain to test", checked)
	}

	// ListEach stops at the callback's first error, and returns it.
	stop := errors.New("stop")
	n := 0
	err := x.ListEach(ctx, PageOptions{}, func(Part) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("ListEach with a failing callback: %v after %d parts, want stop after 1", err, n)
	}
}

func TestParsePageCursor(t *testing.T) {
	for _, s := range []string{"x", "1", "1.", ".1", "1.0", "1.-5", "1.2.3", "zzzzzzzzzzzzzzzzz.1"} {
		if c, err := ParsePageCursor(s); !errors.Is(err, ErrBadCursor) {
			t.Errorf("ParsePageCursor(%q) = %v, %v; want ErrBadCursor", s, c, err)
		}
	}
	for _, c := range []PageCursor{{}, {at: 1_700_000_000_123_456_789, id: 42}, {at: -5, id: 1}} {
		got, err := ParsePageCursor(c.String())
		if err != nil || got != c {
			t.Errorf("ParsePageCursor(%q) = %v, %v; want %v", c.String(), got, err, c)
		}
	}
}

// KeyHeads lists the keys' first elements that start with a prefix, of
// runs that have parts, in order, within a limit; with a run, its only.
func TestKeyHeads(t *testing.T) {
	forEachBackend(t, func(t *testing.T) {
		ctx := context.Background()
		x := MustOpen(t)
		for _, run := range []string{"b-2", "a-1", "a-2", "gone", "ünï"} {
			mustRecord(t, x, newPart(run, 1, "t", "c", "content of "+run))
		}
		if _, err := x.Prune(ctx, PruneOptions{Run: "gone"}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			run, prefix string
			limit       int
			want        string
		}{
			{"", "", 0, "a-1 a-2 b-2 ünï"},
			{"", "a", 0, "a-1 a-2"},
			{"", "a", 1, "a-1"},
			{"", "ün", 0, "ünï"},
			{"", "g", 0, ""},
			{"b-2", "", 0, "b-2"},
			{"b-2", "a", 0, ""},
		} {
			got, err := x.KeyHeads(ctx, tc.run, tc.prefix, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("KeyHeads(%q, %q, %d) = %q, want %q", tc.run, tc.prefix, tc.limit, got, tc.want)
			}
		}
	})
}
