package hook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/itchyny/gojq"

	"github.com/toolcas/toolcas/cas"
)

// ReadToolName is the name the read-back tool is registered under by
// default.
const ReadToolName = "read_tool_result"

// Paging limits of the read-back tool, in lines.
const (
	DefaultReadLimit = 200
	MaxReadLimit     = 2000
)

// Budgets of one read-back call.
const (
	// DefaultReadBytes is how many bytes of text one call returns at most:
	// lines past it wait for the next page, and a line longer than it is
	// cut, with a marker saying how to read on.
	DefaultReadBytes = 32 << 10
	// DefaultReadTimeout bounds how long one call may search.
	DefaultReadTimeout = 10 * time.Second
	// MaxReadBinary is the largest image or file the tool returns. A larger
	// one is not read at all: the tool says its size and how to get it, so
	// that a call's memory stays within a page whatever the part's size.
	MaxReadBinary = 4 << 20
)

// ReadArgs are the read-back tool's parameters.
type ReadArgs struct {
	// Ref is a key, path or digest from a pointer. Empty, with Pattern, it
	// searches every text part of the run.
	Ref string `json:"ref"`
	// Offset is how many lines (with Pattern, matching lines; in a search,
	// hits) to skip.
	Offset int `json:"offset,omitempty"`
	// Limit is how many lines (in a search, hits) to return,
	// DefaultReadLimit (DefaultSearchLimit) when 0.
	Limit int `json:"limit,omitempty"`
	// Pattern, when set, is a regular expression (RE2 syntax): only matching
	// lines are returned, with their line numbers.
	Pattern string `json:"pattern,omitempty"`
	// IgnoreCase matches Pattern's letters in any case.
	IgnoreCase bool `json:"ignore_case,omitempty"`
	// Fixed takes Pattern as plain text, not a regular expression.
	Fixed bool `json:"fixed,omitempty"`
	// Tool, in a search, searches only the parts of that tool's results.
	Tool string `json:"tool,omitempty"`
	// ByteOffset starts the first line returned at this byte of it, to read
	// on in a line that a page cut short.
	ByteOffset int64 `json:"byte_offset,omitempty"`
	// Query, when set, is a jq query (gojq's dialect) run on the JSON the
	// part holds (on each value in turn, for JSON lines); its results, one
	// per line as compact JSON, are what Offset, Limit, Pattern and
	// ByteOffset then page through and filter.
	Query string `json:"query,omitempty"`
}

// ReadTool is the tool an agent calls to read an offloaded result back. It
// pages through text by lines, filters lines by a pattern, runs jq queries
// on JSON (paging through their results as lines), returns images
// and files as bytes with their MIME type, searches every text part of its
// run when given a pattern and no reference (through a Searcher), and sees
// nothing outside its run. Its own results are never offloaded again.
type ReadTool struct {
	store    Store
	name     string
	maxBytes int
	timeout  time.Duration
}

// NewReadTool returns a read-back tool over store; nil means the store the
// context carries (WithStore).
func NewReadTool(store Store, opts ...Option) (*ReadTool, error) {
	st := settings{forReadTool: true, readTool: ReadToolName, maxBytes: DefaultReadBytes, timeout: DefaultReadTimeout}
	if err := st.apply(opts); err != nil {
		return nil, err
	}
	return &ReadTool{store: store, name: st.readTool, maxBytes: st.maxBytes, timeout: st.timeout}, nil
}

// WithReadMaxBytes sets how many bytes of text one call of the read tool
// returns at most (default DefaultReadBytes); at least 1024.
func WithReadMaxBytes(n int) Option {
	return func(s *settings) error {
		if n < 1024 || n > 64<<20 {
			return fmt.Errorf("read tool byte budget %d out of range 1024..%d", n, 64<<20)
		}
		s.maxBytes = n
		return s.only("WithReadMaxBytes", true)
	}
}

// WithReadTimeout sets how long one call of the read tool may search
// (default DefaultReadTimeout), unless the caller's context ends sooner.
func WithReadTimeout(d time.Duration) Option {
	return func(s *settings) error {
		if d <= 0 {
			return fmt.Errorf("read tool timeout %v: want a positive duration", d)
		}
		s.timeout = d
		return s.only("WithReadTimeout", true)
	}
}

// Name returns the tool's name.
func (t *ReadTool) Name() string { return t.name }

// MaxBytes returns the most bytes of text one call returns.
func (t *ReadTool) MaxBytes() int { return t.maxBytes }

// Schema returns the tool's definition for function calling: name,
// description and JSON Schema of its parameters, ready to register with any
// LLM API.
func (t *ReadTool) Schema() json.RawMessage {
	b, _ := json.MarshalIndent(map[string]any{
		"name": t.name, "description": t.Description(), "parameters": json.RawMessage(t.Parameters()),
	}, "", "  ")
	return b
}

// Description tells the model what the tool does, as Schema does: how to
// read a result its pointer names, and when to search instead.
func (t *ReadTool) Description() string {
	return "Read back a tool result that was offloaded from the conversation, or search all of this run's offloaded results. " +
		"To read one: give the key or path from its pointer ('Tool result offloaded to ...') as ref. " +
		"Text comes back as numbered lines, a page at a time: use offset and limit to page, " +
		"and pattern to get only the lines matching a regular expression. " +
		"A page holds at most " + strconv.Itoa(t.maxBytes) + " bytes: a longer line is cut, and the page says how to read on with byte_offset. " +
		"Images and files come back as they are, with their MIME type. " +
		"For JSON, when the pointer shows its shape ('JSON shape: ...'), use query (jq syntax, as '.items[] | {id, name}' or '.items | length') " +
		"to fetch only the values you need: each result comes back as one line of compact JSON, paged like text (pattern then filters those lines). " +
		"To search: when you need something an earlier result held (an error, a name, an id) but not which result, " +
		"leave ref out and give pattern: every offloaded text of this run is searched (the newest version of each), " +
		"and matching lines come back as KEY:LINE:text, " + strconv.Itoa(DefaultSearchLimit) + " hits a page (offset and limit count hits), " +
		"each cut to about " + strconv.Itoa(SearchWidth) + " bytes around its match; tool narrows the search to one tool's results. " +
		"Then read the part a hit names with ref. ignore_case and fixed (pattern as plain text) apply to reads and searches."
}

// Parameters returns the JSON Schema of the tool's arguments, as Schema
// does, for a framework that takes a tool's parts apart. No argument is
// required: without ref, the tool searches.
func (t *ReadTool) Parameters() json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"ref":         param("string", "The key (run/step_tool_call.ext) or path from the pointer, or blake3:<digest>. Leave it out, and give pattern, to search every offloaded text of this run."),
			"offset":      integerParam("Lines to skip (matching lines, with pattern; hits, when searching). Default 0.", 0),
			"limit":       integerParam(fmt.Sprintf("Lines to return (hits, when searching). Default %d (%d hits).", DefaultReadLimit, DefaultSearchLimit), 1, MaxReadLimit),
			"pattern":     param("string", "Regular expression (RE2); only matching lines are returned, with their numbers. Without ref, the search: every offloaded text of this run, as KEY:LINE:text."),
			"ignore_case": param("boolean", "Match pattern's letters in any case. Default false."),
			"fixed":       param("boolean", "Take pattern as plain text, not a regular expression. Default false."),
			"tool":        param("string", "When searching (no ref): only the results of this tool."),
			"byte_offset": integerParam("Start the first line returned at this byte of it, to read on in a line a page cut short. Default 0.", 0),
			"query": param("string", fmt.Sprintf("jq query run on the JSON the result holds (each value in turn, for JSON lines), as '.items[] | select(.price > 10) | .id'; "+
				"its results come back one per line as compact JSON, paged with offset and limit and filtered by pattern. Parts up to %d MiB. Needs ref.", MaxQueryBytes>>20)),
		},
		"additionalProperties": false,
	})
	return b
}

// param is the JSON Schema of one argument of the tool.
func param(typ, description string) map[string]any {
	return map[string]any{"type": typ, "description": description}
}

// integerParam is the JSON Schema of an integer argument of at least
// minimum, and at most maximum when one is given.
func integerParam(description string, minimum int, maximum ...int) map[string]any {
	p := param("integer", description)
	p["minimum"] = minimum
	if len(maximum) > 0 {
		p["maximum"] = maximum[0]
	}
	return p
}

// Call runs the tool on the JSON arguments a model sent, as a function-call
// handler does. It always returns a result: a failure is an error result
// whose text says what was wrong, for the model to read.
func (t *ReadTool) Call(ctx context.Context, run, callID string, args json.RawMessage) Result {
	var a ReadArgs
	d := json.NewDecoder(bytes.NewReader(args))
	d.DisallowUnknownFields()
	if err := d.Decode(&a); err != nil {
		return t.failure(callID, args, fmt.Errorf("arguments are not {\"ref\": ..., \"offset\": ..., \"limit\": ..., \"pattern\": ..., \"ignore_case\": ..., \"fixed\": ..., \"tool\": ..., \"byte_offset\": ..., \"query\": ...}: %v", err))
	}
	r, err := t.Read(ctx, run, a)
	if err != nil {
		return t.failure(callID, args, err)
	}
	r.CallID, r.Arguments = callID, args
	return r
}

func (t *ReadTool) failure(callID string, args json.RawMessage, err error) Result {
	return Result{Tool: t.name, CallID: callID, Arguments: args, Error: true, Parts: []Part{Text(err.Error())}}
}

// Read reads a reference as the tool does. Errors say what was wrong: a bad
// argument, a reference not found in the run, a reference outside the store,
// a pattern that cannot be used (ErrBadPattern), a query that does not
// parse (ErrQuerySyntax), a part a query cannot read (ErrNotJSON,
// ErrPartTooLarge), a query that fails (ErrQueryFailed).
// Text is read as a stream, line by line, from stores that can
// (StreamStore): memory stays within a page whatever the part's size.
//
// With no reference and a pattern, Read searches every text part of run
// (DefaultRun when empty), the newest version of each, through the store's
// Searcher (ErrCannotSearch when it has none): a page of hits, each a
// KEY:LINE:text line cut to about SearchWidth bytes, within the byte budget
// and the tool's timeout. A search never shows another run's parts.
func (t *ReadTool) Read(ctx context.Context, run string, a ReadArgs) (Result, error) {
	if a.Offset < 0 {
		return Result{}, fmt.Errorf("read: offset %d is negative", a.Offset)
	}
	if a.ByteOffset < 0 {
		return Result{}, fmt.Errorf("read: byte_offset %d is negative", a.ByteOffset)
	}
	if a.Limit < 0 || a.Limit > MaxReadLimit {
		return Result{}, fmt.Errorf("read: limit %d out of range 1..%d", a.Limit, MaxReadLimit)
	}
	if a.Pattern == "" && (a.Fixed || a.IgnoreCase) {
		return Result{}, errors.New("read: fixed and ignore_case apply to a pattern, and none was given")
	}
	if a.Ref == "" {
		return t.search(ctx, run, a)
	}
	if a.Tool != "" {
		return Result{}, fmt.Errorf("read: tool %q narrows a search, which has no ref; ref names one part already", clip(a.Tool))
	}
	if a.Limit == 0 {
		a.Limit = DefaultReadLimit
	}
	var re *regexp.Regexp
	if a.Pattern != "" {
		var err error
		if re, err = CompilePattern(patternExpr(a)); err != nil {
			return Result{}, fmt.Errorf("read: pattern %q: %w: %w", clip(a.Pattern), ErrBadPattern, err)
		}
	}
	var code *gojq.Code
	if a.Query != "" {
		var err error
		if code, err = CompileQuery(a.Query); err != nil {
			return Result{}, fmt.Errorf("read: %w", err)
		}
	}
	store := t.storeFor(ctx)
	if store == nil {
		return Result{}, errors.New("read: no store")
	}
	if run == "" {
		run = DefaultRun
	}
	var (
		c    *Content
		text io.ReadCloser
		err  error
	)
	if ss, ok := store.(StreamStore); ok {
		c, text, err = ss.OpenRead(ctx, run, a.Ref)
		if err == nil && c.Kind != KindText {
			// Binary content is read from the stream it came in, once its
			// size is known to be within the limit: never a second time,
			// never more than its size.
			if c.Size > MaxReadBinary {
				text.Close()
				return Result{}, tooLarge(a.Ref, c.Key, c.MIME, c.Size)
			}
			c.Data, err = readExactly(ctx, c.Key, text, c.Size)
			text.Close()
			text = nil
		}
	} else {
		c, err = store.Read(ctx, run, a.Ref)
		if err == nil && c.IsText() && c.Kind == KindText {
			text = io.NopCloser(bytes.NewReader(c.Data))
		} else if err == nil && len(c.Data) > MaxReadBinary {
			return Result{}, tooLarge(a.Ref, c.Key, c.MIME, int64(len(c.Data)))
		}
	}
	if err != nil {
		// Every store's error names the reference already.
		return Result{}, fmt.Errorf("read: %w", err)
	}
	r := Result{Tool: t.name}
	if text == nil {
		if code != nil {
			return Result{}, fmt.Errorf("read %s: %w: %s is %d bytes of binary content (%s); query applies to JSON text only", a.Ref, ErrNotJSON, c.Key, len(c.Data), or(c.MIME, "no MIME type"))
		}
		if re != nil || a.Offset > 0 || a.ByteOffset > 0 {
			return Result{}, fmt.Errorf("read %s: %s is %d bytes of binary content; offset, byte_offset and pattern apply to text only", a.Ref, or(c.MIME, "it"), len(c.Data))
		}
		head := fmt.Sprintf("[%s: %s, %d bytes of binary content]", keyLabel(c), or(c.MIME, "application/octet-stream"), len(c.Data))
		p := File(c.MIME, c.Filename, c.Data)
		if c.Kind == KindImage {
			p = Image(c.MIME, c.Data)
		}
		r.Parts = []Part{Text(head), p}
		return r, nil
	}
	defer text.Close()
	label, lines := keyLabel(c), io.Reader(text)
	if code != nil {
		size := c.Size
		if c.Data != nil {
			size = int64(len(c.Data))
		}
		data, err := readQueryInput(ctx, c.Key, text, size)
		if err != nil {
			return Result{}, fmt.Errorf("read %s: %w", a.Ref, err)
		}
		qctx, cancel := context.WithTimeout(ctx, t.timeout)
		defer cancel()
		label, lines = fmt.Sprintf("%s, query %q", keyLabel(c), clip(a.Query)), newQueryOutput(qctx, code, data)
	}
	page, err := t.page(ctx, label, lines, a, re, code != nil)
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %w", a.Ref, err)
	}
	r.Parts = []Part{Text(page)}
	return r, nil
}

// storeFor returns the store a call reads: the tool's, else the one the
// context carries.
func (t *ReadTool) storeFor(ctx context.Context) Store {
	if t.store != nil {
		return t.store
	}
	return StoreFrom(ctx)
}

// tooLarge is the error of binary content larger than the tool returns.
func tooLarge(ref, key, mime string, size int64) error {
	return fmt.Errorf("read %s: %s is %d bytes of %s, more than the %d bytes the tool returns; "+
		"get it whole with: casctl get %s --output FILE", ref, key, size, or(mime, "binary content"), MaxReadBinary, key)
}

// readExactly reads all of r, the part key of size bytes, into one buffer
// of that size, and on to the end, where a store's reader checks the bytes
// against their digest.
func readExactly(ctx context.Context, key string, r io.Reader, size int64) ([]byte, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	n, err := cas.CopyContext(ctx, io.Discard, r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if n > 0 {
		return nil, fmt.Errorf("%s: the part holds more than its %d bytes", key, size)
	}
	return data, nil
}

// page renders the requested lines of a text read from r, numbered from 1,
// under a header saying which lines of how many. It reads the whole text
// (to count its lines, and so that the store checks its digest) but keeps
// only the page: at most the byte budget, a line longer than that cut with a
// marker saying how to read on.
//
// With query set, r is a query's output, which stops with the context's
// error when the query runs out of time; the text it ran on has been read
// and checked already.
func (t *ReadTool) page(ctx context.Context, key string, r io.Reader, a ReadArgs, re *regexp.Regexp, query bool) (string, error) {
	sctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	headCap := t.maxBytes
	if re != nil {
		headCap = max(headCap, MatchWindow)
	}
	lr := NewLineReader(sctx, r, headCap)
	// The header (key, counts, how to read on) comes out of the budget too.
	budget := max(t.maxBytes-384-len(key), 256)
	var (
		body          strings.Builder
		total         int  // lines read
		matched       int  // lines selected (all, without a pattern)
		printed       int  // lines shown, whole or cut
		full          bool // the page is done: more lines are only counted
		next          = -1 // where the next page starts, when the budget ended this one
		cutNote       string
		budgetStopped bool
		pos, shownEnd int64 // bytes of the text read, and up to the end of what is shown
		stopped       error // what stopped a match
	)
	for lr.Next() {
		total++
		lineStart := pos
		selected := true
		if re != nil {
			ok, err := MatchLine(sctx, re, lr.Head())
			if err != nil {
				stopped = err
				break
			}
			selected = ok
		}
		if selected {
			idx := matched
			matched++
			if idx >= a.Offset && !full {
				num := strconv.Itoa(lr.Num()) + "\t"
				start := int64(0)
				if printed == 0 {
					start = a.ByteOffset
				}
				if head := lr.Head(); lr.Whole() {
					// Begin on a character, as a cut line's marker does.
					for start < int64(len(head)) && !utf8.RuneStart(head[start]) {
						start++
					}
				}
				room := budget - body.Len() - len(num) - 1
				switch {
				case lr.Whole() && start > int64(len(lr.Head())):
					return "", fmt.Errorf("byte_offset %d is past the end of line %d (%d bytes)", start, lr.Num(), len(lr.Head()))
				case lr.Whole() && int64(len(lr.Head()))-start <= int64(room):
					body.WriteString(num)
					body.Write(lr.Head()[start:])
					body.WriteByte('\n')
					printed++
					shownEnd = lineStart + int64(len(lr.Head())) + 1
				case printed > 0:
					full, budgetStopped, next = true, true, idx
				default:
					// The first line of the page does not fit: show what
					// fits, and say how to read on.
					const marker = 160
					win, skip, err := lineWindow(lr, start, max(room-marker, 64))
					if err != nil {
						break
					}
					length := lr.Len()
					if start > length {
						return "", fmt.Errorf("byte_offset %d is past the end of line %d (%d bytes)", start, lr.Num(), length)
					}
					from := start + int64(skip)
					end := from + int64(len(win))
					body.WriteString(num)
					body.Write(win)
					printed++
					shownEnd = lineStart + end
					if end < length {
						cutNote = fmt.Sprintf("line %d cut at byte %d of %d; read on with offset=%d byte_offset=%d", lr.Num(), end, length, idx, end)
						fmt.Fprintf(&body, "\n[%s]\n", cutNote)
						full, budgetStopped = true, true
					} else {
						body.WriteByte('\n')
						shownEnd = lineStart + length + 1
					}
				}
				if printed == a.Limit {
					full = true
				}
			}
		}
		pos += lr.Len() + 1
	}
	err := lr.Err()
	if err == nil {
		err = stopped
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return "", err
		}
		// The search ran out of time: the bytes shown must still be
		// checked, so read the rest without searching.
		search := "search"
		switch {
		case query && printed == 0:
			return "", fmt.Errorf("the query took longer than %v (stopped after %d lines of output): ask for less (.items[:100], first(...), limit(n; ...)) or use a simpler query", t.timeout, total)
		case printed == 0:
			return "", fmt.Errorf("searching took longer than %v (stopped at line %d): use a simpler pattern, or page with offset", t.timeout, total)
		case query:
			search = "query"
		default:
			if _, err := cas.CopyContext(ctx, io.Discard, r); err != nil {
				return "", err
			}
		}
		var b strings.Builder
		what := "lines"
		if re != nil {
			what = "matches"
		}
		fmt.Fprintf(&b, "[%s: %s %d-%d; the %s stopped at its %v time limit after %d lines (%d matching); more may follow with offset=%d]\n",
			key, what, a.Offset+1, a.Offset+printed, search, t.timeout, total, matched, a.Offset+printed)
		b.WriteString(body.String())
		return strings.TrimSuffix(b.String(), "\n"), nil
	}
	from := min(a.Offset, matched)
	to := from + printed
	var b strings.Builder
	switch {
	case re != nil && matched == 0:
		fmt.Fprintf(&b, "[%s: no line of %d matches %q]\n", key, total, clip(a.Pattern))
	case re != nil:
		fmt.Fprintf(&b, "[%s: matches %d-%d of %d lines matching %q, of %d lines", key, from+1, to, matched, clip(a.Pattern), total)
	case total == 0:
		fmt.Fprintf(&b, "[%s: empty]\n", key)
	default:
		fmt.Fprintf(&b, "[%s: lines %d-%d of %d", key, from+1, to, total)
	}
	if matched > 0 {
		if budgetStopped {
			fmt.Fprintf(&b, "; the %d-byte page is full, %d bytes of the text follow", t.maxBytes, max(pos-1-shownEnd, 0))
		}
		switch {
		case cutNote != "":
			fmt.Fprintf(&b, "; %s]\n", cutNote)
		case next >= 0:
			fmt.Fprintf(&b, "; more with offset=%d]\n", next)
		case to < matched:
			fmt.Fprintf(&b, "; more with offset=%d]\n", to)
		default:
			b.WriteString("]\n")
		}
	}
	b.WriteString(body.String())
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// lineWindow returns up to n bytes of the current line from byte start,
// trimmed to whole UTF-8 characters, and how many bytes it skipped at its
// start to begin on a character.
func lineWindow(lr *LineReader, start int64, n int) ([]byte, int, error) {
	head := lr.Head()
	var win []byte
	if start < int64(len(head)) {
		win = append(win, head[start:min(int64(len(head)), start+int64(n))]...)
	} else if skip := start - int64(len(head)); skip > 0 {
		if _, err := io.CopyN(io.Discard, lr.Rest(), skip); err != nil && err != io.EOF {
			return nil, 0, err
		}
	}
	if len(win) < n {
		more := make([]byte, n-len(win))
		k, err := io.ReadFull(lr.Rest(), more)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return nil, 0, err
		}
		win = append(win, more[:k]...)
	}
	skipped := 0
	for skipped < len(win) && !utf8.RuneStart(win[skipped]) {
		skipped++
	}
	win = win[skipped:]
	// Drop a character cut in two at the end.
	for i := len(win) - 1; i >= 0 && i >= len(win)-utf8.UTFMax; i-- {
		if utf8.RuneStart(win[i]) {
			if !utf8.FullRune(win[i:]) {
				win = win[:i]
			}
			break
		}
	}
	return win, skipped, nil
}

func randomName() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// keyLabel names a part read back in the read tool's headers: its key, and
// for a packed part, that its path names no file, so that the agent reads
// it here rather than with a file tool.
func keyLabel(c *Content) string {
	if c.Packed == "" {
		return c.Key
	}
	return fmt.Sprintf("%s (packed in %s: no file at its path, read it with this tool)", c.Key, c.Packed)
}
