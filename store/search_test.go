package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/search"
)

// grepCorpus is what a test wrote: the text of each key's versions.
type grepCorpus struct {
	versions map[string][]string // key → text of each version, oldest first
	runs     map[string]string   // key → run
	checks   int                 // checkGrep's calls on it
}

var grepWords = []string{"error", "Error", "ERROR", "warning", "def", "class", "import", "return", "None", "self",
	"Traceback", "File", "line", "ValueError:", "KeyError", "==", "+=", "{", "}", "(", ")", "astropy", "numpy",
	"é", "Straße", "\u212a", "x", "42", "0x1f", "path/to/file.py", "\t", "  "}

func grepText(r *rand.Rand, lines int) string {
	var b strings.Builder
	for range lines {
		for range 1 + r.IntN(12) {
			b.WriteString(grepWords[r.IntN(len(grepWords))])
			b.WriteByte(' ')
		}
		if r.IntN(40) == 0 {
			fmt.Fprintf(&b, "rare-%d-needle", r.IntN(5))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// writeGrepCorpus writes n parts over three runs, with shared content,
// several versions of some keys, and a binary part.
func writeGrepCorpus(t *testing.T, s *Store, c *grepCorpus, r *rand.Rand, n, stepBase int) {
	t.Helper()
	if c.versions == nil {
		c.versions, c.runs = map[string][]string{}, map[string]string{}
	}
	var shared string
	for i := range n {
		run := fmt.Sprintf("run-%d", i%3)
		step := stepBase + i/3
		text := grepText(r, 1+r.IntN(60))
		switch {
		case i%17 == 0 && shared != "":
			text = shared // the same bytes under another key (and run)
		case i%11 == 0:
			step = stepBase // a new version of the same key
		case i%29 == 0:
			text = "binary\x00" + text
		}
		shared = text
		it := hook.Item{Key: hook.Key{Run: run, Step: step, Tool: []string{"bash", "search"}[i%2], CallID: "c", Part: -1, Ext: ".txt"},
			Part: hook.Text(text)}
		st := mustWrite(t, s, it)
		c.versions[st[0].Key] = append(c.versions[st[0].Key], text)
		c.runs[st[0].Key] = run
	}
}

// oracle greps the corpus by brute force, as grep -n would each key's
// newest version (or every version), with lines whole.
func (c *grepCorpus) oracle(t *testing.T, p search.Pattern, run string, all bool) []string {
	expr := p.Expr
	if p.Fixed {
		expr = regexp.QuoteMeta(expr)
	}
	if p.IgnoreCase {
		expr = "(?i)" + expr
	}
	re := regexp.MustCompile(expr)
	var out []string
	for key, vs := range c.versions {
		if run != "" && c.runs[key] != run {
			continue
		}
		if !all {
			vs = vs[len(vs)-1:]
		}
		for v, text := range vs {
			if strings.Contains(text, "\x00") {
				continue
			}
			for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
				if re.MatchString(line) {
					out = append(out, fmt.Sprintf("%s@%d:%d:%s", key, len(c.versions[key])-len(vs)+v+1, i+1, line))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func grepLines(t *testing.T, s *Store, o GrepOptions) ([]string, GrepResult) {
	t.Helper()
	var out []string
	res, err := s.Grep(context.Background(), o, func(h GrepHit) error {
		out = append(out, fmt.Sprintf("%s@%d:%d:%s", h.Part.Key, h.Part.Version, h.Line, h.Text))
		return nil
	})
	if err != nil {
		t.Fatalf("Grep(%+v): %v", o.Pattern, err)
	}
	if len(res.Failed) > 0 {
		t.Fatalf("Grep(%+v) failed on %v", o.Pattern, res.Failed)
	}
	slices.Sort(out)
	return out, res
}

var grepPatterns = []search.Pattern{
	{Expr: "needle"}, {Expr: "rare-3-needle", Fixed: true}, {Expr: "valueerror", IgnoreCase: true},
	{Expr: "Traceback.*line"}, {Expr: `rare-[0-2]-need`}, {Expr: "KELVIN|\u212a"}, {Expr: "k", IgnoreCase: true},
	{Expr: "straße", IgnoreCase: true}, {Expr: "^def"}, {Expr: `\(\)$`}, {Expr: "path/to/file.py", Fixed: true},
	{Expr: "(?i)numpy astropy"}, {Expr: "e"}, {Expr: "nothing-like-this"}, {Expr: "[0-9]+x"},
	// The index keeps case: these ask for one spelling, or for any.
	{Expr: "ERROR"}, {Expr: "Error", Fixed: true}, {Expr: "eRRoR", Fixed: true, IgnoreCase: true},
	{Expr: "(?i)valueERROR:"}, {Expr: "[Nn]one self"},
}

// checkGrep compares Grep with the oracle for every pattern, over the whole
// store and one run, newest versions and all. With -short (the race
// detector's run, where a grep costs ten times as much), each call checks a
// third of the patterns, the next third at the next call.
func checkGrep(t *testing.T, s *Store, c *grepCorpus, phase string) {
	t.Helper()
	c.checks++
	for i, p := range grepPatterns {
		if testing.Short() && i%3 != c.checks%3 {
			continue
		}
		for _, run := range []string{"", "run-1"} {
			for _, all := range []bool{false, true} {
				got, _ := grepLines(t, s, GrepOptions{Pattern: p, Run: run, AllVersions: all})
				want := c.oracle(t, p, run, all)
				if !slices.Equal(got, want) {
					t.Fatalf("%s: Grep(%+v, run %q, all %v): %d lines, want %d\n%s", phase, p, run,
						all, len(got), len(want), lineDiff(got, want))
				}
			}
		}
	}
}

func TestGrepMatchesBruteForce(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	r := rand.New(rand.NewPCG(7, 8))
	var c grepCorpus
	writeGrepCorpus(t, s, &c, r, 150, 1)
	checkGrep(t, s, &c, "unindexed")

	ir, err := s.IndexSearch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ir.Blobs == 0 || ir.LagBlobs != 0 || ir.Failed != 0 {
		t.Fatalf("IndexSearch = %+v, want blobs indexed, no lag", ir)
	}
	checkGrep(t, s, &c, "indexed")
	func() {
		// A run too large to read whole asks the index too.
		defer func(n int64) { runScanBytes = n }(runScanBytes)
		runScanBytes = 0
		checkGrep(t, s, &c, "indexed, runs through the index")
	}()
	_, res := grepLines(t, s, GrepOptions{Pattern: search.Pattern{Expr: "rare-3-needle"}})
	if !res.Indexed || res.Lag != 0 || res.Blobs >= ir.Blobs/2 {
		t.Errorf("a selective search read %d of %d blobs (indexed %v, lag %d): the index did not narrow it",
			res.Blobs, ir.Blobs, res.Indexed, res.Lag)
	}

	writeGrepCorpus(t, s, &c, r, 60, 1000) // a lag beside the segments
	checkGrep(t, s, &c, "partly indexed")

	if _, err := s.Pack(ctx, PackOptions{}); err != nil {
		t.Fatal(err)
	}
	checkGrep(t, s, &c, "packed")
	// Pack indexed again, frame by frame, what it packed.
	segs, err := s.ix.SearchSegments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sg := range segs {
		if sg.Packed != int64(sg.N) || sg.NBlocks >= sg.N {
			t.Errorf("after pack, segment %d: %d blobs, %d of them packed, in %d blocks; want every blob packed, blocks of frames",
				sg.ID, sg.N, sg.Packed, sg.NBlocks)
		}
	}
	if _, err := s.IndexSearch(ctx); err != nil {
		t.Fatal(err)
	}
	checkGrep(t, s, &c, "packed and indexed")

	// Pruned and collected parts never come back, whatever the postings say.
	if _, err := s.Prune(ctx, PruneOptions{Run: "run-2"}); err != nil {
		t.Fatal(err)
	}
	for k, run := range c.runs {
		if run == "run-2" {
			delete(c.versions, k)
		}
	}
	checkGrep(t, s, &c, "pruned")
	if _, err := s.GC(ctx, GCOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	checkGrep(t, s, &c, "collected")
	writeGrepCorpus(t, s, &c, r, 30, 2000) // new blobs may take the ids of collected ones
	checkGrep(t, s, &c, "written after gc")
	if _, err := s.IndexSearch(ctx); err != nil {
		t.Fatal(err)
	}
	checkGrep(t, s, &c, "indexed after gc")
}

// A store opened with its index read through a memory map, as casctl grep
// opens it, finds what the brute force finds, rows written by another
// opener since too; a limit that is not positive is refused.
func TestGrepThroughAMappedIndex(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := MustOpenDir(t, dir, WithCreate())
	r := rand.New(rand.NewPCG(11, 12))
	var c grepCorpus
	writeGrepCorpus(t, s, &c, r, 120, 1)
	if _, err := s.Pack(ctx, PackOptions{}); err != nil {
		t.Fatal(err)
	}
	m := MustOpenDir(t, dir, WithMappedIndex(1<<20))
	checkGrep(t, m, &c, "mapped")
	writeGrepCorpus(t, s, &c, r, 40, 1000)
	checkGrep(t, m, &c, "mapped, written since")
	for _, limit := range []int64{0, -5} {
		if x, err := Open(ctx, dir, WithMappedIndex(limit)); err == nil || !strings.Contains(err.Error(), "mapped index") {
			if x != nil {
				x.Close()
			}
			t.Errorf("Open with WithMappedIndex(%d) = %v, want an error naming the mapped index", limit, err)
		}
	}
}

// A blob that cannot be read, loose or in a damaged pack frame, is reported
// with its parts in Failed, and the search goes on without it.
func TestGrepReportsDamagedBlobs(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	st := mustWrite(t, s, item("r", 1, "first needle\n"+strings.Repeat("a line\n", 100)),
		item("r", 2, "second needle\n"+strings.Repeat("b line\n", 100)),
		item("r", 3, "third needle\n"+strings.Repeat("c line\n", 100)))
	damage(t, st[0].Path, func(b []byte) []byte { b[len(b)-2] ^= 1; return b }) // the hit stays
	grepFailures := func(phase string) ([]string, GrepResult) {
		t.Helper()
		var got []string
		res, err := s.Grep(ctx, GrepOptions{Pattern: search.Pattern{Expr: "needle"}}, func(h GrepHit) error {
			got = append(got, h.Text)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		return got, res
	}
	got, res := grepFailures("loose")
	if !slices.Equal(got, []string{"second needle", "third needle"}) || len(res.Failed) != 1 ||
		res.Failed[0].Part.Key != st[0].Key || !errors.Is(res.Failed[0].Err, cas.ErrCorrupt) {
		t.Fatalf("a damaged loose blob: hits %q, failed %+v; want the two others, and the damaged one failed as corrupt", got, res.Failed)
	}

	// Packed, then a byte of the pack's compressed frame flipped: no blob
	// of the frame can be read.
	damage(t, st[0].Path, func(b []byte) []byte { b[len(b)-2] ^= 1; return b })
	if _, err := s.Pack(ctx, PackOptions{}); err != nil {
		t.Fatal(err)
	}
	packs, err := filepath.Glob(filepath.Join(s.Dir(), cas.PacksDir, "pack-*"))
	if err != nil || len(packs) != 1 {
		t.Fatalf("packs %v, %v; want one", packs, err)
	}
	damage(t, packs[0], func(b []byte) []byte { b[len(b)/3] ^= 0x55; return b })
	s.Close() // and its cache of decoded frames
	s = MustOpenDir(t, s.Dir())
	got, res = grepFailures("packed")
	if len(got) != 0 || len(res.Failed) != 3 {
		t.Fatalf("a damaged pack frame: hits %q, failed %+v; want none, the three parts failed", got, res.Failed)
	}
}

// lineDiff shows the first lines only one of got and want has.
func lineDiff(got, want []string) string {
	var b strings.Builder
	for _, l := range got {
		if _, ok := slices.BinarySearch(want, l); !ok && b.Len() < 2000 {
			fmt.Fprintf(&b, "+ %.200q\n", l)
		}
	}
	for _, l := range want {
		if _, ok := slices.BinarySearch(got, l); !ok && b.Len() < 4000 {
			fmt.Fprintf(&b, "- %.200q\n", l)
		}
	}
	return b.String()
}

// Pack and gc keep the index: pack covers what it packed, gc drops a
// segment most of whose blobs it removed, and the next pack indexes the
// rest again.
func TestPackAndGCKeepTheSearchIndex(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	r := rand.New(rand.NewPCG(3, 4))
	var c grepCorpus
	writeGrepCorpus(t, s, &c, r, 90, 1)
	pr, err := s.Pack(ctx, PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Search.Blobs == 0 || pr.Search.LagBlobs != 0 {
		t.Fatalf("after pack, the search index: %+v; want every blob covered", pr.Search)
	}
	segs, err := s.ix.SearchSegments(ctx)
	if err != nil || len(segs) != 1 {
		t.Fatalf("%d segments, %v; want 1", len(segs), err)
	}
	if _, err := s.Prune(ctx, PruneOptions{Run: "run-0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(ctx, PruneOptions{Run: "run-1"}); err != nil {
		t.Fatal(err)
	}
	gr, err := s.GC(ctx, GCOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if gr.Search.Dropped != 1 || gr.Search.LagBlobs == 0 {
		t.Fatalf("after gc removed two runs of three, the search index: %+v; want its segment dropped, its live blobs in the lag", gr.Search)
	}
	for k, run := range c.runs {
		if run != "run-2" {
			delete(c.versions, k)
		}
	}
	checkGrep(t, s, &c, "after gc")
	pr, err = s.Pack(ctx, PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Search.Blobs != gr.Search.LagBlobs || pr.Search.LagBlobs != 0 {
		t.Fatalf("pack after gc, the search index: %+v; want the %d blobs of the lag indexed again", pr.Search, gr.Search.LagBlobs)
	}
	checkGrep(t, s, &c, "after gc and pack")
}

// Searches beside writers, pack, gc and index catch-ups: none fails, and
// each finds every part committed before it began.
func TestGrepBesideWritersPackAndGC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s := MustOpen(t)
	var mu sync.Mutex
	var committed []string // tokens of parts that stay
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	loop := func(name string, f func(i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				if err := f(i); err != nil && ctx.Err() == nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
			}
		}()
	}
	loop("writer", func(i int) error {
		tok := fmt.Sprintf("tok%06dz", i)
		_, err := s.Write(ctx, []hook.Item{item("keep", i, strings.Repeat("filler line\n", i%50)+"found "+tok+"\n")})
		if err == nil {
			mu.Lock()
			committed = append(committed, tok)
			mu.Unlock()
		}
		return err
	})
	loop("churn", func(i int) error {
		if _, err := s.Write(ctx, []hook.Item{item("tmp", i, fmt.Sprintf("gone tok%06dz\n", 900000+i))}); err != nil {
			return err
		}
		if i%10 == 9 {
			_, err := s.Prune(ctx, PruneOptions{Run: "tmp"})
			return err
		}
		return nil
	})
	loop("maintenance", func(i int) error {
		var err error
		switch i % 3 {
		case 0:
			_, err = s.Pack(ctx, PackOptions{})
		case 1:
			_, err = s.GC(ctx, GCOptions{Force: true})
		default:
			_, err = s.IndexSearch(ctx)
		}
		if errors.Is(err, ErrLocked) {
			return nil
		}
		return err
	})
	searches := 0
	for ctx.Err() == nil {
		mu.Lock()
		want := slices.Clone(committed)
		mu.Unlock()
		found := map[string]bool{}
		res, err := s.Grep(ctx, GrepOptions{Pattern: search.Pattern{Expr: `tok[0-9]+z`}}, func(h GrepHit) error {
			found[strings.TrimPrefix(h.Text, "found ")] = true
			if h.Part.Run == "tmp" && !strings.HasPrefix(h.Text, "gone ") {
				return fmt.Errorf("hit %q in %s", h.Text, h.Part.Key)
			}
			return nil
		})
		if ctx.Err() != nil {
			break
		}
		if err != nil || len(res.Failed) > 0 {
			t.Fatalf("search %d: %v, failed %v", searches, err, res.Failed)
		}
		for _, tok := range want {
			if !found[tok] {
				t.Fatalf("search %d: %s, committed before it began, not found (%+v)", searches, tok, res)
			}
		}
		searches++
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mu.Lock()
	t.Logf("%d searches beside %d writes", searches, len(committed))
	mu.Unlock()
	if searches < 3 {
		t.Errorf("only %d searches ran", searches)
	}
}

// A search whose context ends, at any moment, returns promptly.
// A callback's error stops Grep, which returns it, whichever hit it comes
// at: the first page of a search costs what finding it does.
func TestGrepStopsAtTheCallbacksError(t *testing.T) {
	s := MustOpen(t)
	r := rand.New(rand.NewPCG(9, 10))
	var c grepCorpus
	writeGrepCorpus(t, s, &c, r, 200, 1)
	if _, err := s.Pack(context.Background(), PackOptions{}); err != nil {
		t.Fatal(err)
	}
	writeGrepCorpus(t, s, &c, r, 50, 1000) // loose ones too
	errPage := errors.New("a page is enough")
	for _, after := range []int{1, 2, 20, 300} {
		done := make(chan error, 1)
		hits := 0
		go func() {
			_, err := s.Grep(context.Background(), GrepOptions{Pattern: search.Pattern{Expr: "e"}}, func(GrepHit) error {
				if hits++; hits == after {
					return errPage
				}
				return nil
			})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, errPage) || hits != after {
				t.Errorf("stopped after hit %d: %v after %d hits; want the callback's error at once", after, err, hits)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("Grep still running 20 s after its callback failed at hit %d", after)
		}
	}
}

func TestGrepStopsWhenCanceled(t *testing.T) {
	s := MustOpen(t)
	r := rand.New(rand.NewPCG(5, 6))
	var c grepCorpus
	writeGrepCorpus(t, s, &c, r, 200, 1)
	for _, after := range []time.Duration{0, 100 * time.Microsecond, time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond} {
		for range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), after)
			done := make(chan error, 1)
			go func() {
				_, err := s.Grep(ctx, GrepOptions{Pattern: search.Pattern{Expr: "e"}}, func(GrepHit) error { return nil })
				done <- err
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("Grep still running 20 s after its context ended at %v", after)
			}
			cancel()
		}
	}
}

// Pack drops the segments of the blobs it packed and indexes them again,
// frame by frame, in far fewer pages: the pages the dropped segments held
// go back to the file system instead of staying in the index database.
func TestPackGivesBackTheIndexPages(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	r := rand.New(rand.NewPCG(5, 6))
	var c grepCorpus
	writeGrepCorpus(t, s, &c, r, 300, 1)
	if res, err := s.IndexSearch(ctx); err != nil || res.Blobs == 0 {
		t.Fatalf("IndexSearch = %+v, %v; want the loose blobs indexed", res, err)
	}
	pr, err := s.Pack(ctx, PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Search.Dropped == 0 || pr.IndexFreed == 0 {
		t.Fatalf("pack: search %+v, index gave back %d bytes; want the loose blobs' segments dropped and their pages given back", pr.Search, pr.IndexFreed)
	}
	db, err := sql.Open("sqlite", "file:"+s.IndexLocation()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var free int64
	if err := db.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil || free != 0 {
		t.Errorf("after pack, %d free pages in the index (%v); want none", free, err)
	}
	checkGrep(t, s, &c, "after pack gave back the index's pages")
}
