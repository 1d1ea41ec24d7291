package index

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
)

// MustOpen opens a new index in a temp directory, closed when the test ends;
// under forEachBackend's postgres subtest, in a fresh PostgreSQL database.
func MustOpen(tb testing.TB, opts ...Option) *Index {
	tb.Helper()
	x, err := Open(context.Background(), newIndexPath(tb), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	if x.IsPostgres() != onPostgres(tb) {
		tb.Fatalf("%s opened %s", tb.Name(), x.Path())
	}
	tb.Cleanup(func() { x.Close() })
	return x
}

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newPart(run string, step int, tool, call string, content string) NewPart {
	return NewPart{
		Key: fmt.Sprintf("%s/%d_%s_%s.txt", run, step, tool, call),
		Run: run, Step: step, Tool: tool, CallID: call, Part: -1,
		Kind: catalog.KindText, MIME: "text/plain", Chars: int64(len(content)), Bytes: int64(len(content)),
		Blob: cas.Blob{Digest: cas.Sum([]byte(content)), Ext: ".txt"},
	}
}

func mustRecord(t *testing.T, x *Index, ps ...NewPart) []Recorded {
	t.Helper()
	r, err := x.Record(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustParse(t *testing.T, s string) Ref {
	t.Helper()
	r, err := ParseRef(s, "/store")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRecordAndResolve(t *testing.T) { forEachBackend(t, testRecordAndResolve) }

func testRecordAndResolve(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	a := newPart("run-a", 1, "search", "c1", "alpha")
	shared := newPart("run-a", 2, "read_file", "c2", "shared")
	b := newPart("run-b", 1, "search", "c1", "beta")
	sharedB := newPart("run-b", 3, "read_file", "c9", "shared")
	rec := mustRecord(t, x, a, shared, b, sharedB)
	if rec[0].Version != 1 || rec[0].ID == 0 {
		t.Errorf("first record = %+v", rec[0])
	}
	for _, tc := range []struct {
		ref, run string
		want     string // key of the part, "" for not found
	}{
		{a.Key, "", a.Key},
		{a.Key, "run-a", a.Key},
		{a.Key, "run-b", ""},
		{b.Blob.Digest.String(), "", b.Key},
		{a.Blob.Digest.String(), "run-b", ""},
		{a.Blob.Digest.Hex()[:8], "", a.Key},
		{a.Blob.Digest.Hex()[:8], "run-b", ""},
		// Prefixes longer than the digests' start that blobs_digest holds.
		{a.Blob.Digest.Hex()[:17], "", a.Key},
		{a.Blob.Digest.Hex()[:40], "", a.Key},
		{a.Blob.Digest.Hex()[:40], "run-b", ""},
		{a.Blob.RelPath(), "", a.Key},
		{"/store/" + a.Blob.RelPath(), "run-a", a.Key},
		{"/store/" + a.Blob.RelPath(), "run-b", ""},
		// A blob both runs share resolves within each run to that run's part.
		{shared.Blob.Digest.String(), "run-a", shared.Key},
		{shared.Blob.Digest.String(), "run-b", sharedB.Key},
		{shared.Blob.Digest.Hex()[:10], "run-a", shared.Key},
		{"/store/" + shared.Blob.RelPath(), "run-a", shared.Key},
		{"/store/" + shared.Blob.RelPath(), "run-b", sharedB.Key},
		{"run-a/9_none_x.txt", "", ""},
	} {
		p, err := x.Resolve(ctx, mustParse(t, tc.ref), tc.run)
		switch {
		case tc.want == "" && !errors.Is(err, ErrNotFound):
			t.Errorf("Resolve(%q, run %q) = %s, %v; want ErrNotFound", tc.ref, tc.run, p.Key, err)
		case tc.want != "" && (err != nil || p.Key != tc.want):
			t.Errorf("Resolve(%q, run %q) = %s, %v; want %s", tc.ref, tc.run, p.Key, err, tc.want)
		}
		if tc.want == "" && tc.run != "" && err != nil && !strings.Contains(err.Error(), tc.run) {
			t.Errorf("Resolve(%q, run %q) error %q does not name the run", tc.ref, tc.run, err)
		}
	}
	p, err := x.Resolve(ctx, mustParse(t, a.Key), "")
	if err != nil {
		t.Fatal(err)
	}
	want := Part{ID: p.ID, Key: a.Key, Run: "run-a", Step: 1, Tool: "search", CallID: "c1", Part: -1, Version: 1,
		Kind: catalog.KindText, MIME: "text/plain", Chars: 5, Bytes: 5, Blob: a.Blob, CreatedAt: p.CreatedAt}
	if p != want {
		t.Errorf("Resolve = %+v, want %+v", p, want)
	}
}

func TestVersions(t *testing.T) { forEachBackend(t, testVersions) }

func testVersions(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1000, 0)}
	x := MustOpen(t, WithClock(c.now))
	v1 := newPart("r", 1, "read_file", "c", "old content")
	mustRecord(t, x, v1)
	c.t = c.t.Add(time.Minute)
	v2 := newPart("r", 1, "read_file", "c", "new content")
	rec := mustRecord(t, x, v2)
	if rec[0].Version != 2 {
		t.Errorf("second write of a key: version %d, want 2", rec[0].Version)
	}
	p, err := x.Resolve(ctx, mustParse(t, v1.Key), "")
	if err != nil || p.Version != 2 || p.Blob != v2.Blob {
		t.Errorf("Resolve(key) = version %d blob %v, %v; want the newest", p.Version, p.Blob, err)
	}
	// The old version stays readable by digest and by path.
	p, err = x.Resolve(ctx, mustParse(t, v1.Blob.Digest.String()), "")
	if err != nil || p.Version != 1 {
		t.Errorf("Resolve(old digest) = version %d, %v; want 1", p.Version, err)
	}
	newest, _ := x.List(ctx, ListOptions{})
	all, _ := x.List(ctx, ListOptions{AllVersions: true})
	if len(newest) != 1 || newest[0].Version != 2 {
		t.Errorf("List = %v, want only version 2", keysVersions(newest))
	}
	if len(all) != 2 || all[0].Version != 2 || all[1].Version != 1 {
		t.Errorf("List(all versions) = %v, want versions 2 then 1", keysVersions(all))
	}
	vs, err := x.Versions(ctx, v1.Key)
	if err != nil || len(vs) != 2 {
		t.Errorf("Versions = %v, %v", keysVersions(vs), err)
	}
}

func keysVersions(ps []Part) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s@%d", p.Key, p.Version))
	}
	return out
}

func TestSameAs(t *testing.T) { forEachBackend(t, testSameAs) }

func testSameAs(t *testing.T) {
	x := MustOpen(t)
	first := newPart("r1", 2, "search", "call-123", "same")
	rec := mustRecord(t, x, first, newPart("r1", 5, "search", "call-9", "same"), newPart("r2", 1, "search", "c", "same"))
	if rec[0].SameAs != "" {
		t.Errorf("first part SameAs = %q, want none", rec[0].SameAs)
	}
	if rec[1].SameAs != first.Key {
		t.Errorf("second part SameAs = %q, want %q", rec[1].SameAs, first.Key)
	}
	if rec[2].SameAs != "" {
		t.Errorf("other run's part SameAs = %q; must never name another run's key", rec[2].SameAs)
	}
	// A new version of the same key is not "same content as" itself.
	rec = mustRecord(t, x, first)
	if rec[0].SameAs != "r1/5_search_call-9.txt" {
		t.Errorf("rewrite SameAs = %q, want the other key", rec[0].SameAs)
	}
}

func TestAmbiguousPrefix(t *testing.T) { forEachBackend(t, testAmbiguousPrefix) }

func testAmbiguousPrefix(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	p1, p2 := newPart("r", 1, "t", "a", "x"), newPart("r", 2, "t", "b", "y")
	// Two digests sharing their first five bytes.
	p2.Blob.Digest = p1.Blob.Digest
	p2.Blob.Digest[31] ^= 1
	mustRecord(t, x, p1, p2)
	_, err := x.Resolve(ctx, mustParse(t, p1.Blob.Digest.Hex()[:10]), "")
	var ae *AmbiguousError
	if !errors.As(err, &ae) || !errors.Is(err, ErrAmbiguous) || len(ae.Candidates) != 2 {
		t.Fatalf("Resolve(shared prefix) = %v, want an AmbiguousError with 2 candidates", err)
	}
	if !strings.Contains(err.Error(), p1.Blob.Digest.String()) || !strings.Contains(err.Error(), p2.Blob.Digest.String()) {
		t.Errorf("error %q does not list the candidates", err)
	}
	p, err := x.Resolve(ctx, mustParse(t, p2.Blob.Digest.Hex()), "")
	if err != nil || p.Key != p2.Key {
		t.Errorf("Resolve(full hex) = %s, %v", p.Key, err)
	}
}

func TestPrefixRange(t *testing.T) {
	for _, tc := range []struct{ prefix, lo, hi string }{
		{"ab", "ab", "ac"},
		{"abc", "abc0", "abd0"},
		{"af", "af", "b0"},
		{"a9", "a9", "aa"},
		{"ff", "ff", ""},
		{"0fff", "0fff", "1000"},
		{"fff", "fff0", ""},
	} {
		lo, hi := prefixRange(tc.prefix)
		if got := fmt.Sprintf("%x", lo); got != tc.lo {
			t.Errorf("prefixRange(%q) lo = %s, want %s", tc.prefix, got, tc.lo)
		}
		if got := fmt.Sprintf("%x", hi); got != tc.hi {
			t.Errorf("prefixRange(%q) hi = %s, want %s", tc.prefix, got, tc.hi)
		}
	}
}

func TestList(t *testing.T) { forEachBackend(t, testList) }

func testList(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1000, 0)}
	x := MustOpen(t, WithClock(c.now))
	var all []NewPart
	for i := range 6 {
		run := []string{"r1", "r2"}[i%2]
		tool := []string{"search", "read_file", "screenshot"}[i%3]
		p := newPart(run, i, tool, fmt.Sprint("c", i), fmt.Sprint("content", i))
		if tool == "screenshot" {
			p.Kind, p.MIME, p.Blob.Ext, p.Key = catalog.KindImage, "image/png", ".png", strings.TrimSuffix(p.Key, ".txt")+".png"
		}
		all = append(all, p)
		mustRecord(t, x, p)
		c.t = c.t.Add(time.Minute)
	}
	for _, tc := range []struct {
		name string
		o    ListOptions
		want []int // indexes into all, newest first
	}{
		{"all", ListOptions{}, []int{5, 4, 3, 2, 1, 0}},
		{"run", ListOptions{Run: "r1"}, []int{4, 2, 0}},
		{"tool", ListOptions{Tool: "search"}, []int{3, 0}},
		{"kind", ListOptions{Kind: catalog.KindImage}, []int{5, 2}},
		{"since", ListOptions{Since: time.Unix(1000, 0).Add(4 * time.Minute)}, []int{5, 4}},
		{"limit", ListOptions{Limit: 2}, []int{5, 4}},
		{"run and tool", ListOptions{Run: "r2", Tool: "read_file"}, []int{1}},
	} {
		got, err := x.List(ctx, tc.o)
		if err != nil {
			t.Fatal(err)
		}
		var keys, want []string
		for _, p := range got {
			keys = append(keys, p.Key)
		}
		for _, i := range tc.want {
			want = append(want, all[i].Key)
		}
		if strings.Join(keys, " ") != strings.Join(want, " ") {
			t.Errorf("%s: List = %v, want %v", tc.name, keys, want)
		}
	}
}

func TestStats(t *testing.T) { forEachBackend(t, testStats) }

func testStats(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	big := strings.Repeat("x", 1000)
	mustRecord(t, x,
		newPart("r1", 1, "read_file", "a", big),
		newPart("r1", 2, "read_file", "b", big),
		newPart("r2", 1, "read_file", "a", big),
		newPart("r2", 2, "search", "s", "small"),
	)
	s, err := x.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Runs != 2 || s.Parts != 4 || s.Blobs != 2 {
		t.Errorf("runs, parts, blobs = %d, %d, %d; want 2, 4, 2", s.Runs, s.Parts, s.Blobs)
	}
	if s.LogicalBytes != 3005 || s.StoredBytes != 1005 || s.SavedBytes != 2000 {
		t.Errorf("logical, stored, saved = %d, %d, %d; want 3005, 1005, 2000", s.LogicalBytes, s.StoredBytes, s.SavedBytes)
	}
	if want := 3005.0 / 1005.0; s.DedupRatio != want {
		t.Errorf("ratio = %v, want %v", s.DedupRatio, want)
	}
	if s.IndexBytes <= 0 {
		t.Errorf("index bytes = %d", s.IndexBytes)
	}
	if len(s.ByTool) != 2 || s.ByTool[0].Name != "read_file" || s.ByTool[0].Parts != 3 || s.ByTool[0].LogicalBytes != 3000 || s.ByTool[0].StoredBytes != 1000 {
		t.Errorf("by tool = %+v", s.ByTool)
	}
	if len(s.ByRun) != 2 || s.ByRun[0].Name != "r1" || s.ByRun[0].LogicalBytes != 2000 || s.ByRun[0].StoredBytes != 1000 {
		t.Errorf("by run = %+v", s.ByRun)
	}
	s, err = x.Stats(ctx, "r2")
	if err != nil {
		t.Fatal(err)
	}
	if s.Runs != 1 || s.Parts != 2 || s.LogicalBytes != 1005 || s.StoredBytes != 1005 || len(s.ByTool) != 2 {
		t.Errorf("stats of r2 = %+v", s)
	}
	empty := MustOpen(t)
	s, err = empty.Stats(ctx, "")
	if err != nil || s.Parts != 0 || s.DedupRatio != 1 {
		t.Errorf("stats of an empty index = %+v, %v", s, err)
	}
}

func TestPrune(t *testing.T) { forEachBackend(t, testPrune) }

func testPrune(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1000, 0)}
	x := MustOpen(t, WithClock(c.now))
	for i, run := range []string{"old", "mid", "new"} {
		mustRecord(t, x, newPart(run, 1, "t", "a", run+"1"), newPart(run, 2, "t", "b", run+"2"))
		c.t = c.t.Add(time.Duration(i+1) * time.Hour)
	}
	res, err := x.Prune(ctx, PruneOptions{KeepRuns: 1, DryRun: true})
	if err != nil || res.RemovedParts != 4 || strings.Join(res.Runs, ",") != "mid,old" {
		t.Errorf("dry keep-runs 1 = %+v, %v", res, err)
	}
	if s, _ := x.Stats(ctx, ""); s.Parts != 6 {
		t.Errorf("dry run removed parts: %d left", s.Parts)
	}
	res, err = x.Prune(ctx, PruneOptions{Before: time.Unix(1000, 0).Add(30 * time.Minute)})
	if err != nil || res.RemovedParts != 2 || strings.Join(res.Runs, ",") != "old" {
		t.Errorf("prune by age = %+v, %v", res, err)
	}
	res, err = x.Prune(ctx, PruneOptions{KeepRuns: 1})
	if err != nil || res.RemovedParts != 2 || strings.Join(res.Runs, ",") != "mid" {
		t.Errorf("keep-runs 1 = %+v, %v", res, err)
	}
	res, err = x.Prune(ctx, PruneOptions{Run: "new"})
	if err != nil || res.RemovedParts != 2 {
		t.Errorf("prune run = %+v, %v", res, err)
	}
	res, err = x.Prune(ctx, PruneOptions{Run: "nothing"})
	if err != nil || res.RemovedParts != 0 {
		t.Errorf("prune of an unknown run = %+v, %v", res, err)
	}
	for _, o := range []PruneOptions{{}, {Run: "a", KeepRuns: 1}, {KeepRuns: -1}} {
		if _, err := x.Prune(ctx, o); err == nil {
			t.Errorf("Prune(%+v) accepted", o)
		}
	}
	// The blobs stay until gc.
	if s, _ := x.Stats(ctx, ""); s.Parts != 0 || s.UnreferencedBlobs != 6 {
		t.Errorf("after pruning everything: %d parts, %d unreferenced blobs; want 0, 6", s.Parts, s.UnreferencedBlobs)
	}
}

func TestBlobSets(t *testing.T) { forEachBackend(t, testBlobSets) }

func testBlobSets(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1000, 0)}
	x := MustOpen(t, WithClock(c.now))
	keep, drop, young := newPart("a", 1, "t", "k", "keep"), newPart("b", 1, "t", "d", "drop"), newPart("c", 1, "t", "y", "young")
	mustRecord(t, x, keep, drop)
	c.t = c.t.Add(2 * time.Hour)
	mustRecord(t, x, young)
	if _, err := x.Prune(ctx, PruneOptions{Run: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Prune(ctx, PruneOptions{Run: "c"}); err != nil {
		t.Fatal(err)
	}
	refs, err := x.ReferencedBlobs(ctx)
	if err != nil || len(refs) != 1 || refs[0].Blob != keep.Blob || refs[0].Parts != 1 {
		t.Errorf("ReferencedBlobs = %+v, %v", refs, err)
	}
	unrefs, err := x.UnreferencedBlobs(ctx)
	if err != nil || len(unrefs) != 2 {
		t.Errorf("UnreferencedBlobs = %+v, %v", unrefs, err)
	}
	unknown := cas.Blob{Digest: cas.Sum([]byte("no row")), Ext: ".txt"}
	cutoff := c.t.Add(-time.Hour)
	gone, err := x.DeleteUnreferenced(ctx, []cas.Blob{keep.Blob, drop.Blob, young.Blob, unknown}, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 2 || gone[0] != drop.Blob || gone[1] != unknown {
		t.Errorf("DeleteUnreferenced = %v; want the old unreferenced blob and the one without a row", gone)
	}
	if _, err := x.Blob(ctx, keep.Blob); err != nil {
		t.Errorf("referenced blob's row deleted: %v", err)
	}
	if _, err := x.Blob(ctx, young.Blob); err != nil {
		t.Errorf("young blob's row deleted: %v", err)
	}
	if _, err := x.Blob(ctx, drop.Blob); !errors.Is(err, ErrNotFound) {
		t.Errorf("Blob(deleted) = %v, want ErrNotFound", err)
	}
	missing, err := x.PartsMissingBlob(ctx, func(b cas.Blob) bool { return b != keep.Blob })
	if err != nil || len(missing) != 1 || missing[0].Key != keep.Key {
		t.Errorf("PartsMissingBlob = %v, %v", keysVersions(missing), err)
	}
	n, err := x.DeleteBlobRows(ctx, []cas.Blob{young.Blob, keep.Blob})
	if err != nil || n != 1 {
		t.Errorf("DeleteBlobRows = %d, %v; want only the unreferenced row deleted", n, err)
	}
	sharing, err := x.Sharing(ctx, keep.Blob)
	if err != nil || len(sharing) != 1 {
		t.Errorf("Sharing = %v, %v", keysVersions(sharing), err)
	}
}

func TestRecordRefusesBadParts(t *testing.T) { forEachBackend(t, testRecordRefusesBadParts) }

func testRecordRefusesBadParts(t *testing.T) {
	x := MustOpen(t)
	good := newPart("r", 1, "t", "c", "x")
	for _, tc := range []struct {
		name string
		edit func(*NewPart)
	}{
		{"empty key", func(p *NewPart) { p.Key = "" }},
		{"key outside its run", func(p *NewPart) { p.Key = "other/1_t_c.txt" }},
		{"newline in key", func(p *NewPart) { p.Key = "r/1_t\n_c.txt" }},
		{"invalid UTF-8 key", func(p *NewPart) { p.Key = "r/\xff.txt" }},
		{"long key", func(p *NewPart) { p.Key = "r/" + strings.Repeat("k", 2000) }},
		{"negative step", func(p *NewPart) { p.Step = -1 }},
		{"bad kind", func(p *NewPart) { p.Kind = "video" }},
		{"bad ext", func(p *NewPart) { p.Blob.Ext = "../x" }},
	} {
		p := good
		tc.edit(&p)
		_, err := x.Record(context.Background(), []NewPart{good, p})
		if !errors.Is(err, ErrInvalidPart) {
			t.Errorf("%s: Record = %v, want ErrInvalidPart", tc.name, err)
		}
	}
	// All or none: the good part of each refused batch was not recorded.
	if s, _ := x.Stats(context.Background(), ""); s.Parts != 0 {
		t.Errorf("%d parts recorded from refused batches", s.Parts)
	}
}

func TestParseRef(t *testing.T) {
	d := cas.Sum([]byte("x"))
	b := cas.Blob{Digest: d, Ext: ".txt"}
	for _, tc := range []struct {
		in   string
		kind RefKind
		err  string // part of the error, "" for success
	}{
		{"run-7/2_search_call-123.txt", RefKey, ""},
		{d.String(), RefDigest, ""},
		{d.Hex(), RefPrefix, ""},
		{d.Hex()[:8], RefPrefix, ""},
		{d.Hex()[:7], 0, "at least 8"},
		{"/store/" + b.RelPath(), RefPath, ""},
		{b.RelPath(), RefPath, ""},
		{"/store/index.db", 0, "not a blob file"},
		{"/store/blobs/../index.db", 0, "not a clean path"},
		{"/etc/passwd", 0, "outside the store"},
		{"/store/../etc/passwd", 0, "outside the store"},
		{"/storex/" + b.RelPath(), 0, "outside the store"},
		{"/store/" + b.RelPath() + "/..", 0, "not a clean path"},
		{"../x/y", 0, "no path elements"},
		{"run/../../etc/passwd", 0, "no path elements"},
		{"blake3:xyz", 0, "invalid digest"},
		{"", 0, "empty"},
		{"hello", 0, "want a key"},
		{"run/a\x00b", 0, "NUL"},
		{"run/a\nb", 0, "line break"},
		{"run/\xff", 0, "UTF-8"},
		{"blobs/0_read_file_c.txt", RefKey, ""},
	} {
		r, err := ParseRef(tc.in, "/store")
		if tc.err == "" {
			if err != nil || r.Kind != tc.kind {
				t.Errorf("ParseRef(%q) = kind %d, %v; want kind %d", tc.in, r.Kind, err, tc.kind)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrInvalidRef) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseRef(%q) = %v, want an ErrInvalidRef saying %q", tc.in, err, tc.err)
		}
	}
}

func FuzzParseRef(f *testing.F) {
	d := cas.Sum([]byte("x"))
	for _, s := range []string{"run/1_t_c.txt", d.String(), d.Hex()[:9], "/store/blobs/" + d.Hex()[:2] + "/" + d.Hex() + ".png",
		"/store/../x", "blobs/00/x", "../../etc/passwd", "\x00", "blake3:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s, "/store")
		if err != nil {
			if !errors.Is(err, ErrInvalidRef) {
				t.Fatalf("ParseRef(%q) error %v does not wrap ErrInvalidRef", s, err)
			}
			if strings.ContainsAny(err.Error(), "\n\x00") {
				t.Fatalf("ParseRef(%q) error is not one clean line: %q", s, err)
			}
			return
		}
		switch r.Kind {
		case RefKey:
			if !strings.Contains(r.Key, "/") || strings.Contains(r.Key, "/../") || strings.HasPrefix(r.Key, "/") {
				t.Fatalf("ParseRef(%q) accepted key %q", s, r.Key)
			}
		case RefPath:
			// A path reference always names exactly one blob file inside the store.
			if _, err := cas.ParseBlobPath(r.Blob.RelPath()); err != nil {
				t.Fatalf("ParseRef(%q) gave blob %v: %v", s, r.Blob, err)
			}
			if filepath.IsAbs(s) && s != "/store/"+r.Blob.RelPath() {
				t.Fatalf("ParseRef(%q) gave blob %v, which is not the same path", s, r.Blob)
			}
		case RefPrefix:
			if len(r.Prefix) < MinPrefixLen || !cas.IsHexPrefix(r.Prefix) {
				t.Fatalf("ParseRef(%q) gave prefix %q", s, r.Prefix)
			}
		case RefDigest:
			if r.Digest.String() != s {
				t.Fatalf("ParseRef(%q) gave digest %v", s, r.Digest)
			}
		default:
			t.Fatalf("ParseRef(%q) gave kind %d", s, r.Kind)
		}
	})
}

// Text that is not UTF-8, or holds a NUL, is handled alike on both
// databases (PostgreSQL would refuse it with an encoding error, SQLite keep
// it): in a key or a run, Record refuses it with ErrInvalidPart and lookups
// find nothing; in a tool, call id, MIME type or file name, which a hostile
// tool chooses, it is stored with U+FFFD for each bad byte or NUL, and
// lookups by tool find it the same way.
func TestBadText(t *testing.T) { forEachBackend(t, testBadText) }

func testBadText(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	mustRecord(t, x, newPart("r", 1, "t", "c", "fine"))
	for n, tc := range []struct{ bad, stored string }{
		{"a\x00b", "a\uFFFDb"},
		{"a\xffb", "a\uFFFDb"},
		{"\xc3", "\uFFFD"},
	} {
		for name, mod := range map[string]func(*NewPart){
			"run": func(p *NewPart) { p.Run, p.Key = tc.bad, tc.bad+"/1_t_c.txt" },
			"key": func(p *NewPart) { p.Key = "r/" + tc.bad + ".txt" },
		} {
			p := newPart("r", 2, "t", "c2", "bad "+name)
			mod(&p)
			if _, err := x.Record(ctx, []NewPart{p}); !errors.Is(err, ErrInvalidPart) {
				t.Errorf("Record with %s %q = %v, want ErrInvalidPart", name, tc.bad, err)
			}
		}
		for name, f := range map[string]func() (int, error){
			"Runs": func() (int, error) { n, err := x.Runs(ctx, tc.bad, 0); return len(n), err },
			"Keys": func() (int, error) { n, err := x.Keys(ctx, "r/"+tc.bad, 0); return len(n), err },
			"HasRun": func() (int, error) {
				ok, err := x.HasRun(ctx, tc.bad)
				return map[bool]int{true: 1}[ok], err
			},
			"List run": func() (int, error) { ps, err := x.List(ctx, ListOptions{Run: tc.bad}); return len(ps), err },
		} {
			if n, err := f(); n != 0 || err != nil {
				t.Errorf("%s(%q) = %d found, %v; want none, nil", name, tc.bad, n, err)
			}
		}
		run := fmt.Sprint("hostile", n)
		p := newPart(run, 1, tc.bad, tc.bad, "hostile "+run)
		p.Key = run + "/1_escaped.txt"
		p.MIME, p.Filename = tc.bad, tc.bad
		orig := p
		if _, err := x.Record(ctx, []NewPart{p}); err != nil {
			t.Fatalf("Record with tool, call id, MIME and file name %q = %v", tc.bad, err)
		}
		if p != orig {
			t.Errorf("Record changed its argument")
		}
		ps, err := x.List(ctx, ListOptions{Run: run, Tool: tc.bad})
		if err != nil || len(ps) != 1 {
			t.Fatalf("List by tool %q = %d parts, %v; want 1", tc.bad, len(ps), err)
		}
		if got := ps[0]; got.Tool != tc.stored || got.CallID != tc.stored || got.MIME != tc.stored || got.Filename != tc.stored {
			t.Errorf("stored tool %q, call id %q, MIME %q, file name %q; want %q", got.Tool, got.CallID, got.MIME, got.Filename, tc.stored)
		}
		if ok, err := x.HasTool(ctx, tc.bad); !ok || err != nil {
			t.Errorf("HasTool(%q) = %v, %v; want true", tc.bad, ok, err)
		}
		if names, err := x.Tools(ctx, tc.bad, 0); err != nil || !slices.Contains(names, tc.stored) {
			t.Errorf("Tools(%q) = %q, %v; want it to hold %q", tc.bad, names, err, tc.stored)
		}
		// The same call again is a new version of the same key.
		if r, err := x.Record(ctx, []NewPart{p}); err != nil || r[0].Key != p.Key || r[0].Version != 2 {
			t.Errorf("the same hostile call again = %+v, %v; want version 2 of %s", r, err, p.Key)
		}
	}
}
