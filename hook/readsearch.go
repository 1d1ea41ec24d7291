package hook

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolcas/toolcas/search"
)

// The read-back tool's search: a call with a pattern and no ref looks for
// the pattern in every text part of the caller's run, for the agent that
// no longer knows which step held what it needs.

// Search pages of the read-back tool.
const (
	// DefaultSearchLimit is how many hits a page of a search holds unless
	// limit says otherwise.
	DefaultSearchLimit = 50
	// SearchWidth is about how many bytes of a matching line a hit shows,
	// around its match: a longer line is cut, and the cut marked.
	SearchWidth = 240
)

var (
	// ErrCannotSearch is returned by ReadTool.Read for a search (a pattern
	// and no ref) over a store that is not a Searcher.
	ErrCannotSearch = errors.New("store cannot search")
)

// errPageFull stops a search once its page is full and one more hit has
// shown that more follow.
var errPageFull = errors.New("page full")

// errOtherRun stops a search whose store reported a part of another run.
var errOtherRun = errors.New("hit of another run")

// searchFooter ends a page of hits, saying how to read on.
const searchFooter = "[hits are KEY:LINE:text; [… N bytes] marks where a long line was cut. " +
	"Read a hit's part with ref=KEY and offset=LINE-1 (its lines from the hit's), or ref=KEY and the same pattern (all its matching lines)]"

// searchHead is the most bytes of a page's header besides what describes
// the search.
const searchHead = 200

// maxSearchDesc is the most bytes of the header's description of the
// search (run, pattern, options).
const maxSearchDesc = 320

// search runs a read without a ref: a search of run's text parts for the
// pattern, a page of hits as KEY:LINE:text lines within the byte budget.
func (t *ReadTool) search(ctx context.Context, run string, a ReadArgs) (Result, error) {
	switch {
	case a.Query != "":
		return Result{}, errors.New("read: query needs a ref: a jq query runs on one JSON part; " +
			"to find the part, search the run with pattern (no ref), then query the part a hit names")
	case a.Pattern == "":
		return Result{}, errors.New("read: no ref: give the key or path from the pointer to read a part, " +
			"or leave ref out and give a pattern to search every offloaded text of this run")
	case a.ByteOffset != 0:
		return Result{}, errors.New("read: byte_offset needs a ref: it reads on in a line of one part")
	}
	if a.Limit == 0 {
		a.Limit = DefaultSearchLimit
	}
	if _, err := search.Compile(search.Pattern{Expr: a.Pattern, Fixed: a.Fixed, IgnoreCase: a.IgnoreCase}); err != nil {
		return Result{}, fmt.Errorf("read: search: pattern %q: %w", clip(a.Pattern), err)
	}
	if !a.Fixed {
		// The cost of a regular expression is bounded as for a read of one
		// part: a search may read many.
		if _, err := CompilePattern(patternExpr(a)); err != nil {
			return Result{}, fmt.Errorf("read: search: pattern %q: %w: %w", clip(a.Pattern), ErrBadPattern, err)
		}
	}
	st := t.storeFor(ctx)
	if st == nil {
		return Result{}, errors.New("read: no store")
	}
	s, ok := st.(Searcher)
	if !ok {
		return Result{}, fmt.Errorf("read: search: %w: this store can only read a part by its ref (the key or path from its pointer)", ErrCannotSearch)
	}
	if run == "" {
		run = DefaultRun
	}
	desc := searchDesc(run, a)
	budget := t.maxBytes - len(desc) - searchHead - len(searchFooter)
	prefix := EscapeRun(run) + "/"
	var (
		body    strings.Builder
		seen    int  // hits the store reported
		printed int  // hits on the page
		more    bool // a hit follows the page
		full    bool // the byte budget ended the page
		leaked  string
	)
	sctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	q := SearchQuery{Pattern: a.Pattern, Fixed: a.Fixed, IgnoreCase: a.IgnoreCase, Tool: a.Tool, Width: SearchWidth}
	err := s.Search(sctx, run, q, func(h SearchHit) error {
		if !strings.HasPrefix(h.Key, prefix) {
			leaked = h.Key
			return errOtherRun
		}
		idx := seen
		seen++
		if idx < a.Offset {
			return nil
		}
		if printed == a.Limit {
			more = true
			return errPageFull
		}
		text := h.Text
		if len(text) > 2*SearchWidth {
			// A store that ignored the width.
			text, _ = search.Cut([]byte(text), 0, SearchWidth)
		}
		line := h.Key + ":" + strconv.FormatInt(h.Line, 10) + ":" + text + "\n"
		if body.Len()+len(line) > budget {
			if printed > 0 {
				more, full = true, true
				return errPageFull
			}
			line = cutLine(line, budget)
		}
		body.WriteString(line)
		printed++
		return nil
	})
	timedOut := false
	switch {
	case err == nil || errors.Is(err, errPageFull):
	case errors.Is(err, errOtherRun):
		return Result{}, fmt.Errorf("read: search: %w: the store reported key %q, which is not of run %s", ErrRefused, clip(leaked), clip(run))
	case ctx.Err() != nil:
		return Result{}, fmt.Errorf("read: search: %w", ctx.Err())
	case sctx.Err() != nil:
		timedOut = true
	case errors.Is(err, ErrBadPattern):
		return Result{}, fmt.Errorf("read: search: pattern %q: %w", clip(a.Pattern), err)
	case errors.Is(err, ErrRefused), errors.Is(err, ErrCannotSearch):
		// The store's refusal says why.
		return Result{}, fmt.Errorf("read: search: %w", err)
	default:
		return Result{}, fmt.Errorf("read: search run %s: %w", clip(run), err)
	}
	from, to := a.Offset+1, a.Offset+printed
	var b strings.Builder
	switch {
	case timedOut && printed == 0:
		return Result{}, fmt.Errorf("read: search of %s took longer than %v (stopped after %d hits): "+
			"use a more specific pattern, or tool to search one tool's results", desc, t.timeout, seen)
	case timedOut:
		fmt.Fprintf(&b, "[search of %s: hits %d-%d; the search stopped at its %v time limit, more may follow with offset=%d]\n", desc, from, to, t.timeout, to)
	case seen == 0:
		fmt.Fprintf(&b, "[search of %s: no line matches]", desc)
	case printed == 0:
		fmt.Fprintf(&b, "[search of %s: %d hits, none past offset=%d]", desc, seen, a.Offset)
	case full:
		fmt.Fprintf(&b, "[search of %s: hits %d-%d; the %d-byte page is full, more with offset=%d]\n", desc, from, to, t.maxBytes, to)
	case more:
		fmt.Fprintf(&b, "[search of %s: hits %d-%d; more with offset=%d]\n", desc, from, to, to)
	default:
		fmt.Fprintf(&b, "[search of %s: hits %d-%d of %d]\n", desc, from, to, seen)
	}
	if printed > 0 {
		b.WriteString(body.String())
		b.WriteString(searchFooter)
	}
	return Result{Tool: t.name, Parts: []Part{Text(b.String())}}, nil
}

// searchDesc describes a search in a page's header: the run, the pattern
// and the options, within maxSearchDesc bytes.
func searchDesc(run string, a ReadArgs) string {
	d := fmt.Sprintf("run %s for %q", clip(EscapeRun(run)), clip(a.Pattern))
	var opts []string
	if a.IgnoreCase {
		opts = append(opts, "ignore case")
	}
	if a.Fixed {
		opts = append(opts, "fixed")
	}
	if a.Tool != "" {
		opts = append(opts, fmt.Sprintf("tool %q", clip(a.Tool)))
	}
	if len(opts) > 0 {
		d += " (" + strings.Join(opts, ", ") + ")"
	}
	if len(d) > maxSearchDesc {
		cut := maxSearchDesc - len("…")
		for cut > 0 && !utf8.RuneStart(d[cut]) {
			cut--
		}
		d = d[:cut] + "…"
	}
	return d
}

// cutLine cuts a hit's line, its line break included, to at most n bytes,
// between characters, marking the cut.
func cutLine(line string, n int) string {
	const mark = " […]\n"
	if len(line) <= n {
		return line
	}
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut] + mark
}

// patternExpr returns the regular expression a read's pattern stands for,
// with its options.
func patternExpr(a ReadArgs) string {
	expr := a.Pattern
	if a.Fixed {
		expr = regexp.QuoteMeta(expr)
	}
	if a.IgnoreCase {
		expr = "(?i)" + expr
	}
	return expr
}
