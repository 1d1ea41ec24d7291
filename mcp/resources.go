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

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
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

// reader reads offloaded parts back, as the read-back tool and as
// resources.
type reader struct {
	store hook.Store
	tool  *hook.ReadTool
}

func newReader(st hook.Store, opts ...hook.Option) (*reader, error) {
	t, err := hook.NewReadTool(st, opts...)
	if err != nil {
		return nil, err
	}
	return &reader{store: st, tool: t}, nil
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
// when it is set.
func (r *reader) readResource(ctx context.Context, run, uri string) (*sdk.ReadResourceResult, error) {
	key, err := KeyOfURI(uri)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	c, err := r.store.Read(ctx, run, key)
	if errors.Is(err, hook.ErrNotFound) || errors.Is(err, hook.ErrRefused) {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, fmt.Errorf("toolcas: read %s: %w", key, err)
	}
	rc := &sdk.ResourceContents{URI: uri, MIMEType: mimeOf(c.Kind, c.MIME)}
	if c.Kind == hook.KindText && c.IsText() && len(c.Data) > 0 {
		rc.Text = string(c.Data)
	} else {
		// An empty text goes as an empty blob: the protocol has no way to
		// send an empty text.
		rc.Blob = nonNil(c.Data)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{rc}}, nil
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

func (a anyRun) Resolve(ctx context.Context, _ string, ref string) (store.Part, error) {
	if rs, ok := a.Store.(resolver); ok {
		return rs.Resolve(ctx, "", ref)
	}
	return store.Part{}, hook.ErrNotFound
}
