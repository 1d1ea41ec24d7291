package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/search"
)

// grepCorpus is what a test wrote: the text of each key's versions.
type grepCorpus struct {
	versions map[string][]string // key → text of each version, oldest first
	runs     map[string]string   // key → run
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
}

// checkGrep compares Grep with the oracle for every pattern, over the whole
// store and one run, newest versions and all.
func checkGrep(t *testing.T, s *Store, c *grepCorpus, phase string) {
	t.Helper()
	for _, p := range grepPatterns {
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

// Pack and gc keep the index: pack covers what it packed, and gc drops a
// segment most of whose blobs it removed, indexing the rest again.
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
	if gr.Search.Dropped != 1 || gr.Search.Blobs == 0 || gr.Search.LagBlobs != 0 {
		t.Fatalf("after gc removed two runs of three, the search index: %+v; want its segment dropped and the rest indexed again", gr.Search)
	}
	for k, run := range c.runs {
		if run != "run-2" {
			delete(c.versions, k)
		}
	}
	checkGrep(t, s, &c, "after gc")
}
