package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/cancel"
	"github.com/toolcas/toolcas/internal/option"
	"github.com/toolcas/toolcas/store"
)

// Offloaded parts are MCP resources under this scheme:
// toolcas://RUN/REST for the part whose key is RUN/REST.
const (
	Scheme              = "toolcas"
	ResourceURITemplate = "toolcas://{run}/{key}"
)

// ErrBadURI is returned by KeyOfURI for a URI that names no part.
var ErrBadURI = errors.New("not a toolcas:// URI of a part")

// ResourceURI returns the resource URI of the part a key names.
func ResourceURI(key string) string {
	run, rest, ok := strings.Cut(key, "/")
	if !ok {
		return Scheme + "://" + url.PathEscape(key)
	}
	return Scheme + "://" + url.PathEscape(run) + "/" + url.PathEscape(rest)
}

// KeyOfURI returns the key a resource URI names.
func KeyOfURI(uri string) (string, error) {
	rest, ok := strings.CutPrefix(uri, Scheme+"://")
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrBadURI, uri)
	}
	run, name, ok := strings.Cut(rest, "/")
	if !ok || run == "" || name == "" {
		return "", fmt.Errorf("%w: %q (want toolcas://RUN/KEY)", ErrBadURI, uri)
	}
	r, err1 := url.PathUnescape(run)
	n, err2 := url.PathUnescape(name)
	if err := errors.Join(err1, err2); err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrBadURI, uri, err)
	}
	return r + "/" + n, nil
}

// resourceTemplate describes the toolcas:// resources.
func resourceTemplate() *sdk.ResourceTemplate {
	return &sdk.ResourceTemplate{
		Name:        "toolcas-part",
		Title:       "Offloaded tool result part",
		URITemplate: ResourceURITemplate,
		Description: "One part of a tool result that toolcas offloaded from the conversation, by the key its pointer gives " +
			"(key 'RUN/STEP_TOOL_CALL.EXT' is toolcas://RUN/STEP_TOOL_CALL.EXT). Text comes back as text, anything else as a blob.",
	}
}

// resolver is what a store that can name a reference's key offers
// (store.Store does).
type resolver interface {
	Resolve(ctx context.Context, run, ref string) (store.Part, error)
}

// DefaultMaxResourceBytes is the most bytes of a part that resources/read
// returns unless told (WithMaxResourceBytes).
const DefaultMaxResourceBytes = 1 << 20

// reader reads offloaded parts back, as the read-back tool and as
// resources.
type reader struct {
	store hook.Store
	tool  *hook.ReadTool
	// maxResource is the most bytes of a part a resource read returns.
	maxResource int64
}

func newReader(st hook.Store, opts ...hook.Option) (*reader, error) {
	t, err := hook.NewReadTool(st, opts...)
	if err != nil {
		return nil, err
	}
	return &reader{store: st, tool: t, maxResource: DefaultMaxResourceBytes}, nil
}

// Bounds of WithMaxResourceBytes: the least leaves room for a page and the
// note saying how to read on.
const (
	minResourceBytes = 4 << 10
	maxResourceBytes = 1 << 30
)

// WithMaxResourceBytes bounds what resources/read of a toolcas:// part
// returns, and what it holds in memory (default DefaultMaxResourceBytes,
// at least 4 KiB). A larger text comes back as its first lines within the
// bound and a note saying how to read on with the read-back tool; larger
// binary content as a note saying its size and how to get it. For NewProxy
// and NewStoreServer alike.
func WithMaxResourceBytes(n int64) Option {
	return option.Check(minResourceBytes <= n && n <= maxResourceBytes, func(o *options) { o.maxResource = n },
		"mcp: a resource limit of %d bytes: want %d to %d", n, minResourceBytes, maxResourceBytes)
}

// limitResources sets the most bytes of a part a resource read returns;
// 0 keeps the default.
func (r *reader) limitResources(n int64) {
	if n > 0 {
		r.maxResource = n
	}
}

// toolDef is the read-back tool as an MCP tool, under name.
func (r *reader) toolDef(name string) *sdk.Tool {
	return &sdk.Tool{
		Name:        name,
		Title:       "Read an offloaded tool result",
		Description: r.tool.Description() + " Every part is also the resource toolcas://RUN/KEY.",
		InputSchema: r.tool.Parameters(),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)},
	}
}

// call runs the read-back tool for run. Its result is never offloaded.
func (r *reader) call(ctx context.Context, run string, args json.RawMessage) *sdk.CallToolResult {
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	res := r.tool.Call(ctx, run, "", args)
	uri := ""
	if !res.Error {
		var a hook.ReadArgs
		if json.Unmarshal(args, &a) == nil {
			uri = ResourceURI(r.keyOf(ctx, run, a.Ref))
		}
	}
	return &sdk.CallToolResult{Content: contentOf(res.Parts, uri), IsError: res.Error}
}

// keyOf returns the key a reference resolves to, or the reference itself
// when the store cannot say.
func (r *reader) keyOf(ctx context.Context, run, ref string) string {
	if rs, ok := r.store.(resolver); ok {
		if p, err := rs.Resolve(ctx, run, ref); err == nil {
			return p.Key
		}
	}
	return ref
}

// readResource serves resources/read of a toolcas:// URI, seeing only run
// when it is set, as readResourceFor does for the read-back tool under its
// usual name.
func (r *reader) readResource(ctx context.Context, run, uri string) (*sdk.ReadResourceResult, error) {
	return r.readResourceFor(ctx, run, uri, ReadToolName)
}

// readResourceFor serves resources/read of a toolcas:// URI, seeing only
// run when it is set. A part within the reader's limit comes back whole:
// text as text, anything else as a blob. A larger one never does, and the
// read holds no more than the limit of it: a text comes back as its first
// page of whole lines, with a note saying how to read on with the
// read-back tool (named tool); anything else as a note saying its size and
// how to get it. The whole part is still read through, so that its bytes
// are checked against its digest before any of them is returned.
func (r *reader) readResourceFor(ctx context.Context, run, uri, tool string) (*sdk.ReadResourceResult, error) {
	key, err := KeyOfURI(uri)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	c, body, err := openPart(ctx, r.store, run, key)
	if errors.Is(err, hook.ErrNotFound) || errors.Is(err, hook.ErrRefused) {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, fmt.Errorf("toolcas: read %s: %w", key, err)
	}
	defer body.Close()
	rc := &sdk.ResourceContents{URI: uri, MIMEType: mimeOf(c.Kind, c.MIME)}
	if c.Size <= r.maxResource {
		data := make([]byte, c.Size)
		if err := readThrough(ctx, body, data, nil); err != nil {
			return nil, fmt.Errorf("toolcas: read %s: %w", key, err)
		}
		if c.Kind == hook.KindText && utf8.Valid(data) && len(data) > 0 {
			rc.Text = string(data)
		} else {
			// An empty text goes as an empty blob: the protocol has no way to
			// send an empty text.
			rc.Blob = data
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{rc}}, nil
	}
	rc.Meta = sdk.Meta{"toolcas/size": c.Size, "toolcas/truncated": true}
	if c.Kind == hook.KindText {
		if page, err := r.textPage(ctx, c, body, tool); err != nil {
			return nil, fmt.Errorf("toolcas: read %s: %w", key, err)
		} else if page != "" {
			rc.Text = page
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{rc}}, nil
		}
	}
	// Binary content, or text that is not UTF-8: no byte of it, only what it
	// is and how to get it.
	rc.Meta["toolcas/mimeType"] = rc.MIMEType
	rc.MIMEType = "text/plain"
	how := fmt.Sprintf("get it whole with: casctl get %s --output FILE", c.Key)
	if c.Size <= hook.MaxReadBinary && c.Kind != hook.KindText {
		how = fmt.Sprintf("read it with the tool %s {\"ref\": %q}, or %s", tool, c.Key, how)
	}
	rc.Text = fmt.Sprintf("[toolcas: %s is %d bytes of %s, more than the %d bytes resources/read returns; %s]",
		c.Key, c.Size, or(c.MIME, "binary content"), r.maxResource, how)
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{rc}}, nil
}

// textPage returns the first page of a text larger than the reader's
// limit: whole lines, the last of them cut on a character only when the
// first line alone is over the limit, and a note saying how to read on.
// It reads the rest of the text through, counting its lines. It returns ""
// for a text that is not UTF-8, having read nothing past the page.
func (r *reader) textPage(ctx context.Context, c *hook.Content, body io.Reader, tool string) (string, error) {
	// The note, with a key of the longest, fits in what the limit leaves.
	const noteRoom = 2 << 10
	buf := make([]byte, max(r.maxResource-noteRoom-int64(len(c.Key)), 1<<10))
	if _, err := io.ReadFull(body, buf); err != nil {
		return "", err
	}
	page, lines, cut := buf, 0, false
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		page = buf[:i+1]
		lines = bytes.Count(page, []byte{'\n'})
	} else {
		cut = true
		// End on a whole character.
		for i := len(page) - 1; i >= 0 && i >= len(page)-utf8.UTFMax; i-- {
			if utf8.RuneStart(page[i]) {
				if !utf8.FullRune(page[i:]) {
					page = page[:i]
				}
				break
			}
		}
	}
	if !utf8.Valid(page) {
		return "", nil
	}
	// The rest: read through, to count its lines and have the store check
	// the whole against its digest.
	lc := lineCounter{last: buf[len(buf)-1]}
	lc.n = int64(bytes.Count(buf, []byte{'\n'}))
	if err := readThrough(ctx, body, nil, &lc); err != nil {
		return "", err
	}
	total := lc.n
	if lc.last != '\n' {
		total++
	}
	var b strings.Builder
	b.Grow(len(page) + 512)
	b.Write(page)
	if cut {
		b.WriteByte('\n')
		fmt.Fprintf(&b, "[toolcas: the first %d bytes of line 1 of %s, which holds %d lines in %d bytes; resources/read returns at most %d bytes. "+
			"Read on with the tool %s {\"ref\": %q, \"byte_offset\": %d}: it returns a page of at most %d bytes, and says where the next begins]",
			len(page), c.Key, total, c.Size, r.maxResource, tool, c.Key, len(page), r.tool.MaxBytes())
	} else {
		fmt.Fprintf(&b, "[toolcas: lines 1-%d of the %d lines of %s (%d of %d bytes); resources/read returns at most %d bytes. "+
			"Read on with the tool %s {\"ref\": %q, \"offset\": %d}: it returns a page of at most %d bytes; page on with offset and limit, "+
			"or find lines with pattern]", lines, total, c.Key, len(page), c.Size, r.maxResource, tool, c.Key, lines, r.tool.MaxBytes())
	}
	return b.String(), nil
}

// lineCounter counts the line breaks written to it, and keeps the last
// byte.
type lineCounter struct {
	n    int64
	last byte
}

func (l *lineCounter) Write(p []byte) (int, error) {
	l.n += int64(bytes.Count(p, []byte{'\n'}))
	if len(p) > 0 {
		l.last = p[len(p)-1]
	}
	return len(p), nil
}

// readThrough reads r into buf, which must be the rest of it when rest is
// nil, or else copies what follows to rest; and reads to the end, where a
// store's reader checks the bytes against their digest.
func readThrough(ctx context.Context, r io.Reader, buf []byte, rest io.Writer) error {
	if _, err := io.ReadFull(r, buf); err != nil {
		return err
	}
	if rest == nil {
		rest = io.Discard
	}
	n, err := io.Copy(rest, cancel.NewReader(ctx, r))
	if err != nil {
		return err
	}
	if n > 0 && rest == io.Discard {
		return errors.New("the part holds more bytes than its size")
	}
	return nil
}

// openPart opens a part to read it as a stream: a store that cannot
// stream is read whole.
func openPart(ctx context.Context, st hook.Store, run, ref string) (*hook.Content, io.ReadCloser, error) {
	if ss, ok := st.(hook.StreamStore); ok {
		return ss.OpenRead(ctx, run, ref)
	}
	c, err := st.Read(ctx, run, ref)
	if err != nil {
		return nil, nil, err
	}
	cc := *c
	cc.Size = int64(len(c.Data))
	cc.Data = nil
	return &cc, io.NopCloser(bytes.NewReader(c.Data)), nil
}

// anyRun is a store whose reads are not scoped to a run, for a server that
// reads back for every run of a store.
type anyRun struct{ hook.Store }

func (a anyRun) Read(ctx context.Context, _ string, ref string) (*hook.Content, error) {
	return a.Store.Read(ctx, "", ref)
}

// OpenRead streams a part for the read-back tool, so that it reads in
// bounded memory; a store that cannot stream is read whole.
func (a anyRun) OpenRead(ctx context.Context, _ string, ref string) (*hook.Content, io.ReadCloser, error) {
	if ss, ok := a.Store.(hook.StreamStore); ok {
		return ss.OpenRead(ctx, "", ref)
	}
	c, err := a.Store.Read(ctx, "", ref)
	if err != nil {
		return nil, nil, err
	}
	cc := *c
	cc.Size = int64(len(c.Data))
	if cc.Kind == hook.KindText && !cc.IsText() {
		cc.Kind = hook.KindFile
	}
	return &cc, io.NopCloser(bytes.NewReader(c.Data)), nil
}

// Search refuses: a search shows one run's parts, and this server has no
// run of its own to search.
func (a anyRun) Search(context.Context, string, hook.SearchQuery, func(hook.SearchHit) error) error {
	return fmt.Errorf("%w: this server reads every run of the store, and a search looks in one run only: "+
		"serve one run (casctl mcp serve --run RUN) to search it, or read a part by its ref", hook.ErrCannotSearch)
}

func (a anyRun) Resolve(ctx context.Context, _ string, ref string) (store.Part, error) {
	if rs, ok := a.Store.(resolver); ok {
		return rs.Resolve(ctx, "", ref)
	}
	return store.Part{}, hook.ErrNotFound
}
