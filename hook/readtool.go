package hook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ReadToolName is the name the read-back tool is registered under by
// default.
const ReadToolName = "read_tool_result"

// Paging limits of the read-back tool, in lines.
const (
	DefaultReadLimit = 200
	MaxReadLimit     = 2000
)

// ReadArgs are the read-back tool's parameters.
type ReadArgs struct {
	// Ref is a key, path or digest from a pointer.
	Ref string `json:"ref"`
	// Offset is how many lines (or, with Pattern, matching lines) to skip.
	Offset int `json:"offset,omitempty"`
	// Limit is how many lines to return, DefaultReadLimit when 0.
	Limit int `json:"limit,omitempty"`
	// Pattern, when set, is a regular expression (RE2 syntax): only matching
	// lines are returned, with their line numbers.
	Pattern string `json:"pattern,omitempty"`
}

// ReadTool is the tool an agent calls to read an offloaded result back. It
// pages through text by lines, filters lines by a pattern, returns images
// and files as bytes with their MIME type, and sees nothing outside its run.
// Its own results are never offloaded again.
type ReadTool struct {
	store Store
	name  string
}

// NewReadTool returns a read-back tool over store; nil means the store the
// context carries (WithStore).
func NewReadTool(store Store, opts ...ReadToolOption) (*ReadTool, error) {
	t := &ReadTool{store: store, name: ReadToolName}
	for _, o := range opts {
		if err := o(t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// A ReadToolOption configures NewReadTool.
type ReadToolOption func(*ReadTool) error

// ReadToolNamed registers the tool under another name; give the hook the
// same name with WithReadToolName.
func ReadToolNamed(name string) ReadToolOption {
	return func(t *ReadTool) error {
		if name == "" {
			return errors.New("hook: empty read tool name")
		}
		t.name = name
		return nil
	}
}

// Name returns the tool's name.
func (t *ReadTool) Name() string { return t.name }

// Schema returns the tool's definition for function calling: name,
// description and JSON Schema of its parameters, ready to register with any
// LLM API.
func (t *ReadTool) Schema() json.RawMessage {
	schema := map[string]any{
		"name": t.name,
		"description": "Read back a tool result that was offloaded from the conversation. " +
			"Give the key or path from the pointer ('Tool result offloaded to ...'). " +
			"Text comes back as numbered lines, a page at a time: use offset and limit to page, " +
			"and pattern to get only the lines matching a regular expression. " +
			"Images and files come back as they are, with their MIME type.",
		"parameters": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"ref": map[string]any{
					"type":        "string",
					"description": "The key (run/step_tool_call.ext) or path from the pointer, or blake3:<digest>.",
				},
				"offset": map[string]any{
					"type": "integer", "minimum": 0,
					"description": "Lines to skip (matching lines, with pattern). Default 0.",
				},
				"limit": map[string]any{
					"type": "integer", "minimum": 1, "maximum": MaxReadLimit,
					"description": fmt.Sprintf("Lines to return. Default %d.", DefaultReadLimit),
				},
				"pattern": map[string]any{
					"type":        "string",
					"description": "Regular expression (RE2); only matching lines are returned, with their numbers.",
				},
			},
			"required":             []string{"ref"},
			"additionalProperties": false,
		},
	}
	b, _ := json.MarshalIndent(schema, "", "  ")
	return b
}

// Call runs the tool on the JSON arguments a model sent, as a function-call
// handler does. It always returns a result: a failure is an error result
// whose text says what was wrong, for the model to read.
func (t *ReadTool) Call(ctx context.Context, run, callID string, args json.RawMessage) Result {
	var a ReadArgs
	d := json.NewDecoder(bytes.NewReader(args))
	d.DisallowUnknownFields()
	if err := d.Decode(&a); err != nil {
		return t.failure(callID, args, fmt.Errorf("arguments are not {\"ref\": ..., \"offset\": ..., \"limit\": ..., \"pattern\": ...}: %v", err))
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
// argument, a reference not found in the run, a reference outside the store.
func (t *ReadTool) Read(ctx context.Context, run string, a ReadArgs) (Result, error) {
	if a.Ref == "" {
		return Result{}, errors.New("read: no ref: give the key or path from the pointer")
	}
	if a.Offset < 0 {
		return Result{}, fmt.Errorf("read: offset %d is negative", a.Offset)
	}
	if a.Limit < 0 || a.Limit > MaxReadLimit {
		return Result{}, fmt.Errorf("read: limit %d out of range 1..%d", a.Limit, MaxReadLimit)
	}
	if a.Limit == 0 {
		a.Limit = DefaultReadLimit
	}
	var re *regexp.Regexp
	if a.Pattern != "" {
		var err error
		if re, err = regexp.Compile(a.Pattern); err != nil {
			return Result{}, fmt.Errorf("read: pattern %q: %v", a.Pattern, err)
		}
	}
	store := t.store
	if store == nil {
		store = StoreFrom(ctx)
	}
	if store == nil {
		return Result{}, errors.New("read: no store")
	}
	if run == "" {
		run = DefaultRun
	}
	c, err := store.Read(ctx, run, a.Ref)
	if err != nil {
		// Every store's error names the reference already.
		return Result{}, fmt.Errorf("read: %w", err)
	}
	r := Result{Tool: t.name}
	if !c.IsText() || c.Kind != KindText {
		if re != nil || a.Offset > 0 {
			return Result{}, fmt.Errorf("read %s: %s is %d bytes of binary content; offset and pattern apply to text only", a.Ref, or(c.MIME, "it"), len(c.Data))
		}
		head := fmt.Sprintf("[%s: %s, %d bytes of binary content]", c.Key, or(c.MIME, "application/octet-stream"), len(c.Data))
		p := File(c.MIME, c.Filename, c.Data)
		if c.Kind == KindImage {
			p = Image(c.MIME, c.Data)
		}
		r.Parts = []Part{Text(head), p}
		return r, nil
	}
	r.Parts = []Part{Text(page(c, a, re))}
	return r, nil
}

// page renders the requested lines of a text, numbered from 1, under a
// header saying which lines of how many.
func page(c *Content, a ReadArgs, re *regexp.Regexp) string {
	text := string(c.Data)
	lines := strings.SplitAfter(text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	total := len(lines)
	type numbered struct {
		n    int
		line string
	}
	var sel []numbered
	for i, l := range lines {
		if re == nil || re.MatchString(strings.TrimSuffix(l, "\n")) {
			sel = append(sel, numbered{i + 1, l})
		}
	}
	matched := len(sel)
	from := min(a.Offset, matched)
	to := min(from+a.Limit, matched)
	var b strings.Builder
	switch {
	case re != nil && matched == 0:
		fmt.Fprintf(&b, "[%s: no line of %d matches %q]\n", c.Key, total, a.Pattern)
	case re != nil:
		fmt.Fprintf(&b, "[%s: matches %d-%d of %d lines matching %q, of %d lines", c.Key, from+1, to, matched, a.Pattern, total)
	case total == 0:
		fmt.Fprintf(&b, "[%s: empty]\n", c.Key)
	default:
		fmt.Fprintf(&b, "[%s: lines %d-%d of %d", c.Key, from+1, to, total)
	}
	if matched > 0 {
		if to < matched {
			fmt.Fprintf(&b, "; more with offset=%d]\n", to)
		} else {
			b.WriteString("]\n")
		}
	}
	for _, s := range sel[from:to] {
		fmt.Fprintf(&b, "%d\t%s", s.n, s.line)
		if !strings.HasSuffix(s.line, "\n") {
			b.WriteByte('\n')
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func randomName() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
