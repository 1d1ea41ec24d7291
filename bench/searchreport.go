package main

import (
	"fmt"
	"strings"
)

// searchTargets are the search section's goals, as measured.
func searchTargets(rep searchReport) []target {
	var ts []target
	diffs, against := 0, "rg"
	for _, sh := range rep.Same {
		if sh.Diff.OnlyA+sh.Diff.OnlyB > 0 {
			diffs++
		}
		against = sh.Against
	}
	ts = append(ts, target{"same hits as " + against, fmt.Sprintf("all %d queries", len(rep.Same)),
		fmt.Sprintf("%d of %d queries differ", diffs, len(rep.Same)), float64(diffs), diffs == 0})
	median := func(role, way string) (float64, bool) {
		for _, r := range rep.Speed {
			if r.Role == role && r.Way == way {
				return r.Median, true
			}
		}
		return 0, false
	}
	for _, g := range []struct {
		role   string
		factor float64
		p50    float64
	}{{roleSelective, 10, 100}, {roleRegex, 5, 0}, {roleCommon, 1, 0}} {
		rg, ok := median(g.role, wayRG)
		if !ok {
			continue
		}
		for _, way := range []string{wayGrep, wayCasctl} {
			m, ok := median(g.role, way)
			if !ok {
				continue
			}
			ratio := rg / m
			goal := fmt.Sprintf("≥ %g × faster than rg", g.factor)
			if g.factor == 1 {
				goal = "no slower than rg"
			}
			met := ratio >= g.factor
			measured := fmt.Sprintf("%.1f ms vs rg %.1f ms: %.1f ×", m, rg, ratio)
			if g.p50 > 0 {
				goal += fmt.Sprintf(", p50 ≤ %g ms", g.p50)
				met = met && m <= g.p50
			}
			ts = append(ts, target{g.role + ", " + way, goal, measured, ratio, met})
		}
	}
	z := rep.Sizes
	ix := z.PostingsBytes + z.SegmentsBytes
	r := float64(ix) / float64(max(z.PackBytes, 1))
	ts = append(ts, target{"search index vs the packed bytes it covers", "≤ 0.3 ×",
		fmt.Sprintf("%s for %s packed: %.2f ×", mib(ix), mib(z.PackBytes), r), r, r <= 0.3})
	r = float64(z.DirBlocks) / float64(max(z.CASBlocks, 1))
	free := float64(z.DirBlocks) / float64(max(z.CASBlocks-z.IndexFreeBytes, 1))
	ts = append(ts, target{"store with its index vs the directory store, on disk", "≥ 4 × smaller",
		fmt.Sprintf("%s vs %s: %.1f × (%.1f × without the index database's %s of free pages)", mib(z.CASBlocks),
			mib(z.DirBlocks), r, free, mib(z.IndexFreeBytes)), r, r >= 4})
	if len(rep.Alternatives) > 0 && rep.AltBase.PackBytes > 0 {
		ix := rep.Alternatives[0].IndexBytes
		r := float64(ix) / float64(rep.AltBase.PackBytes)
		ts = append(ts, target{"search index vs the packed bytes it covers, the trace unscaled", "≤ 0.3 ×",
			fmt.Sprintf("%s for %s packed: %.2f ×", mib(ix), mib(rep.AltBase.PackBytes), r), r, r <= 0.3})
	}
	ts = append(ts, target{"the agent's search of one run, its first page", "p99 ≤ 20 ms",
		fmt.Sprintf("p50 %.2f ms, p99 %.2f ms over %d calls", rep.Agent.P50, rep.Agent.P99, rep.Agent.Calls), rep.Agent.P99, rep.Agent.P99 <= 20})
	return ts
}

func patternString(q searchQuery) string {
	var flags []string
	if q.Pattern.Fixed {
		flags = append(flags, "-F")
	}
	if q.Pattern.IgnoreCase {
		flags = append(flags, "-i")
	}
	return strings.TrimSpace(strings.Join(flags, " ") + " `" + strings.ReplaceAll(q.Pattern.Expr, "|", `\|`) + "`")
}

func searchMarkdown(rep searchReport) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := rep.Machine
	ss := rep.Stores
	p("# Search: the trigram index against rg over a directory store\n\n")
	p("- Command: `%s`\n", rep.Command)
	p("- Date: %s\n", rep.Date.Format("2006-01-02 15:04 UTC"))
	p("- Machine: %s, %d cores, %d GiB, Linux %s, stores on %s\n", m.CPU, m.Cores, m.MemoryGiB, m.Kernel, m.FileSystem)
	p("- Load average (1, 5, 15 min) before: %s; after: %s\n", rep.LoadBefore, rep.LoadAfter)
	p("- rg: %s; casctl grep: %s\n", rep.RG, rep.Casctl)
	p("- Corpus: the results of `%s` over %d characters (%d results, %s), copied %d times: each copy after the first has `.copyN` after its run's name, `-copyN` after its call ids and a last line `[copyN]`, so that nothing dedups across copies and every other line is the original's. %d results, %s of text, in %d runs.\n",
		rep.Trace, rep.Threshold, rep.BaseDocs, mib(rep.BaseBytes), rep.Scale, ss.Docs, mib(ss.TextBytes), len(ss.runs))
	p("- Both stores are written from the same items: a directory store as Haystack writes one (`root/<run>/<step>_<tool>_<call>.txt`, no fsync), and a toolcas store (durability none), then indexed for search from its loose files (segments: %d, %s of text in %.1f s: %.1f MB/s) and packed (%d blobs into %s in %.1f s), then its index database vacuumed, as `casctl vacuum` does (%s before, %s after, in %.1f s). Writes took %.1f s (directory) and %.1f s (toolcas).\n",
		ss.Index.Segments, mib(ss.Index.Bytes), ss.IndexSecs, float64(ss.Index.Bytes)/1e6/max(ss.IndexSecs, 1e-9),
		ss.Pack.Blobs, mib(ss.Pack.PackBytes), ss.PackSecs, mib(ss.Vacuum.Before), mib(ss.Vacuum.After), ss.VacuumSecs,
		ss.DirWriteSecs, ss.CASWriteSecs)
	p("- Times: each way once untimed (the page cache warm), then %d rounds taking turns, the order turning each round; min and median.\n\n", rep.Rounds)

	p("## Goals\n\n| what | goal | measured | met |\n| --- | --- | --- | --- |\n")
	for _, t := range rep.Targets {
		p("| %s | %s | %s | %s |\n", t.What, t.Target, t.Measured, map[bool]string{true: "yes", false: "**no**"}[t.Met])
	}

	p("\n## Speed\n\n| query | pattern | way | min | median | rounds |\n| --- | --- | --- | ---: | ---: | --- |\n")
	for _, r := range rep.Speed {
		var ms []string
		for _, x := range r.Millis {
			ms = append(ms, fmt.Sprintf("%.1f", x))
		}
		p("| %s | %s | %s | %.1f ms | %.1f ms | %s |\n", r.Role, patternString(r.Query), r.Way, r.Min, r.Median, strings.Join(ms, " "))
	}
	for _, r := range rep.Speed {
		if r.Command != "" {
			p("\n`%s`", r.Command)
		}
	}
	p("\n\n## Same hits\n\nEvery query's hits from `Store.Grep` (newest versions, lines whole) against %s over the directory store, by key, line number and line. Queries are drawn by a seeded generator from the words of the trace's offloaded results by the share of results holding them (df: how many of the %d).\n\n",
		map[bool]string{true: "`rg --no-heading -n`", false: "a brute-force scan"}[len(rep.Same) > 0 && rep.Same[0].Against == "rg"], rep.BaseDocs)
	p("| kind | pattern | df | lines | results hit | share | blobs read | differences |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, sh := range rep.Same {
		d := "none"
		if sh.Diff.OnlyA+sh.Diff.OnlyB > 0 {
			d = fmt.Sprintf("**%d only in %s, %d only in Grep**: %s", sh.Diff.OnlyA, sh.Against, sh.Diff.OnlyB,
				strings.ReplaceAll(strings.Join(sh.Diff.Examples, "; "), "|", `\|`))
		}
		p("| %s | %s | %d | %d | %d | %.2f %% | %d | %s |\n", sh.Query.Kind, patternString(sh.Query), sh.Query.DF, sh.Lines, sh.Parts,
			100*sh.Share, sh.Read, d)
	}

	z := rep.Sizes
	p("\n## Cost\n\n| what | bytes | × packed |\n| --- | ---: | ---: |\n")
	row := func(what string, n int64) {
		p("| %s | %s | %.2f |\n", what, mib(n), float64(n)/float64(max(z.PackBytes, 1)))
	}
	row("text offloaded", ss.TextBytes)
	row("packs", z.PackBytes)
	row("search index: search_posting_groups", z.PostingsBytes)
	row("search index: search_segments", z.SegmentsBytes)
	row("index.db, whole", z.IndexDBBytes)
	row("index.db, its free pages (those gc and pack did not give back)", z.IndexFreeBytes)
	row("toolcas store on disk (blocks)", z.CASBlocks)
	row(fmt.Sprintf("directory store on disk (blocks, %d files)", z.DirFiles), z.DirBlocks)

	a := rep.Agent
	p("\n## The agent's search of one run\n\n`Store.Search(ctx, run, hook.SearchQuery{…})`, for %d random pairs of a run (of %d) and a query above, each stopped by its callback once it has a page and one hit more: p50 %.2f ms, p99 %.2f ms, max %.2f ms; %d hits in all, %d searches with more than a page (%d hits).\n",
		a.Calls, a.Runs, a.P50, a.P99, a.Max, a.Hits, a.Over, a.Page)

	ab := rep.AltBase
	p("\n## The alternatives, on the trace itself\n\n%d results, %s of text, %s packed. Each way finds candidate results, and the same line matcher reads them; an FTS5 table without its text reads them from the toolcas store. FTS5 tables are built in one transaction, merged (`optimize`) and vacuumed; sizes are their pages (dbstat), the text kept in the table apart.\n\n",
		ab.Docs, mib(ab.TextBytes), mib(ab.PackBytes))
	p("| index | index bytes | × packed | text in it | build |")
	var qs []altQuery
	if len(rep.Alternatives) > 0 {
		qs = rep.Alternatives[0].Queries
	}
	for _, q := range qs {
		p(" %s %s: median (candidates) |", q.Query.Kind, patternString(q.Query))
	}
	p("\n| --- | ---: | ---: | ---: | ---: |%s\n", strings.Repeat(" ---: |", len(qs)))
	for _, alt := range rep.Alternatives {
		p("| %s | %s | %.2f | %s | %.2f s |", alt.Name, mib(alt.IndexBytes), float64(alt.IndexBytes)/float64(max(ab.PackBytes, 1)),
			mib(alt.TextBytes), alt.BuildSecs)
		for _, q := range alt.Queries {
			p(" %.2f ms (%d) |", q.Median, q.Candidates)
		}
		p("\n")
	}
	return b.String()
}
