package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/search"
	"github.com/toolcas/toolcas/store"
)

type grepOptions struct {
	run, tool        string
	since            time.Duration
	ignoreCase       bool
	fixed            bool
	filesWithMatches bool
	count            bool
	maxCount         int
	width            int
	allVersions      bool
	noIndex          bool
	json             bool
}

// defaultGrepWidth is how many bytes of a matching line grep prints by
// default, around the match.
const defaultGrepWidth = 300

// grepMappedIndex is how much of the index database grep reads through a
// memory map: a search of a store of 140,000 results took a fifth less
// time so, most of it the reads of the rows of thousands of blobs and
// parts, a 512-byte page each.
const grepMappedIndex = 1 << 30

// grepGCPercent is the garbage collector's target while grep runs (the
// default is 100).
const grepGCPercent = 400

// grepCatchUp is the most text the search index may lag behind before grep
// brings it up to date first, on a store it can write to.
const grepCatchUp = 8 << 20

func newGrepCommand(g *globals) *cobra.Command {
	var o grepOptions
	cmd := &cobra.Command{
		Use:   "grep PATTERN",
		Short: "Find lines in the text of every stored result",
		Long: `Find the lines that match PATTERN (a regular expression, RE2 syntax; with -F
a plain string) in the text parts of the stored results: loose, packed or in
an object store alike. Each line prints as KEY:LINE:text, the key in place of
a file name; a line longer than --width is cut around its match, the cut
marked. The newest version of each key is searched unless --all-versions.

The store's search index rules out the results that cannot match without
reading them. Results stored since it was last brought up to date are read in
full; when they are more than 8 MiB and the store can be written, grep brings
the index up to date first (pack does too).

Exit status: 0 when a line matched, 1 when none did, 2 on an error (a bad
pattern, a result that could not be read: the others are still searched).`,
		Example: `  casctl grep -- '--- FAIL'
  casctl grep -i -F 'PANIC(' --run demo-1
  casctl grep 'func .*Panic' --tool read_file --since 2h -c
  casctl grep -l TestParse --json | jq -r .key`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("grep needs one PATTERN, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGrep(cmd.Context(), g, args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.run, "run", "", "only this run")
	f.StringVar(&o.tool, "tool", "", "only this tool")
	f.Var(durationFlag{&o.since}, "since", "only parts stored in this last while (90m, 2h, 7d)")
	f.BoolVarP(&o.ignoreCase, "ignore-case", "i", false, "match letters in any case")
	f.BoolVarP(&o.fixed, "fixed-strings", "F", false, "PATTERN is a plain string, not a regular expression")
	f.BoolVarP(&o.filesWithMatches, "files-with-matches", "l", false, "print only the keys of the parts that match")
	f.BoolVarP(&o.count, "count", "c", false, "print each matching part's key and its number of matching lines")
	f.IntVarP(&o.maxCount, "max-count", "m", 0, "at most this many matching lines of each part (0: all)")
	f.IntVar(&o.width, "width", defaultGrepWidth, "cut lines to about this many bytes around the match (0: whole lines)")
	f.BoolVar(&o.allVersions, "all-versions", false, "search every version of each key, printed KEY@N (as casctl get takes it)")
	f.BoolVar(&o.noIndex, "no-index", false, "read every part, as if the store had no search index")
	f.BoolVar(&o.json, "json", false, "print one JSON object a line: each match (or key), then a summary")
	completeRunsAndTools(g, cmd)
	return cmd
}

// grepError is an error grep reports with exit status 2, as grep does.
type grepError struct{ err error }

func (e grepError) Error() string { return e.err.Error() }
func (e grepError) Unwrap() error { return e.err }

// grepMatchJSON is a matching line as scripts see it; the field names are a
// contract.
type grepMatchJSON struct {
	Type    string `json:"type"` // "match", or "key" with -l, "count" with -c
	Key     string `json:"key"`
	Run     string `json:"run"`
	Version int    `json:"version"`
	Line    int64  `json:"line,omitempty"`
	Text    string `json:"text,omitempty"`
	Cut     bool   `json:"cut,omitempty"`
	Count   int64  `json:"count,omitempty"`
}

// grepSummaryJSON ends grep's JSON output.
type grepSummaryJSON struct {
	Type    string   `json:"type"` // "summary"
	Matched int64    `json:"matched_parts"`
	Lines   int64    `json:"matched_lines"`
	Blobs   int64    `json:"blobs_read"`
	Bytes   int64    `json:"bytes_read"`
	Lag     int64    `json:"unindexed_blobs_read"`
	Indexed bool     `json:"indexed"`
	Failed  []string `json:"failed,omitempty"`
	Seconds float64  `json:"seconds"`
}

func runGrep(ctx context.Context, g *globals, pattern string, o grepOptions) error {
	if o.maxCount < 0 || o.width < 0 {
		return usagef("grep: --max-count and --width take a number from 0")
	}
	if o.filesWithMatches && o.count {
		return usagef("grep: -l and -c ask for different outputs: give one")
	}
	pat := search.Pattern{Expr: pattern, Fixed: o.fixed, IgnoreCase: o.ignoreCase}
	if _, err := search.Compile(pat); err != nil {
		return grepError{fmt.Errorf("grep: %w", err)}
	}
	// A search allocates a few dozen megabytes at most, most of it short
	// lived: collecting less often saved 7 to 12 % of a selective search's
	// time in a process of its own (the collector's work, and the page
	// faults and wakeups of its workers), for a heap a little larger. A
	// GOGC the user set is left as it is.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(grepGCPercent))
	}
	s, err := g.openWritable(ctx, store.WithMappedIndex(grepMappedIndex))
	if err != nil {
		return grepError{fail("grep", err)}
	}
	defer s.Close()
	if err := checkNames(ctx, s, o.run, o.tool); err != nil {
		return grepError{fail("grep", err)}
	}
	start := time.Now()
	if !o.noIndex {
		if _, lag, err := s.SearchLag(ctx); err == nil && lag > grepCatchUp && !s.ReadOnly() {
			if _, err := s.IndexSearch(ctx); err != nil && ctx.Err() == nil {
				fmt.Fprintf(g.stderr, "casctl: grep: the search index was not brought up to date (%v); searching without it\n", err)
			}
		}
	}
	gopts := store.GrepOptions{Pattern: pat, Run: o.run, Tool: o.tool, AllVersions: o.allVersions,
		MaxCount: o.maxCount, Width: o.width, NoIndex: o.noIndex}
	if o.filesWithMatches {
		gopts.MaxCount = 1
	}
	if o.since > 0 {
		gopts.Since = time.Now().Add(-o.since)
	}
	w := bufio.NewWriter(ctxWriter{ctx, g.stdout})
	p := grepPrinter{w: w, o: o, enc: json.NewEncoder(w)}
	p.enc.SetEscapeHTML(false)
	res, err := s.Grep(ctx, gopts, p.hit)
	if err == nil {
		err = p.flush()
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		if ctx.Err() != nil {
			return interruptedError{fmt.Sprintf("grep: interrupted after %s", count(int(res.Lines), "matching line"))}
		}
		if errors.Is(err, search.ErrPattern) {
			return grepError{fmt.Errorf("grep: %w", err)}
		}
		return grepError{fail("grep", err)}
	}
	var failed []string
	for _, f := range res.Failed {
		failed = append(failed, f.Part.Key)
		fmt.Fprintf(g.stderr, "casctl: grep: %s: %v\n", f.Part.Key, f.Err)
	}
	if o.json {
		p.enc.Encode(grepSummaryJSON{Type: "summary", Matched: res.Matched, Lines: res.Lines, Blobs: res.Blobs,
			Bytes: res.Bytes, Lag: res.Lag, Indexed: res.Indexed, Failed: failed, Seconds: time.Since(start).Seconds()})
		if err := w.Flush(); err != nil {
			return grepError{fail("grep", err)}
		}
	}
	switch {
	case len(res.Failed) > 0:
		return grepError{fmt.Errorf("grep: %s could not be read: run casctl verify", count(len(res.Failed), "part"))}
	case res.Lines == 0:
		return quietError{}
	}
	return nil
}

// grepPrinter prints hits as grep does, one part at a time for -c.
type grepPrinter struct {
	w   *bufio.Writer
	o   grepOptions
	enc *json.Encoder
	// cur and n are the part -c is counting and its count so far.
	cur *store.Part
	n   int64
}

func (p *grepPrinter) key(pt store.Part) string {
	if p.o.allVersions {
		return pt.Key + "@" + strconv.Itoa(pt.Version)
	}
	return pt.Key
}

func (p *grepPrinter) hit(h store.GrepHit) error {
	switch {
	case p.o.count:
		if p.cur != nil && p.cur.ID != h.Part.ID {
			if err := p.flush(); err != nil {
				return err
			}
		}
		pt := h.Part
		p.cur = &pt
		p.n++
		return nil
	case p.o.filesWithMatches:
		if p.o.json {
			return p.enc.Encode(grepMatchJSON{Type: "key", Key: h.Part.Key, Run: h.Part.Run, Version: h.Part.Version})
		}
		_, err := fmt.Fprintln(p.w, p.key(h.Part))
		return err
	case p.o.json:
		return p.enc.Encode(grepMatchJSON{Type: "match", Key: h.Part.Key, Run: h.Part.Run, Version: h.Part.Version,
			Line: h.Line, Text: h.Text, Cut: h.Cut})
	}
	p.w.WriteString(p.key(h.Part))
	p.w.WriteByte(':')
	p.w.WriteString(strconv.FormatInt(h.Line, 10))
	p.w.WriteByte(':')
	p.w.WriteString(h.Text)
	return p.w.WriteByte('\n')
}

// flush prints the count of the part -c was counting.
func (p *grepPrinter) flush() error {
	if p.cur == nil {
		return nil
	}
	pt, n := *p.cur, p.n
	p.cur, p.n = nil, 0
	if p.o.json {
		return p.enc.Encode(grepMatchJSON{Type: "count", Key: pt.Key, Run: pt.Run, Version: pt.Version, Count: n})
	}
	_, err := fmt.Fprintf(p.w, "%s:%d\n", p.key(pt), n)
	return err
}
