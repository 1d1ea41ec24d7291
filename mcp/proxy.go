package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// Version is the version the proxy and the store server announce.
const Version = "0.1.0"

// ReadToolName is the read-back tool's name, unless the upstream already
// has a tool of that name; then the proxy picks toolcas_read_tool_result,
// and after it the first free toolcas_read_tool_result_N.
const ReadToolName = hook.ReadToolName

// Proxy is an MCP server in front of one upstream MCP server. It mirrors
// the upstream's tools, prompts and resources, forwards every call to it
// (with its progress notifications and cancellation), and sends every tool
// result through the offload hook, so that the client gets a pointer for a
// large one. It adds the read-back tool and serves offloaded parts as
// toolcas:// resources. Each client session is a run; the step is the
// session's count of tool calls.
//
// One upstream connection serves every client session. When the upstream
// goes away, calls fail with an error naming it and saying how it ended, and
// the next call that needs it starts it again.
type Proxy struct {
	up      Upstream
	store   hook.Store
	hook    *hook.Hook
	rd      *reader
	server  *sdk.Server
	client  *sdk.Client
	log     *slog.Logger
	run     string
	timeout time.Duration
	links   bool
	now     func() time.Time

	connectMu sync.Mutex // one connection attempt at a time

	mu        sync.Mutex
	conn      *upstreamConn
	downWhy   string            // why the upstream is not connected, once it has failed
	tools     map[string]string // mirrored tool name -> its JSON, to see changes
	prompts   map[string]string
	resources map[string]string
	templates map[string]string
	readName  string
	sessions  map[*sdk.ServerSession]*session
	progress  map[string]progressRoute
	closed    bool

	nextToken atomic.Int64
}

// session is what the proxy keeps about one client session.
type session struct {
	run string
	// callID, set when sessions share a run (WithRun), is the call id of
	// the session's results: the session's part of their keys, so that two
	// sessions' calls of one step never share a key, and a pointer reads
	// back what it was written for.
	callID string
	calls  atomic.Int64
}

// next counts a tool call and returns its step.
func (s *session) next() int { return int(s.calls.Add(1)) }

// An Option configures NewProxy or NewStoreServer. An option that one of
// them has no use for is an error there.
type Option func(*options) error

// options are what the options say.
type options struct {
	// server is set for NewStoreServer, which takes WithRun only.
	server  bool
	hook    *hook.Hook
	run     string
	timeout time.Duration
	log     *slog.Logger
	links   bool
}

// apply applies opts to o, refusing an option that has no use for the
// server when o is a server's.
func (o *options) apply(opts []Option) error {
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return err
		}
	}
	return nil
}

// proxyOnly is the error of an option that only NewProxy takes, given to
// NewStoreServer.
func (o *options) proxyOnly(name string) error {
	if o.server {
		return fmt.Errorf("mcp: %s configures NewProxy, not NewStoreServer", name)
	}
	return nil
}

// WithHook sets the hook that decides what the proxy offloads (its
// policies and preview). Its store is not used: the proxy writes to its
// own. The default offloads any result over DefaultThreshold characters.
func WithHook(h *hook.Hook) Option {
	return func(o *options) error {
		if h == nil {
			return errors.New("mcp: nil hook")
		}
		o.hook = h
		return o.proxyOnly("WithHook")
	}
}

// WithStrategies sets the proxy's offload policies (see ParseOffload).
func WithStrategies(s *policy.Strategies) Option {
	return func(o *options) error {
		h, err := hook.New(nil, s)
		if err != nil {
			return fmt.Errorf("mcp: %w", err)
		}
		o.hook = h
		return o.proxyOnly("WithStrategies")
	}
}

// WithRun names the one run the proxy's client sessions all write to,
// instead of a run of each session's own (NewRunName); or, for a store
// server, the one run it reads, lists and counts.
func WithRun(run string) Option {
	return func(o *options) error {
		if err := hook.CheckRun(run); err != nil {
			return fmt.Errorf("mcp: run: %w", err)
		}
		o.run = run
		return nil
	}
}

// WithCallTimeout bounds how long the upstream has to answer a call; past
// it the call is cancelled upstream and the client gets an error. Zero (the
// default) means no bound beyond the client's own.
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("mcp: negative call timeout %s", d)
		}
		o.timeout = d
		return o.proxyOnly("WithCallTimeout")
	}
}

// WithLogger sets where the proxy says what goes wrong (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errors.New("mcp: nil logger")
		}
		o.log = l
		return o.proxyOnly("WithLogger")
	}
}

// WithResourceLinks sets whether a pointer carries, after its text, a
// resource link to each offloaded part (default true).
func WithResourceLinks(on bool) Option {
	return func(o *options) error {
		o.links = on
		return o.proxyOnly("WithResourceLinks")
	}
}

// NewProxy returns a proxy in front of up, offloading to st. It connects
// to the upstream once; if that fails the proxy still serves (the read-back
// tool and the resources), logs why, and every call that needs the upstream
// tries again and, failing, says why.
func NewProxy(ctx context.Context, up Upstream, st hook.Store, opts ...Option) (*Proxy, error) {
	if up == nil {
		return nil, errors.New("mcp: no upstream")
	}
	if st == nil {
		return nil, errors.New("mcp: no store")
	}
	o := options{log: slog.Default(), links: true}
	if err := o.apply(opts); err != nil {
		return nil, err
	}
	p := &Proxy{
		up: up, store: st, hook: o.hook, run: o.run, timeout: o.timeout, log: o.log, links: o.links, now: time.Now,
		tools: map[string]string{}, prompts: map[string]string{}, resources: map[string]string{}, templates: map[string]string{},
		sessions: map[*sdk.ServerSession]*session{}, progress: map[string]progressRoute{},
	}
	if p.hook == nil {
		s, _ := ParseOffload(nil)
		p.hook, _ = hook.New(nil, s)
	}
	rd, err := newReader(st)
	if err != nil {
		return nil, err
	}
	p.rd = rd
	p.client = sdk.NewClient(&sdk.Implementation{Name: "toolcas-proxy", Version: Version}, &sdk.ClientOptions{
		Capabilities:               &sdk.ClientCapabilities{},
		ToolListChangedHandler:     func(_ context.Context, r *sdk.ToolListChangedRequest) { go p.resync(r.Session, p.syncTools) },
		PromptListChangedHandler:   func(_ context.Context, r *sdk.PromptListChangedRequest) { go p.resync(r.Session, p.syncPrompts) },
		ResourceListChangedHandler: func(_ context.Context, r *sdk.ResourceListChangedRequest) { go p.resync(r.Session, p.syncResources) },
		ResourceUpdatedHandler: func(ctx context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
			p.server.ResourceUpdated(ctx, r.Params)
		},
		ProgressNotificationHandler: p.onProgress,
	})
	p.server = sdk.NewServer(&sdk.Implementation{Name: "toolcas-proxy", Title: "toolcas proxy in front of " + up.String(), Version: Version},
		&sdk.ServerOptions{
			Capabilities: &sdk.ServerCapabilities{
				Tools:     &sdk.ToolCapabilities{ListChanged: true},
				Prompts:   &sdk.PromptCapabilities{ListChanged: true},
				Resources: &sdk.ResourceCapabilities{ListChanged: true, Subscribe: true},
			},
			InitializedHandler: func(_ context.Context, r *sdk.InitializedRequest) { p.sessionFor(r.Session) },
			SubscribeHandler:   p.subscribe,
			UnsubscribeHandler: p.unsubscribe,
			Logger:             slog.New(atLeast{p.log.Handler(), slog.LevelWarn}),
		})
	p.server.AddReceivingMiddleware(p.middleware)
	p.server.AddResourceTemplate(resourceTemplate(), func(ctx context.Context, r *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return p.rd.readResource(ctx, p.sessionFor(r.Session).run, r.Params.URI)
	})
	p.setReadTool(ReadToolName)
	if _, err := p.upstream(ctx); err != nil {
		p.log.Error(err.Error())
	}
	return p, nil
}

// Server returns the MCP server, to serve over any transport.
func (p *Proxy) Server() *sdk.Server { return p.server }

// Run serves one client over t (stdio, say) until the client goes or ctx
// ends, then closes the proxy, ending the upstream.
func (p *Proxy) Run(ctx context.Context, t sdk.Transport) error {
	defer p.Close()
	err := p.server.Run(ctx, t)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Handler returns an http.Handler serving the proxy over MCP's streamable
// HTTP transport, one run per client session.
func (p *Proxy) Handler() http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return p.server }, nil)
}

// Close ends the upstream connection and its process. It returns once the
// process is gone.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	uc := p.conn
	p.conn = nil
	p.mu.Unlock()
	if uc == nil {
		return nil
	}
	uc.cs.Close()
	<-uc.down
	return nil
}

// UpstreamPid returns the process id of the upstream when the proxy runs
// it and it is running, else 0.
func (p *Proxy) UpstreamPid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil || p.conn.child == nil {
		return 0
	}
	return p.conn.child.Pid()
}

// ReadToolName returns the name the read-back tool has now.
func (p *Proxy) ReadToolName() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.readName
}

// sessionFor returns the state of a client session, making it on first use.
func (p *Proxy) sessionFor(ss *sdk.ServerSession) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.sessions[ss]; ok {
		return s
	}
	s := &session{run: p.run}
	if s.run == "" {
		s.run = NewRunName(p.now())
	} else {
		s.callID = sessionID()
	}
	p.sessions[ss] = s
	if ss != nil {
		go func() {
			ss.Wait()
			p.mu.Lock()
			delete(p.sessions, ss)
			p.mu.Unlock()
		}()
	}
	p.log.Info("toolcas: client session offloads to run " + s.run)
	return s
}

// sessionID returns a new session's part of the keys of a run that
// sessions share: s and 8 random hex digits.
func sessionID() string {
	var b [4]byte
	rand.Read(b[:])
	return "s" + hex.EncodeToString(b[:])
}

// middleware routes what the mirrored features cannot: reads of upstream
// resources (whatever their URI), and calls of tools the upstream has not
// listed yet (the upstream may be down, or may have been restarted).
func (p *Proxy) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		switch method {
		case "resources/read":
			r := req.(*sdk.ReadResourceRequest)
			if strings.HasPrefix(r.Params.URI, Scheme+"://") {
				return next(ctx, method, req)
			}
			return p.readUpstreamResource(ctx, r)
		case "tools/call":
			r := req.(*sdk.CallToolRequest)
			if !p.knows(r.Params.Name) {
				if _, err := p.upstream(ctx); err != nil {
					return nil, err
				}
			}
		}
		return next(ctx, method, req)
	}
}

func (p *Proxy) knows(tool string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.tools[tool]
	return ok || tool == p.readName
}

// upstream returns the live upstream connection, connecting when there is
// none.
func (p *Proxy) upstream(ctx context.Context) (*upstreamConn, error) {
	p.mu.Lock()
	uc := p.conn
	p.mu.Unlock()
	if uc != nil && !uc.isDown() {
		return uc, nil
	}
	p.connectMu.Lock()
	defer p.connectMu.Unlock()
	p.mu.Lock()
	uc, closed := p.conn, p.closed
	p.mu.Unlock()
	if closed {
		return nil, p.errorf("is not connected: the proxy is shutting down")
	}
	if uc != nil && !uc.isDown() {
		return uc, nil
	}
	uc, err := p.connect(ctx)
	if err != nil {
		p.mu.Lock()
		p.downWhy = err.Error()
		p.mu.Unlock()
		return nil, err
	}
	return uc, nil
}

// connect starts (or reaches) the upstream, initializes a session with it
// and mirrors its features.
func (p *Proxy) connect(ctx context.Context) (*upstreamConn, error) {
	t, ch, err := p.up.open(ctx)
	if err != nil {
		return nil, p.errorf("did not start: %v", err)
	}
	if u, ok := p.up.(*URL); ok {
		t = &sdk.StreamableClientTransport{Endpoint: u.Endpoint, HTTPClient: tapClient(u.Client, p), MaxRetries: 1}
	} else {
		t = &orderedTransport{Transport: t, p: p}
	}
	cs, err := p.client.Connect(ctx, t, nil)
	if err != nil {
		why := err.Error()
		if ch != nil {
			ch.wait(time.Second)
			why = fmt.Sprintf("%v (it %s)", err, ch.describe())
			ch.stop()
		}
		return nil, p.errorf("did not start an MCP session: %s", why)
	}
	uc := &upstreamConn{cs: cs, child: ch, down: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		cs.Close()
		if ch != nil {
			ch.stop()
		}
		return nil, p.errorf("is not connected: the proxy is shutting down")
	}
	p.conn = uc
	p.mu.Unlock()
	go uc.watch(p.onDown)
	caps := cs.InitializeResult().Capabilities
	if caps == nil {
		caps = &sdk.ServerCapabilities{}
	}
	var errs []error
	if caps.Tools != nil {
		errs = append(errs, p.syncTools(ctx, cs))
	}
	if caps.Prompts != nil {
		errs = append(errs, p.syncPrompts(ctx, cs))
	}
	if caps.Resources != nil {
		errs = append(errs, p.syncResources(ctx, cs))
	}
	if err := errors.Join(errs...); err != nil {
		p.log.Warn(p.errorf("could not be mirrored in full: %v", err).Error())
	}
	return uc, nil
}

// onDown forgets a connection that ended.
func (p *Proxy) onDown(uc *upstreamConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == uc {
		p.conn = nil
		if !p.closed {
			p.downWhy = uc.why
			p.log.Warn(fmt.Sprintf("toolcas: upstream %s %s", p.up, uc.why))
		}
	}
}

// resync runs a mirror update after a list_changed notification, if it
// came from the live connection.
func (p *Proxy) resync(cs *sdk.ClientSession, sync func(context.Context, *sdk.ClientSession) error) {
	p.mu.Lock()
	live := p.conn != nil && p.conn.cs == cs
	p.mu.Unlock()
	if !live {
		return
	}
	if err := sync(context.Background(), cs); err != nil {
		p.log.Warn(p.errorf("could not be mirrored: %v", err).Error())
	}
}

// errorf returns an error naming the upstream.
func (p *Proxy) errorf(format string, args ...any) error {
	return fmt.Errorf("toolcas: upstream %s "+format, append([]any{p.up}, args...)...)
}

// forwardMeta returns the _meta of a request to pass upstream: all of it
// but the keys the SDK itself sets (io.modelcontextprotocol/*), which
// servers of older protocol versions refuse, and the progress token, which
// the proxy replaces with its own.
func forwardMeta(m sdk.Meta) sdk.Meta {
	var out sdk.Meta
	for k, v := range m {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") || k == "progressToken" {
			continue
		}
		if out == nil {
			out = sdk.Meta{}
		}
		out[k] = v
	}
	return out
}

// callTool forwards a tool call upstream and offloads its result.
func (p *Proxy) callTool(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	s := p.sessionFor(req.Session)
	step := s.next()
	name := req.Params.Name
	what := fmt.Sprintf("tools/call %q", name)
	uc, err := p.upstream(ctx)
	if err != nil {
		return nil, err
	}
	params := &sdk.CallToolParams{Meta: forwardMeta(req.Params.Meta), Name: name}
	if len(req.Params.Arguments) > 0 {
		params.Arguments = req.Params.Arguments
	}
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		up := fmt.Sprintf("toolcas-%d", p.nextToken.Add(1))
		route := progressRoute{ss: req.Session, token: tok, done: make(chan struct{}, 1), partial: new(atomic.Bool),
			tapped: new(atomic.Int64), handled: new(atomic.Int64)}
		p.mu.Lock()
		p.progress[up] = route
		p.mu.Unlock()
		defer func() {
			route.settle()
			p.mu.Lock()
			delete(p.progress, up)
			p.mu.Unlock()
		}()
		params.SetProgressToken(up)
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if p.timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, p.timeout)
	}
	defer cancel()
	res, err := uc.cs.CallTool(cctx, params)
	if err != nil {
		return nil, p.callError(ctx, cctx, uc, what, err)
	}
	return p.offload(ctx, s, step, name, req.Params.Arguments, res), nil
}

// callError turns a failed upstream call into the error the client gets:
// the upstream's own error as it sent it, or what happened to the upstream.
func (p *Proxy) callError(ctx, cctx context.Context, uc *upstreamConn, what string, err error) error {
	var werr *jsonrpc.Error
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case cctx.Err() != nil:
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: p.errorf("did not answer %s within %s: the call was cancelled", what, p.timeout).Error()}
	case errors.As(err, &werr):
		return &jsonrpc.Error{Code: werr.Code, Message: p.errorf("answered %s with an error: %s", what, werr.Message).Error(), Data: werr.Data}
	case errors.Is(err, sdk.ErrConnectionClosed) || uc.isDown() || !uc.alive(ctx):
		// The connection is gone (the upstream died, or sent what is not
		// JSON-RPC): say how, once the watcher knows.
		t := time.NewTimer(5 * time.Second)
		defer t.Stop()
		select {
		case <-uc.down:
			return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: p.errorf("%s during %s", uc.why, what).Error()}
		case <-t.C:
		}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: p.errorf("answered %s with something that is not a valid result: %v", what, err).Error()}
}

// offload sends a result through the hook. An error result, a result with
// nothing to store, and a result the policy keeps pass untouched;
// structured content always does. If the store fails, the client gets the
// result as it came, and the failure is logged: losing a tool's answer
// would be worse than a long one.
func (p *Proxy) offload(ctx context.Context, s *session, step int, tool string, args json.RawMessage, res *sdk.CallToolResult) *sdk.CallToolResult {
	if res.IsError {
		return res
	}
	parts, kept := splitContent(res.Content)
	if len(parts) == 0 {
		return res
	}
	r := hook.Result{Tool: tool, CallID: s.callID, Arguments: args, Parts: parts}
	out, err := p.hook.Offload(hook.WithStore(ctx, p.store), hook.Step{Run: s.run, Number: step}, []hook.Result{r})
	if err != nil {
		p.log.Error(fmt.Sprintf("toolcas: %s: result of %s left in the conversation: %v", s.run, tool, err))
		return res
	}
	if !hook.IsPointer(out[0]) {
		return res
	}
	refs := hook.References(out[0])
	content := []sdk.Content{&sdk.TextContent{Text: out[0].Parts[0].Text}}
	meta := maps.Clone(res.Meta)
	if meta == nil {
		meta = sdk.Meta{}
	}
	recs := make([]map[string]any, len(refs))
	for i, ref := range refs {
		uri := ResourceURI(ref.Key)
		recs[i] = map[string]any{"key": ref.Key, "path": ref.Path, "digest": ref.Digest, "uri": uri}
		if p.links && i < len(parts) {
			size := int64(len(parts[i].Data))
			if parts[i].Kind == hook.KindText {
				size = int64(len(parts[i].Text))
			}
			content = append(content, &sdk.ResourceLink{URI: uri, Name: ref.Key, MIMEType: mimeOf(parts[i].Kind, parts[i].MIME), Size: &size,
				Description: "offloaded part; read it with the read-back tool or resources/read"})
		}
	}
	meta[hook.MetaKey] = recs
	content = append(content, kept...)
	return &sdk.CallToolResult{Meta: meta, Content: content, StructuredContent: res.StructuredContent}
}

// atLeast passes on only records at or above a level: the SDK logs every
// session's connection at Info, which says nothing to a proxy's user.
type atLeast struct {
	slog.Handler
	min slog.Level
}

func (a atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= a.min && a.Handler.Enabled(ctx, l)
}

func (a atLeast) WithAttrs(attrs []slog.Attr) slog.Handler {
	return atLeast{a.Handler.WithAttrs(attrs), a.min}
}

func (a atLeast) WithGroup(name string) slog.Handler {
	return atLeast{a.Handler.WithGroup(name), a.min}
}
