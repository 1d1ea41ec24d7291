package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/search"
)

// realDocs returns the first n results of the real trace over 2,000
// characters.
func realDocs(t *testing.T, n int) []searchDoc {
	t.Helper()
	rt, err := loadRealTrace(filepath.Join("traces", "mini-swe-agent-deepseek.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	docs := traceDocs(rt, 2000)
	if len(docs) < n {
		t.Fatalf("the trace has %d results over 2,000 characters, want at least %d", len(docs), n)
	}
	return docs[:n]
}

// TestSearchSameHits is the search section's hit comparison at a small
// scale: Store.Grep, with its index and without, finds exactly the lines
// that a brute-force scan of the directory store finds, and rg too when it
// is installed.
func TestSearchSameHits(t *testing.T) {
	ctx := context.Background()
	docs := realDocs(t, 120)
	qs := pickQueries(docs, 1)
	ss, err := buildSearchStores(ctx, docs, 2, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.s.Close()
	if ss.Docs != 240 || len(ss.keyOf) != 240 || len(ss.keys) != 240 || ss.Index.Blobs == 0 || ss.Pack.Blobs == 0 {
		t.Fatalf("built %d results, %d files, %d keys, %d blobs indexed, %d packed; want 240 of each and some blobs",
			ss.Docs, len(ss.keyOf), len(ss.keys), ss.Index.Blobs, ss.Pack.Blobs)
	}
	rg, err := exec.LookPath("rg")
	if err != nil {
		t.Log("rg is not installed: its hits are not compared, only the brute-force scan's")
	}
	hitting := 0
	for _, q := range qs {
		want, err := oracleHits(ss, q.Pattern)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) > 0 {
			hitting++
		}
		for _, noIndex := range []bool{false, true} {
			got, res, err := grepHits(ctx, ss.s, q.Pattern, noIndex)
			if err != nil {
				t.Fatalf("Grep(%+v): %v", q.Pattern, err)
			}
			if d := diffHits(want, got); d.OnlyA+d.OnlyB > 0 {
				t.Errorf("Grep(%+v, NoIndex %v) differs from the brute-force scan: %+v", q.Pattern, noIndex, d)
			}
			if !noIndex && q.Pattern.Expr != `[0-9]+\.[0-9]+\.[0-9]+` && !res.Indexed {
				t.Errorf("Grep(%+v) did not use the index", q.Pattern)
			}
		}
		if rg != "" {
			got, err := rgHits(ctx, rg, ss, q.Pattern)
			if err != nil {
				t.Fatal(err)
			}
			if d := diffHits(want, got); d.OnlyA+d.OnlyB > 0 {
				t.Errorf("rg %q differs from the brute-force scan: %+v", rgArgs(q.Pattern, ss.dirRoot), d)
			}
		}
	}
	if hitting < len(qs)/2 {
		t.Errorf("only %d of %d queries hit anything: the comparison shows little", hitting, len(qs))
	}
}

func TestScaledDoc(t *testing.T) {
	d := searchDoc{key: hook.Key{Run: "r", Step: 2, Tool: "bash", CallID: "call_1", Part: -1, Ext: ".txt"}, text: "a\nb"}
	if got := scaledDoc(d, 0); !reflect.DeepEqual(got, d) {
		t.Errorf("scaledDoc(d, 0) = %+v, want d", got)
	}
	c := scaledDoc(d, 3)
	if c.key.Run != "r.copy3" || c.key.CallID != "call_1-copy3" || c.key.Step != 2 || c.key.Tool != "bash" {
		t.Errorf("scaledDoc(d, 3).key = %+v", c.key)
	}
	if c.text != "a\nb\n[copy3]\n" {
		t.Errorf("scaledDoc(d, 3).text = %q, want the lines of d and one more", c.text)
	}
	if scaledDoc(d, 4).text == c.text {
		t.Error("two copies have the same text")
	}
	d.key.CallID = ""
	if c := scaledDoc(d, 1); c.key.CallID != "" {
		t.Errorf("an empty call id became %q; it stays empty (the index stands in)", c.key.CallID)
	}
}

func TestPickQueries(t *testing.T) {
	docs := realDocs(t, 300)
	qs := pickQueries(docs, 1)
	if len(qs) != 20 {
		t.Fatalf("pickQueries made %d queries, want 20", len(qs))
	}
	if again := pickQueries(docs, 1); !reflect.DeepEqual(qs, again) {
		t.Error("pickQueries with the same seed made different queries")
	}
	if other := pickQueries(docs, 2); reflect.DeepEqual(qs, other) {
		t.Error("pickQueries with another seed made the same queries")
	}
	kinds := map[string]int{}
	for _, q := range qs {
		kinds[q.Kind]++
		if _, err := search.Compile(q.Pattern); err != nil {
			t.Errorf("%s %q: %v", q.Kind, q.Pattern.Expr, err)
		}
		if q.Kind == qRare && q.DF > max(2, len(docs)/100) {
			t.Errorf("rare literal %q is in %d of %d results", q.Pattern.Expr, q.DF, len(docs))
		}
	}
	want := map[string]int{qRare: 5, qCommon: 4, qFold: 4, qRegexLit: 4, qRegexNone: 3}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
}

func TestFTSMatch(t *testing.T) {
	for _, c := range []struct {
		lit       string
		positions bool
		want      string
	}{
		{"abcd", true, `"abcd"`},
		{`a"bc`, true, `"a""bc"`},
		{"abcd", false, `"abc" AND "bcd"`},
		{"héllo", false, `"hél" AND "éll" AND "llo"`},
	} {
		if got := ftsMatch(c.lit, c.positions); got != c.want {
			t.Errorf("ftsMatch(%q, %v) = %s, want %s", c.lit, c.positions, got, c.want)
		}
	}
}

// TestSearchAlternatives builds the alternatives on a few results: every
// way finds the same lines.
func TestSearchAlternatives(t *testing.T) {
	docs := realDocs(t, 60)
	qs := pickQueries(docs, 1)
	base, alts, err := measureAlternatives(context.Background(), docs, qs, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if base.Docs != 60 || len(alts) != 2+len(ftsVariants) {
		t.Fatalf("%d results, %d alternatives", base.Docs, len(alts))
	}
	for _, a := range alts[1:] {
		for i, q := range a.Queries {
			if want := alts[0].Queries[i]; q.Lines != want.Lines {
				t.Errorf("%s finds %d lines for %q, %s finds %d", a.Name, q.Lines, q.Query.Pattern.Expr, alts[0].Name, want.Lines)
			}
		}
		if strings.HasPrefix(a.Name, "FTS5") && a.IndexBytes == 0 {
			t.Errorf("%s: no index bytes", a.Name)
		}
	}
}
