package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolcas/toolcas/search"
	"github.com/toolcas/toolcas/store"
)

// The alternatives to the search index, on the trace's offloaded results
// as they are: SQLite's FTS5 with its trigram tokenizer (positions kept
// or not, the text kept in the table or not), the project's segments of
// posting lists, and no index (every blob read). Each finds candidate
// results, then the same line matcher reads them; an FTS5 table without
// its text reads it from the toolcas store, as an index beside the blobs
// would.

// altBase is the toolcas store of the unscaled trace.
type altBase struct {
	Docs      int     `json:"docs"`
	TextBytes int64   `json:"text_bytes"`
	PackBytes int64   `json:"pack_bytes"`
	IndexSecs float64 `json:"index_search_seconds"`
}

// altIndex is one alternative: its size and its queries' times.
type altIndex struct {
	Name string `json:"name"`
	// IndexBytes are the pages of the index alone; TextBytes those of
	// the text it keeps beside it, if any.
	IndexBytes int64      `json:"index_bytes"`
	TextBytes  int64      `json:"text_bytes"`
	BuildSecs  float64    `json:"build_seconds"`
	Queries    []altQuery `json:"queries"`
}

// altQuery is one query's times with one alternative.
type altQuery struct {
	Query      searchQuery `json:"query"`
	Candidates int64       `json:"candidates"`
	Lines      int64       `json:"lines"`
	Millis     []float64   `json:"ms"`
	Min        float64     `json:"min_ms"`
	Median     float64     `json:"median_ms"`
}

// ftsVariant is an FTS5 table's options.
type ftsVariant struct {
	name    string
	options string
	// content says the table keeps the text; positions that it keeps
	// token positions (detail=full), so that a phrase matches.
	content, positions bool
}

var ftsVariants = []ftsVariant{
	{"FTS5 trigram", "", true, true},
	{"FTS5 trigram, detail=none", ", detail=none", true, false},
	{"FTS5 trigram, contentless", ", content=''", false, true},
	{"FTS5 trigram, contentless, detail=none", ", content='', detail=none", false, false},
}

// altQueries are the queries the alternatives run: the first rare,
// common and case-insensitive literals.
func altQueries(qs []searchQuery) []searchQuery {
	var out []searchQuery
	for _, kind := range []string{qRare, qCommon, qFold} {
		for _, q := range qs {
			if q.Kind == kind {
				out = append(out, q)
				break
			}
		}
	}
	return out
}

// altFinder finds one query's matching lines one way, and says how many
// results it read.
type altFinder func(ctx context.Context, p search.Pattern) (cands, lines int64, err error)

func measureAlternatives(ctx context.Context, docs []searchDoc, qs []searchQuery, dir string, rounds int) (altBase, []altIndex, error) {
	ss, err := buildSearchStores(ctx, docs, 1, dir, nil)
	if err != nil {
		return altBase{}, nil, err
	}
	defer ss.s.Close()
	base := altBase{Docs: ss.Docs, TextBytes: ss.TextBytes, PackBytes: ss.Pack.PackBytes, IndexSecs: ss.IndexSecs}
	tables, err := tableBytes(ctx, filepath.Join(ss.casDir, store.IndexFile))
	if err != nil {
		return base, nil, err
	}
	grep := func(noIndex bool) altFinder {
		return func(ctx context.Context, p search.Pattern) (int64, int64, error) {
			res, err := ss.s.Grep(ctx, store.GrepOptions{Pattern: p, NoIndex: noIndex}, func(store.GrepHit) error { return nil })
			return res.Blobs, res.Lines, err
		}
	}
	alts := []altIndex{
		{Name: "toolcas segments of posting lists", IndexBytes: tables["search_posting_groups"] + tables["search_segments"], BuildSecs: ss.IndexSecs},
		{Name: "no index: every blob read (Grep NoIndex)"},
	}
	finders := []altFinder{grep(false), grep(true)}
	for _, v := range ftsVariants {
		a, find, closeDB, err := buildFTS(ctx, ss, docs, v, filepath.Join(dir, "fts.db"+fmt.Sprint(len(alts))))
		if err != nil {
			return base, nil, fmt.Errorf("%s: %w", v.name, err)
		}
		defer closeDB()
		alts = append(alts, a)
		finders = append(finders, find)
	}
	for _, q := range altQueries(qs) {
		times := make([][]float64, len(alts))
		counts := make([][2]int64, len(alts))
		for i, f := range finders { // warm
			c, l, err := f(ctx, q.Pattern)
			if err != nil {
				return base, nil, fmt.Errorf("%s, %q: %w", alts[i].Name, q.Pattern.Expr, err)
			}
			counts[i] = [2]int64{c, l}
		}
		for r := range rounds {
			for i := range finders {
				k := (i + r) % len(finders)
				t0 := time.Now()
				if _, _, err := finders[k](ctx, q.Pattern); err != nil {
					return base, nil, err
				}
				times[k] = append(times[k], float64(time.Since(t0).Microseconds())/1000)
			}
		}
		for i := range alts {
			alts[i].Queries = append(alts[i].Queries, altQuery{Query: q, Candidates: counts[i][0], Lines: counts[i][1],
				Millis: times[i], Min: slices.Min(times[i]), Median: percentile(times[i], 50)})
		}
	}
	return base, alts, nil
}

// buildFTS builds an FTS5 table of docs with the trigram tokenizer in a
// database of its own at path, merged into one segment and vacuumed, and
// returns its size and a finder that queries it.
func buildFTS(ctx context.Context, ss *searchStores, docs []searchDoc, v ftsVariant, path string) (altIndex, altFinder, func(), error) {
	a := altIndex{Name: v.name}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return a, nil, nil, err
	}
	db.SetMaxOpenConns(1)
	closeDB := func() { db.Close() }
	t0 := time.Now()
	err = func() error {
		for _, q := range []string{`PRAGMA journal_mode = OFF`, `PRAGMA synchronous = OFF`,
			`CREATE VIRTUAL TABLE t USING fts5(body, tokenize='trigram'` + v.options + `)`} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for i, d := range docs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO t (rowid, body) VALUES (?, ?)`, i+1, d.text); err != nil {
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		for _, q := range []string{`INSERT INTO t (t) VALUES ('optimize')`, `VACUUM`} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}()
	a.BuildSecs = time.Since(t0).Seconds()
	if err != nil {
		closeDB()
		return a, nil, nil, err
	}
	tables, err := tableBytes(ctx, path)
	if err != nil {
		closeDB()
		return a, nil, nil, err
	}
	for name, n := range tables {
		switch {
		case name == "t_content":
			a.TextBytes += n
		case strings.HasPrefix(name, "t_"):
			a.IndexBytes += n
		}
	}
	find := func(ctx context.Context, p search.Pattern) (int64, int64, error) {
		m, err := search.Compile(p)
		if err != nil {
			return 0, 0, err
		}
		col := "rowid, NULL"
		if v.content {
			col = "rowid, body"
		}
		rows, err := db.QueryContext(ctx, `SELECT `+col+` FROM t WHERE t MATCH ?`, ftsMatch(p.Expr, v.positions))
		if err != nil {
			return 0, 0, err
		}
		defer rows.Close()
		var cands, lines int64
		var fold []byte
		for rows.Next() {
			var id int64
			var body []byte
			if err := rows.Scan(&id, &body); err != nil {
				return cands, lines, err
			}
			cands++
			if !v.content {
				c, err := ss.s.Read(ctx, ss.docRuns[id-1], ss.keys[id-1])
				if err != nil {
					return cands, lines, err
				}
				body = c.Data
			}
			m.Lines(body, 1, &fold, func(int64, []byte, int) bool { lines++; return true })
		}
		return cands, lines, rows.Err()
	}
	return a, find, closeDB, nil
}

// ftsMatch is the FTS5 query for a literal: the phrase, or, for a table
// without positions, where phrases are refused, each of its trigrams.
func ftsMatch(lit string, positions bool) string {
	quote := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	if positions {
		return quote(lit)
	}
	r := []rune(lit)
	var terms []string
	for i := 0; i+3 <= len(r); i++ {
		terms = append(terms, quote(string(r[i:i+3])))
	}
	return strings.Join(terms, " AND ")
}
