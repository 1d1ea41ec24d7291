package index

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// A run whose keys were rendered two ways (an older build's escaping, a
// shortened name) has two rows in runs: everything that asks by run name
// sees both, everything that asks by key finds each.
func TestRunWithTwoKeyPrefixes(t *testing.T) { forEachBackend(t, testRunWithTwoKeyPrefixes) }

func testRunWithTwoKeyPrefixes(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	a := newPart("r", 1, "t", "a", "first")
	b := newPart("r", 2, "t", "b", "first")
	b.Key = "r~x/2_t_b.txt"
	other := newPart("s", 1, "t", "a", "first")
	rec := mustRecord(t, x, a, b, other)
	if rec[1].SameAs != a.Key || rec[2].SameAs != "" {
		t.Errorf("same content as: %q, %q; want %q and none (another run)", rec[1].SameAs, rec[2].SameAs, a.Key)
	}
	ps, err := x.List(ctx, ListOptions{Run: "r"})
	if err != nil || len(ps) != 2 || ps[0].Key != b.Key || ps[1].Key != a.Key || ps[0].Run != "r" {
		t.Fatalf("List(run r) = %+v, %v; want both keys, newest first", ps, err)
	}
	for _, k := range []string{a.Key, b.Key} {
		p, err := x.Resolve(ctx, Ref{Kind: RefKey, Key: k, text: k}, "r")
		if err != nil || p.Key != k {
			t.Errorf("Resolve(%s) = %+v, %v", k, p, err)
		}
		if _, err := x.Resolve(ctx, Ref{Kind: RefKey, Key: k, text: k}, "s"); err == nil {
			t.Errorf("Resolve(%s) in run s found it", k)
		}
	}
	runs, err := x.Runs(ctx, "", 0)
	if err != nil || !slices.Equal(runs, []string{"r", "s"}) {
		t.Errorf("Runs = %v, %v", runs, err)
	}
	keys, err := x.Keys(ctx, "r", 0)
	if err != nil || !slices.Equal(keys, []string{a.Key, b.Key}) {
		t.Errorf("Keys(r) = %v, %v", keys, err)
	}
	// A second write of b's call is a new version of b's key.
	if rec := mustRecord(t, x, b); rec[0].Key != b.Key || rec[0].Version != 2 {
		t.Errorf("rewrite of %s = %+v", b.Key, rec[0])
	}
	st, err := x.Stats(ctx, "r")
	if err != nil || st.Parts != 3 || st.Runs != 1 {
		t.Errorf("Stats(r) = %d parts, %d runs, %v", st.Parts, st.Runs, err)
	}
	res, err := x.Prune(ctx, PruneOptions{Run: "r"})
	if err != nil || res.RemovedParts != 3 || !slices.Equal(res.Runs, []string{"r"}) {
		t.Errorf("Prune(r) = %+v, %v", res, err)
	}
	if ok, _ := x.HasRun(ctx, "r"); ok {
		t.Error("run r still has parts after its prune")
	}
	if runs, _ := x.Runs(ctx, "", 0); !slices.Equal(runs, []string{"s"}) {
		t.Errorf("Runs after prune = %v", runs)
	}
}

// A new index has small pages, so that a step's write-ahead log is small;
// one made before keeps its pages.
func TestNewIndexPageSize(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	var n int
	if err := x.db.GetContext(ctx, &n, `PRAGMA page_size`); err != nil || n != pageSize {
		t.Errorf("page size %d (%v), want %d", n, err, pageSize)
	}
	var mode string
	if err := x.db.GetContext(ctx, &mode, `PRAGMA journal_mode`); err != nil || mode != "wal" {
		t.Errorf("journal mode %q (%v), want wal", mode, err)
	}
	old := fixtureAt(t, 1)
	y, err := Open(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if err := y.db.GetContext(ctx, &n, `PRAGMA page_size`); err != nil || n != 4096 {
		t.Errorf("an older index's page size is now %d (%v), want its 4096", n, err)
	}
}

// MarkVerified marks more blobs than one transaction takes: every one.
func TestMarkVerifiedInChunks(t *testing.T) { forEachBackend(t, testMarkVerifiedInChunks) }

func testMarkVerifiedInChunks(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	var ps []NewPart
	var blobs []cas.Blob
	for i := range markChunk + 5 {
		p := newPart("r", i, "t", fmt.Sprint("c", i), fmt.Sprint("content ", i))
		ps = append(ps, p)
		blobs = append(blobs, p.Blob)
	}
	mustRecord(t, x, ps...)
	at := time.Unix(0, 12345)
	if err := x.MarkVerified(ctx, blobs, at); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := x.db.GetContext(ctx, &n, `SELECT count(*) FROM blobs WHERE verified_at = ?`, at.UnixNano()); err != nil || n != len(blobs) {
		t.Errorf("%d blobs marked (%v), want %d", n, err, len(blobs))
	}
}

// WithMappedReads sets SQLite's mmap_size on every connection of the pool,
// read-only ones too; rows read through the map are the rows written. A
// limit that is not positive is refused.
func TestMappedReads(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "index.db")
	w, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var ps []NewPart
	for i := range 200 {
		ps = append(ps, newPart("r", i, "bash", "c", fmt.Sprint("text ", i)))
	}
	mustRecord(t, w, ps...)
	mmapSizes := func(x *Index) []int64 {
		t.Helper()
		// Two connections held at once: the pool's second is a new one.
		var sizes []int64
		for range 2 {
			c, err := x.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var n int64
			if err := c.QueryRowContext(ctx, `PRAGMA mmap_size`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, n)
		}
		return sizes
	}
	if got := mmapSizes(w); !slices.Equal(got, []int64{0, 0}) {
		t.Fatalf("mmap_size without the option = %v, want 0: the option would show nothing", got)
	}
	for _, opts := range [][]Option{{WithMappedReads(1 << 20)}, {WithMappedReads(1 << 20), ReadOnly()}} {
		x, err := Open(ctx, path, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := mmapSizes(x); !slices.Equal(got, []int64{1 << 20, 1 << 20}) {
			t.Errorf("mmap_size with WithMappedReads(1 MiB) = %v, want %d on each connection", got, 1<<20)
		}
		for _, p := range []NewPart{ps[0], ps[199]} {
			got, err := x.Resolve(ctx, mustParse(t, p.Key), "")
			if err != nil || got.Blob != p.Blob {
				t.Errorf("Resolve(%s) through the map = %v, %v; want blob %v", p.Key, got.Blob, err, p.Blob)
			}
		}
		x.Close()
	}
	for _, limit := range []int64{0, -1} {
		if x, err := Open(ctx, path, WithMappedReads(limit)); err == nil || !strings.Contains(err.Error(), "mapped reads") {
			if x != nil {
				x.Close()
			}
			t.Errorf("Open with WithMappedReads(%d) = %v, want an error naming mapped reads", limit, err)
		}
	}
}
