package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/search"
	"github.com/toolcas/toolcas/store"
)

// The search section: Store.Grep, narrowed by the trigram index, against
// ripgrep over a directory store of the same results, on the real trace's
// offloaded results copied -trace-scale times; and, on the trace itself,
// the index beside the alternatives it was chosen over (SQLite FTS5 with
// its trigram tokenizer, and no index at all). Everything is measured in
// this one process but rg and casctl, which run as the processes users
// run; the stores are warm in the page cache, and each measured thing
// takes its turn with its baseline, round after round.

// searchRun is what -search was asked to do.
type searchRun struct {
	trace     string
	threshold int
	scale     int
	rounds    int
	dir       string
	out       string
	command   string
	seed      uint64
	// casctl is a casctl binary whose grep command is timed too, or "".
	casctl string
	// agentCalls is how many agent searches are timed.
	agentCalls int
}

// searchReport is the search section.
type searchReport struct {
	Command    string    `json:"command"`
	Date       time.Time `json:"date"`
	Machine    machine   `json:"machine"`
	LoadBefore string    `json:"load_before"`
	LoadAfter  string    `json:"load_after"`
	Trace      string    `json:"trace"`
	Threshold  int       `json:"threshold"`
	Scale      int       `json:"scale"`
	Rounds     int       `json:"rounds"`
	// RG is rg's version, or why it was not used.
	RG string `json:"rg"`
	// Casctl says whether casctl grep was timed, and if not, why.
	Casctl string `json:"casctl"`
	// BaseDocs and BaseBytes are the trace's offloaded results.
	BaseDocs  int           `json:"base_docs"`
	BaseBytes int64         `json:"base_bytes"`
	Queries   []searchQuery `json:"queries"`
	Stores    *searchStores `json:"stores"`
	Sizes     searchSizes   `json:"sizes"`
	Same      []sameHits    `json:"same_hits"`
	Speed     []speedRow    `json:"speed"`
	Agent     agentSearch   `json:"agent_search"`
	// Alternatives are measured on the unscaled trace.
	Alternatives []altIndex `json:"alternatives"`
	AltBase      altBase    `json:"alternatives_base"`
	Targets      []target   `json:"targets"`
}

// searchSizes are the stores' sizes on disk.
type searchSizes struct {
	// DirBlocks and CASBlocks are the bytes of the blocks each store's
	// files and directories occupy, the toolcas store's index included.
	DirBlocks int64 `json:"dir_blocks"`
	DirFiles  int   `json:"dir_files"`
	CASBlocks int64 `json:"cas_blocks"`
	// PackBytes are the pack files' bytes: the text the index covers, as
	// stored.
	PackBytes int64 `json:"pack_bytes"`
	// PostingsBytes and SegmentsBytes are the pages of the two tables of
	// the search index (SQLite's dbstat); IndexDBBytes the whole index
	// database's file.
	PostingsBytes int64 `json:"postings_bytes"`
	SegmentsBytes int64 `json:"segments_bytes"`
	IndexDBBytes  int64 `json:"index_db_bytes"`
	// IndexFreeBytes are the index database's free pages (SQLite's
	// freelist): space the rows of dropped search segments held, which
	// later writes reuse and the file keeps.
	IndexFreeBytes int64 `json:"index_free_bytes"`
}

// sameHits compares one query's hits in the two stores.
type sameHits struct {
	Query searchQuery `json:"query"`
	// Lines and Parts are Grep's matching lines and parts with one;
	// Share is Parts over the results.
	Lines int64   `json:"lines"`
	Parts int64   `json:"parts"`
	Share float64 `json:"share"`
	// Read counts the blobs Grep read; Indexed says the index narrowed
	// the search.
	Read    int64 `json:"read"`
	Indexed bool  `json:"indexed"`
	// Against names what Grep's hits were compared with: rg, or the
	// brute-force scan when rg is missing.
	Against string  `json:"against"`
	Diff    hitDiff `json:"diff"`
}

// speedRow is the times of one way of running one query.
type speedRow struct {
	Query   searchQuery `json:"query"`
	Role    string      `json:"role"`
	Way     string      `json:"way"`
	Millis  []float64   `json:"ms"`
	Min     float64     `json:"min_ms"`
	Median  float64     `json:"median_ms"`
	Command string      `json:"command,omitempty"`
}

// agentSearch is the agent's search of one run.
type agentSearch struct {
	Calls int     `json:"calls"`
	Page  int     `json:"page"`
	Runs  int     `json:"runs"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
	Hits  int     `json:"hits"`
	// Over counts the searches with more hits than a page.
	Over int `json:"over_a_page"`
}

// Roles of the timed queries.
const (
	roleSelective = "selective literal"
	roleRegex     = "regex with a required literal"
	roleCommon    = "unselective literal"
	roleScan      = "regex no trigram narrows"
)

// agentPage is the hits of a first page of the agent's search.
const agentPage = 20

func runSearch(ctx context.Context, sr searchRun, stdout, log io.Writer) error {
	progress := func(format string, args ...any) { fmt.Fprintf(log, format+"\n", args...) }
	rep := searchReport{Command: sr.command, Date: time.Now().UTC().Truncate(time.Second), Machine: describeMachine(sr.dir),
		LoadBefore: loadAvg(), Trace: sr.trace, Threshold: sr.threshold, Scale: sr.scale, Rounds: sr.rounds}
	rt, err := loadRealTrace(sr.trace)
	if err != nil {
		return err
	}
	docs := traceDocs(rt, sr.threshold)
	if len(docs) == 0 {
		return fmt.Errorf("trace %s: no result over %d characters", sr.trace, sr.threshold)
	}
	rep.BaseDocs = len(docs)
	for _, d := range docs {
		rep.BaseBytes += int64(len(d.text))
	}
	rep.Queries = pickQueries(docs, sr.seed)
	rg, rgErr := exec.LookPath("rg")
	if rgErr != nil {
		rep.RG = "missing: hits compared with a brute-force scan, and speed not compared"
		rg = ""
	} else if out, err := exec.CommandContext(ctx, rg, "--version").Output(); err == nil {
		rep.RG = strings.SplitN(string(out), "\n", 2)[0]
	}
	rep.Casctl = "not timed: no -casctl binary given"
	if sr.casctl != "" {
		if out, err := exec.CommandContext(ctx, sr.casctl, "grep", "--help").CombinedOutput(); err != nil {
			rep.Casctl = fmt.Sprintf("not timed: %s grep --help: %v: %s", sr.casctl, err, firstLine(string(out)))
			sr.casctl = ""
		} else {
			rep.Casctl = "timed: " + sr.casctl
		}
	}

	progress("search: the alternatives on the trace's %d offloaded results…", len(docs))
	baseDir := filepath.Join(sr.dir, "search-base")
	os.RemoveAll(baseDir)
	rep.AltBase, rep.Alternatives, err = measureAlternatives(ctx, docs, rep.Queries, baseDir, sr.rounds)
	os.RemoveAll(baseDir)
	if err != nil {
		return fmt.Errorf("alternatives: %w", err)
	}

	progress("search: writing %d copies of the trace's offloaded results…", sr.scale)
	scaledDir := filepath.Join(sr.dir, "search-scaled")
	os.RemoveAll(scaledDir)
	ss, err := buildSearchStores(ctx, docs, sr.scale, scaledDir, progress)
	if err != nil {
		return err
	}
	defer ss.s.Close()
	rep.Stores = ss
	if rep.Sizes, err = measureSizes(ctx, ss); err != nil {
		return err
	}
	progress("search: %d results, %s of text; packed into %s, indexed in %.1f s; comparing hits…", ss.Docs,
		mib(ss.TextBytes), mib(ss.Pack.PackBytes), ss.IndexSecs)
	for _, q := range rep.Queries {
		sh, err := compareHits(ctx, rg, ss, q)
		if err != nil {
			return fmt.Errorf("%s %q: %w", q.Kind, q.Pattern.Expr, err)
		}
		rep.Same = append(rep.Same, sh)
	}
	progress("search: timing, %d rounds…", sr.rounds)
	if rep.Speed, err = timeSearches(ctx, rg, sr.casctl, ss, rep.Same, sr.rounds); err != nil {
		return err
	}
	progress("search: the agent's search of one run, %d calls…", sr.agentCalls)
	if rep.Agent, err = timeAgentSearch(ctx, ss, rep.Queries, sr.agentCalls, sr.seed); err != nil {
		return err
	}
	rep.Targets = searchTargets(rep)
	rep.LoadAfter = loadAvg()
	if sr.out == "" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeSection(sr.out, "search.json", rep, "SEARCH.md", searchMarkdown(rep))
}

// clockStart is what nowSecs counts from.
var clockStart = time.Now()

// nowSecs is the time since the program started, in seconds, from the
// monotonic clock.
func nowSecs() float64 { return time.Since(clockStart).Seconds() }

func firstLine(s string) string { return strings.SplitN(strings.TrimSpace(s), "\n", 2)[0] }

// measureSizes measures both stores on disk, and the search index's
// tables in the index database.
func measureSizes(ctx context.Context, ss *searchStores) (searchSizes, error) {
	var z searchSizes
	d, c := du(ss.dirRoot), du(ss.casDir)
	z.DirBlocks, z.DirFiles, z.CASBlocks = d.blocks, d.files, c.blocks
	z.PackBytes = ss.Pack.PackBytes
	tables, err := tableBytes(ctx, filepath.Join(ss.casDir, store.IndexFile))
	if err != nil {
		return z, err
	}
	z.PostingsBytes, z.SegmentsBytes = tables["search_posting_groups"], tables["search_segments"]
	if z.IndexFreeBytes, err = freeBytes(ctx, filepath.Join(ss.casDir, store.IndexFile)); err != nil {
		return z, err
	}
	if fi, err := os.Stat(filepath.Join(ss.casDir, store.IndexFile)); err == nil {
		z.IndexDBBytes = fi.Size()
	}
	return z, nil
}

// freeBytes returns the bytes of a SQLite database's free pages.
func freeBytes(ctx context.Context, path string) (int64, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var pages, size int64
	if err := db.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&pages); err != nil {
		return 0, fmt.Errorf("free pages of %s: %w", path, err)
	}
	if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size); err != nil {
		return 0, fmt.Errorf("page size of %s: %w", path, err)
	}
	return pages * size, nil
}

// tableBytes returns the bytes of the pages of each table and index of a
// SQLite database, from its dbstat table.
func tableBytes(ctx context.Context, path string) (map[string]int64, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT name, sum(pgsize) FROM dbstat GROUP BY name`)
	if err != nil {
		return nil, fmt.Errorf("dbstat of %s: %w", path, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		out[name] = n
	}
	return out, rows.Err()
}

// compareHits runs q through Grep and through rg (or, without rg, the
// brute-force scan) and says how their hits differ.
func compareHits(ctx context.Context, rg string, ss *searchStores, q searchQuery) (sameHits, error) {
	sh := sameHits{Query: q}
	got, res, err := grepHits(ctx, ss.s, q.Pattern, false)
	if err != nil {
		return sh, err
	}
	sh.Lines, sh.Parts, sh.Read, sh.Indexed = res.Lines, res.Matched, res.Blobs, res.Indexed
	sh.Share = float64(res.Matched) / float64(max(ss.Docs, 1))
	var want map[string]bool
	if rg != "" {
		sh.Against = "rg"
		want, err = rgHits(ctx, rg, ss, q.Pattern)
	} else {
		sh.Against = "brute-force scan"
		want, err = oracleHits(ss, q.Pattern)
	}
	if err != nil {
		return sh, err
	}
	sh.Diff = diffHits(want, got)
	return sh, nil
}

// timedQueries picks the queries the speed comparison times, by role,
// from what the hit comparison found: the first rare literal whose hits
// are in under 1 % of the results, the first regex with a required
// literal, the first common literal and the regex no trigram narrows.
func timedQueries(same []sameHits) map[string]searchQuery {
	out := map[string]searchQuery{}
	for _, sh := range same {
		var role string
		switch {
		case sh.Query.Kind == qRare && sh.Share < 0.01:
			role = roleSelective
		case sh.Query.Kind == qRegexLit:
			role = roleRegex
		case sh.Query.Kind == qCommon:
			role = roleCommon
		case sh.Query.Kind == qRegexNone && !sh.Indexed:
			role = roleScan
		default:
			continue
		}
		if _, ok := out[role]; !ok {
			out[role] = sh.Query
		}
	}
	return out
}

var speedRoles = []string{roleSelective, roleRegex, roleCommon, roleScan}

// Ways of running a query.
const (
	wayGrep   = "Store.Grep, in-process"
	wayCasctl = "casctl grep, a process"
	wayRG     = "rg over the directory store"
	wayScan   = "Store.Grep, NoIndex"
)

// timeSearches times each role's query every way, once untimed to warm
// the page cache, then rounds times, the ways taking turns in an order
// that turns each round.
func timeSearches(ctx context.Context, rg, casctl string, ss *searchStores, same []sameHits, rounds int) ([]speedRow, error) {
	qs := timedQueries(same)
	type way struct {
		name    string
		command string
		run     func(search.Pattern) error
	}
	grepOnce := func(noIndex bool) func(search.Pattern) error {
		return func(p search.Pattern) error {
			_, err := ss.s.Grep(ctx, store.GrepOptions{Pattern: p, NoIndex: noIndex}, func(store.GrepHit) error { return nil })
			return err
		}
	}
	var rows []speedRow
	for _, role := range speedRoles {
		q, ok := qs[role]
		if !ok {
			continue
		}
		ways := []way{{name: wayGrep, run: grepOnce(false)}}
		if role == roleSelective {
			ways = append(ways, way{name: wayScan, run: grepOnce(true)})
		}
		if casctl != "" {
			args := casctlArgs(ss.casDir, q.Pattern)
			ways = append(ways, way{name: wayCasctl, command: "casctl " + strings.Join(args, " "), run: func(search.Pattern) error {
				_, err := runCounted(ctx, casctl, args...)
				return err
			}})
		}
		if rg != "" {
			args := rgArgs(q.Pattern, ss.dirRoot)
			ways = append(ways, way{name: wayRG, command: "rg " + strings.Join(args, " "), run: func(search.Pattern) error {
				_, err := runCounted(ctx, rg, args...)
				return err
			}})
		}
		times := make([][]float64, len(ways))
		for _, w := range ways {
			if err := w.run(q.Pattern); err != nil {
				return nil, fmt.Errorf("%s, %s: %w", role, w.name, err)
			}
		}
		for r := range rounds {
			for i := range ways {
				k := (i + r) % len(ways)
				t0 := time.Now()
				if err := ways[k].run(q.Pattern); err != nil {
					return nil, fmt.Errorf("%s, %s: %w", role, ways[k].name, err)
				}
				times[k] = append(times[k], float64(time.Since(t0).Microseconds())/1000)
			}
		}
		for i, w := range ways {
			rows = append(rows, speedRow{Query: q, Role: role, Way: w.name, Millis: times[i], Min: slices.Min(times[i]),
				Median: percentile(times[i], 50), Command: w.command})
		}
	}
	return rows, nil
}

// casctlArgs are casctl's arguments to grep the store for p.
func casctlArgs(dir string, p search.Pattern) []string {
	args := []string{"--store", dir, "grep"}
	if p.Fixed {
		args = append(args, "-F")
	}
	if p.IgnoreCase {
		args = append(args, "-i")
	}
	return append(args, "--", p.Expr)
}

// timeAgentSearch times Store.Search, the read-back tool's search of one
// run, for calls random pairs of a run and a query. It takes every hit: a
// search stopped after a first page (fn returning an error) does not
// return in this version of Store.Grep, so that the time of the whole
// search stands for the first page's, which it bounds.
// errPageFull stops a search once it has a page.
var errPageFull = errors.New("a page is full")

func timeAgentSearch(ctx context.Context, ss *searchStores, qs []searchQuery, calls int, seed uint64) (agentSearch, error) {
	a := agentSearch{Calls: calls, Page: agentPage, Runs: len(ss.runs)}
	rng := rand.New(rand.NewPCG(seed, 0xa9e47))
	var lat []float64
	for range calls {
		run := ss.runs[rng.IntN(len(ss.runs))]
		q := qs[rng.IntN(len(qs))].Pattern
		hits := 0
		t0 := time.Now()
		err := ss.s.Search(ctx, run, hook.SearchQuery{Pattern: q.Expr, Fixed: q.Fixed, IgnoreCase: q.IgnoreCase},
			func(hook.SearchHit) error {
				// A page, and one hit more to know that there is more: the
				// read tool's search stops there.
				if hits++; hits > agentPage {
					return errPageFull
				}
				return nil
			})
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
		if hits > agentPage {
			a.Over++
			hits = agentPage
		}
		if err != nil && !errors.Is(err, errPageFull) {
			return a, fmt.Errorf("search of run %s for %q: %w", run, q.Expr, err)
		}
		a.Hits += hits
	}
	a.P50, a.P99, a.Max = percentile(lat, 50), percentile(lat, 99), slices.Max(lat)
	return a, nil
}
