package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/search"
	"github.com/toolcas/toolcas/store"
)

// The search section's corpus: the results of a real trace that the hook
// offloads, copied N times, written once as a directory store (a file a
// result, as Haystack writes them) and once into a toolcas store, packed
// and indexed for search.

// searchDoc is one offloaded result.
type searchDoc struct {
	key  hook.Key
	text string
}

// traceDocs returns the results of rt over threshold characters (code
// points), in the order recorded, keyed as the hook keys them.
func traceDocs(rt *realTrace, threshold int) []searchDoc {
	var docs []searchDoc
	for _, st := range rt.steps {
		for i, r := range st.Results {
			if len(r.Parts) != 1 || r.Parts[0].Kind != hook.KindText || utf8.RuneCountInString(r.Parts[0].Text) <= threshold {
				continue
			}
			docs = append(docs, searchDoc{key: hook.Key{Run: st.Run, Step: st.Number, Tool: r.Tool, CallID: r.CallID,
				Index: i, Part: -1, Ext: ".txt"}, text: r.Parts[0].Text})
		}
	}
	return docs
}

// scaledDoc returns copy c of d. Copy 0 is d itself. Any other copy has
// ".copyC" after its run's name and "-copyC" after its call id, and one
// line more at its end, "[copyC]": its bytes differ from every other
// copy's, so that nothing dedups away across copies, and every other line,
// and so every hit of a pattern that does not match the added line, is
// the original's. Nothing in it depends on what the trace holds.
func scaledDoc(d searchDoc, c int) searchDoc {
	if c == 0 {
		return d
	}
	tag := fmt.Sprintf("copy%d", c)
	k := d.key
	k.Run += "." + tag
	if k.CallID != "" {
		k.CallID += "-" + tag
	}
	text := d.text
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return searchDoc{key: k, text: text + "[" + tag + "]\n"}
}

// searchStores are the two stores of the same results.
type searchStores struct {
	// dirRoot is the directory store's root; casDir the toolcas store's.
	dirRoot string
	casDir  string
	s       *store.Store
	// keyOf maps each file of the directory store, by its path relative
	// to dirRoot, to the key of the same result in the toolcas store.
	keyOf map[string]string
	// keys and docRuns are each result's key in the toolcas store and
	// its run, in the order written.
	keys    []string
	docRuns []string
	runs    []string
	// Docs counts the results written to each store; TextBytes their
	// bytes.
	Docs      int   `json:"docs"`
	TextBytes int64 `json:"text_bytes"`
	// WriteSecs are the times the writes took, each store's alone.
	DirWriteSecs float64 `json:"dir_write_seconds"`
	CASWriteSecs float64 `json:"cas_write_seconds"`
	// Pack and PackSecs are what packing every blob did and took.
	Pack     store.PackResult `json:"pack"`
	PackSecs float64          `json:"pack_seconds"`
	// Vacuum and VacuumSecs are what vacuuming the index after the pack
	// did and took, as casctl vacuum does.
	Vacuum     store.VacuumResult `json:"vacuum"`
	VacuumSecs float64            `json:"vacuum_seconds"`
	// Index and IndexSecs are what IndexSearch did and took.
	Index     store.SearchIndexResult `json:"index_search"`
	IndexSecs float64                 `json:"index_search_seconds"`
}

// buildSearchStores writes copies of docs into a directory store and a
// toolcas store (without fsync: the section measures reads) under dir,
// then indexes the toolcas store for search and packs every blob.
// progress, when set, is told how far the writes are.
func buildSearchStores(ctx context.Context, docs []searchDoc, copies int, dir string, progress func(string, ...any)) (*searchStores, error) {
	ss := &searchStores{dirRoot: filepath.Join(dir, "dirstore"), casDir: filepath.Join(dir, "toolcas"), keyOf: map[string]string{}}
	ds, err := hook.NewDirStore(ss.dirRoot)
	if err != nil {
		return nil, err
	}
	s, err := store.Open(ctx, ss.casDir, store.WithCreate(), store.WithDurability(cas.SyncNone))
	if err != nil {
		return nil, err
	}
	ss.s = s
	runs := map[string]bool{}
	const batch = 256
	items := make([]hook.Item, 0, batch)
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		t0 := nowSecs()
		dst, err := ds.Write(ctx, items)
		if err != nil {
			return err
		}
		t1 := nowSecs()
		cst, err := s.Write(ctx, items)
		if err != nil {
			return err
		}
		ss.DirWriteSecs += t1 - t0
		ss.CASWriteSecs += nowSecs() - t1
		for i := range items {
			rel, err := filepath.Rel(ss.dirRoot, dst[i].Path)
			if err != nil {
				return err
			}
			ss.keyOf[filepath.ToSlash(rel)] = cst[i].Key
			ss.keys = append(ss.keys, cst[i].Key)
			ss.docRuns = append(ss.docRuns, items[i].Key.Run)
		}
		items = items[:0]
		return nil
	}
	for c := range copies {
		for _, d := range docs {
			d = scaledDoc(d, c)
			runs[d.key.Run] = true
			ss.Docs++
			ss.TextBytes += int64(len(d.text))
			items = append(items, hook.Item{Key: d.key, Part: hook.Text(d.text)})
			if len(items) == batch {
				if err := flush(); err != nil {
					s.Close()
					return nil, err
				}
			}
		}
		if progress != nil && (c+1)%10 == 0 {
			progress("search: %d of %d copies written", c+1, copies)
		}
	}
	if err := flush(); err != nil {
		s.Close()
		return nil, err
	}
	for r := range runs {
		ss.runs = append(ss.runs, r)
	}
	slices.Sort(ss.runs)
	// Indexed before it is packed, from the loose files: Pack brings the
	// index up to date itself, so that indexing after it would find
	// nothing left to do.
	t0 := nowSecs()
	if ss.Index, err = s.IndexSearch(ctx); err != nil {
		s.Close()
		return nil, err
	}
	ss.IndexSecs = nowSecs() - t0
	t0 = nowSecs()
	if ss.Pack, err = s.Pack(ctx, store.PackOptions{}); err != nil {
		s.Close()
		return nil, fmt.Errorf("pack: %w", err)
	}
	ss.PackSecs = nowSecs() - t0
	// The index's rows, written over the copies in turn and rewritten by
	// the indexing and the pack, are laid out again table by table, as a
	// user would after a large pack (casctl vacuum).
	t0 = nowSecs()
	if ss.Vacuum, err = s.VacuumIndex(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("vacuum: %w", err)
	}
	ss.VacuumSecs = nowSecs() - t0
	return ss, nil
}

// searchQuery is one pattern of the comparison and how it was chosen.
type searchQuery struct {
	Kind    string         `json:"kind"`
	Pattern search.Pattern `json:"pattern"`
	// DF counts the results of the base trace holding the token the
	// pattern was made from (the rarest, for several).
	DF int `json:"df"`
}

// Kinds of searchQuery.
const (
	qRare      = "rare literal"
	qCommon    = "common literal"
	qFold      = "literal, -i"
	qRegexLit  = "regex, required literal"
	qRegexNone = "regex, no required literal"
)

// tokenRE finds the words of the vocabulary the queries are drawn from.
var tokenRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// pickQueries draws 20 patterns from the words of docs by their document
// frequency (the share of results holding the word), with a seeded
// generator: 5 rare literals (in at most 1 % of the results), 4 common
// ones (10 to 50 %), 4 case-insensitive literals (1 to 10 %, given in
// upper case), 4 regular expressions around a rare or middling word, and 3
// without a literal every match holds: an alternation of words, and a
// pattern of digits that no trigram narrows.
func pickQueries(docs []searchDoc, seed uint64) []searchQuery {
	df := map[string]int{}
	for _, d := range docs {
		seen := map[string]bool{}
		for _, w := range tokenRE.FindAllString(d.text, -1) {
			if len(w) >= 6 && len(w) <= 24 && !seen[w] {
				seen[w] = true
				df[w]++
			}
		}
	}
	n := len(docs)
	band := func(lo, hi int) []string {
		var out []string
		for w, f := range df {
			if f >= lo && f <= hi {
				out = append(out, w)
			}
		}
		slices.Sort(out)
		return out
	}
	rng := rand.New(rand.NewPCG(seed, 0x5ea4c4))
	used := map[string]bool{}
	draw := func(words []string) string {
		for range 1000 {
			if len(words) == 0 {
				break
			}
			w := words[rng.IntN(len(words))]
			if !used[w] {
				used[w] = true
				return w
			}
		}
		return ""
	}
	rare, mid, common := band(2, max(2, n/100)), band(n/100+1, max(n/100+1, n/10)), band(n/10+1, max(n/10+1, n/2))
	var qs []searchQuery
	add := func(kind string, p search.Pattern, w string) {
		if w != "" {
			qs = append(qs, searchQuery{Kind: kind, Pattern: p, DF: df[w]})
		}
	}
	for range 5 {
		w := draw(rare)
		add(qRare, search.Pattern{Expr: w, Fixed: true}, w)
	}
	for range 4 {
		w := draw(common)
		add(qCommon, search.Pattern{Expr: w, Fixed: true}, w)
	}
	for range 4 {
		w := draw(mid)
		add(qFold, search.Pattern{Expr: strings.ToUpper(w), Fixed: true, IgnoreCase: true}, w)
	}
	for i, form := range []string{`%s[A-Za-z0-9_]*\(`, `%s.*[0-9]`, `[a-z_.]+%s`, `%s[^ ]*`} {
		words := rare
		if i%2 == 1 {
			words = mid
		}
		w := draw(words)
		add(qRegexLit, search.Pattern{Expr: fmt.Sprintf(form, w), IgnoreCase: i == 3}, w)
	}
	a, b := draw(rare), draw(rare)
	if a != "" && b != "" {
		add(qRegexNone, search.Pattern{Expr: "(" + a + "|" + b + `)[^A-Za-z0-9_]`}, a)
	}
	a, b, c := draw(mid), draw(mid), draw(mid)
	if a != "" && b != "" && c != "" {
		add(qRegexNone, search.Pattern{Expr: a + "|" + b + "|" + c}, a)
	}
	qs = append(qs, searchQuery{Kind: qRegexNone, Pattern: search.Pattern{Expr: `[0-9]+\.[0-9]+\.[0-9]+`}})
	return qs
}

// hitKey is a matching line as the comparisons compare it: the result's
// key, the line's number and its text.
func hitKey(key string, line int64, text string) string {
	return fmt.Sprintf("%s\x00%d\x00%s", key, line, text)
}

// oracleHits finds the matching lines of every file of the directory
// store the slow way: each file whole, split at '\n', each line matched by
// Go's regexp (a fixed pattern quoted), files holding a NUL byte skipped
// as binary. It shares nothing with package search but the Pattern type.
func oracleHits(ss *searchStores, p search.Pattern) (map[string]bool, error) {
	expr := p.Expr
	if p.Fixed {
		expr = regexp.QuoteMeta(expr)
	}
	if p.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	hits := map[string]bool{}
	for rel, key := range ss.keyOf {
		data, err := os.ReadFile(filepath.Join(ss.dirRoot, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		if bytes.IndexByte(data, 0) >= 0 {
			continue
		}
		lines := bytes.Split(data, []byte{'\n'})
		if len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		for i, l := range lines {
			if re.Match(l) {
				hits[hitKey(key, int64(i+1), string(l))] = true
			}
		}
	}
	return hits, nil
}

// grepHits finds the matching lines with Store.Grep: newest versions,
// lines whole.
func grepHits(ctx context.Context, s *store.Store, p search.Pattern, noIndex bool) (map[string]bool, store.GrepResult, error) {
	hits := map[string]bool{}
	res, err := s.Grep(ctx, store.GrepOptions{Pattern: p, NoIndex: noIndex}, func(h store.GrepHit) error {
		hits[hitKey(h.Part.Key, h.Line, h.Text)] = true
		return nil
	})
	return hits, res, err
}

// hitDiff says how two sets of hits differ: how many are only in each, and
// a few of them.
type hitDiff struct {
	OnlyA    int      `json:"only_a"`
	OnlyB    int      `json:"only_b"`
	Examples []string `json:"examples,omitempty"`
}

func diffHits(a, b map[string]bool) hitDiff {
	var d hitDiff
	show := func(side, k string) {
		if len(d.Examples) < 4 {
			k = strings.ReplaceAll(k, "\x00", ":")
			if len(k) > 200 {
				k = k[:200] + "…"
			}
			d.Examples = append(d.Examples, side+" "+k)
		}
	}
	for k := range a {
		if !b[k] {
			d.OnlyA++
			show("<", k)
		}
	}
	for k := range b {
		if !a[k] {
			d.OnlyB++
			show(">", k)
		}
	}
	return d
}
