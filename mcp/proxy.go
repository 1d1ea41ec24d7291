package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/option"
	"github.com/toolcas/toolcas/policy"
)

// Version is the version the proxy and the store server announce.
const Version = "0.1.0"

// ReadToolName is the read-back tool's name, unless the upstream already
// has a tool of that name; then the proxy picks toolcas_read_tool_result,
// and after it the first free toolcas_read_tool_result_N.
const ReadToolName = hook.ReadToolName

// Proxy is an MCP server in front of an upstream MCP server, as good as
// invisible: every message passes between a client and the upstream as it
// came (requests of either side, answers, notifications, capabilities,
// pagination), but a tool result the offload policy picks, which the client
// gets as a pointer, with a resource link per part. The proxy adds the
// read-back tool and serves offloaded parts as toolcas:// resources.
//
// Each client session has its own connection to the upstream (its own
// process, for a Command), so that what the upstream asks a client
// (sampling, elicitation, roots) goes to that client, and is a run of its
// own; the step is the session's count of tool calls. When the upstream
// goes away, the session's calls fail with an error naming it and saying
// how it ended, and the session's next request starts it again.
type Proxy struct {
	up         Upstream
	store      hook.Store
	hook       *hook.Hook
	rd         *reader
	log        *slog.Logger
	run        string
	timeout    time.Duration
	links      bool
	maxMessage int64
	spoolDir   string
	idle       time.Duration
	now        func() time.Time

	mu       sync.Mutex
	sessions map[*link]bool
	readName string
	lastPid  int
	closed   bool
	http     *httpServer
}

// session names the run a new client session writes to: a run of its own,
// or the proxy's one run, which sessions then share, each with a call id of
// its own (see sessionID) as its part of their keys, so that two sessions'
// calls of one step never share a key and a pointer reads back what it was
// written for.
func (p *Proxy) session() (run, callID string) {
	if p.run == "" {
		return NewRunName(p.now()), ""
	}
	return p.run, sessionID()
}

// sessionID returns a new session's part of the keys of a run that
// sessions share: s and 8 random hex digits.
func sessionID() string {
	var b [4]byte
	rand.Read(b[:])
	return "s" + hex.EncodeToString(b[:])
}

// An Option configures NewProxy or NewStoreServer. An option that one of
// them has no use for is an error there.
type Option func(*options) error

// options are what the options say.
type options struct {
	// server is set for NewStoreServer, which takes WithRun and
	// WithMaxResourceBytes only.
	server  bool
	hook    *hook.Hook
	run     string
	timeout time.Duration
	log     *slog.Logger
	links   bool

	maxMessage int64
	spoolDir   string
	idle       time.Duration
	// maxResource is WithMaxResourceBytes's limit, 0 for the default.
	maxResource int64
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

// proxyOption is an option, named name, that only NewProxy takes: given to
// NewStoreServer, it is an error.
func proxyOption(name string, set func(*options) error) Option {
	return func(o *options) error {
		if o.server {
			return fmt.Errorf("mcp: %s configures NewProxy, not NewStoreServer", name)
		}
		return set(o)
	}
}

// WithHook sets the hook that decides what the proxy offloads (its
// policies and preview). Its store is not used: the proxy writes to its
// own. The default offloads any result over DefaultThreshold characters.
func WithHook(h *hook.Hook) Option {
	return proxyOption("WithHook", option.Check(h != nil, func(o *options) { o.hook = h }, "mcp: nil hook"))
}

// WithStrategies sets the proxy's offload policies (see ParseOffload).
func WithStrategies(s *policy.Strategies) Option {
	return proxyOption("WithStrategies", func(o *options) error {
		h, err := hook.New(nil, s)
		if err != nil {
			return fmt.Errorf("mcp: %w", err)
		}
		o.hook = h
		return nil
	})
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

// WithCallTimeout bounds how long the upstream has to answer a tool call;
// past it the call is cancelled upstream and the client gets an error, and
// an upstream that then does not answer a ping (or left half a message) is
// stopped, to start again on the session's next request. Zero (the
// default) means no bound beyond the client's own.
func WithCallTimeout(d time.Duration) Option {
	return proxyOption("WithCallTimeout", option.Check(d >= 0, func(o *options) { o.timeout = d }, "mcp: negative call timeout %s", d))
}

// WithLogger sets where the proxy says what goes wrong (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return proxyOption("WithLogger", option.Check(l != nil, func(o *options) { o.log = l }, "mcp: nil logger"))
}

// WithMaxMessage bounds one message the proxy relays, a tool's result say
// (default DefaultMaxMessage). A message over it is refused with an error
// naming the limit; one under it passes in bounded memory, through a
// temporary file past a few megabytes.
func WithMaxMessage(n int64) Option {
	return proxyOption("WithMaxMessage", option.Check(n >= 1<<10, func(o *options) { o.maxMessage = n },
		"mcp: a message limit of %d bytes: want at least 1 KiB", n))
}

// WithSpoolDir sets where the proxy keeps messages too large to hold in
// memory while it relays them (default the system's temporary directory):
// somewhere with room for the largest result, ideally on the store's disk.
func WithSpoolDir(dir string) Option {
	return proxyOption("WithSpoolDir", option.Set(func(o *options) { o.spoolDir = dir }))
}

// DefaultIdleTimeout is how long an HTTP client session may go without a
// request or an open stream before the proxy ends it, and its upstream.
const DefaultIdleTimeout = 10 * time.Minute

// WithIdleTimeout sets how long an HTTP client session may go without a
// request or an open stream before the proxy ends it (default
// DefaultIdleTimeout): clients often leave without saying so.
func WithIdleTimeout(d time.Duration) Option {
	return proxyOption("WithIdleTimeout", option.Check(d > 0, func(o *options) { o.idle = d },
		"mcp: idle timeout %s: want a positive duration", d))
}

// WithResourceLinks sets whether a pointer carries, after its text, a
// resource link to each offloaded part (default true).
func WithResourceLinks(on bool) Option {
	return proxyOption("WithResourceLinks", option.Set(func(o *options) { o.links = on }))
}

// NewProxy returns a proxy in front of up, offloading to st. It connects to
// the upstream for each client session, when the session starts.
func NewProxy(ctx context.Context, up Upstream, st hook.Store, opts ...Option) (*Proxy, error) {
	if up == nil {
		return nil, errors.New("mcp: no upstream")
	}
	if st == nil {
		return nil, errors.New("mcp: no store")
	}
	o := options{log: slog.Default(), links: true, maxMessage: DefaultMaxMessage, idle: DefaultIdleTimeout}
	if err := o.apply(opts); err != nil {
		return nil, err
	}
	p := &Proxy{
		up: up, store: st, hook: o.hook, run: o.run, timeout: o.timeout, log: o.log, links: o.links,
		maxMessage: o.maxMessage, spoolDir: o.spoolDir, idle: o.idle, now: time.Now,
		sessions: map[*link]bool{}, readName: ReadToolName,
	}
	if p.hook == nil {
		s, _ := ParseOffload(nil)
		p.hook, _ = hook.New(nil, s)
	}
	rd, err := newReader(st)
	if err != nil {
		return nil, err
	}
	rd.limitResources(o.maxResource)
	p.rd = rd
	return p, nil
}

// Run serves one client session over t until the client leaves or ctx
// ends, then ends the session's upstream. Over stdio (an sdk.IOTransport or
// sdk.StdioTransport), the proxy reads and writes the stream itself, so
// that a message of any size up to the limit passes in bounded memory.
func (p *Proxy) Run(ctx context.Context, t sdk.Transport) error {
	var down downstream
	switch t := t.(type) {
	case *sdk.IOTransport:
		down = &stdioDown{lineConn{r: newLineReader(t.Reader, p.maxMessage, p.spoolDir), w: newLineWriter(t.Writer)}}
	case *sdk.StdioTransport:
		down = &stdioDown{lineConn{r: newLineReader(os.Stdin, p.maxMessage, p.spoolDir), w: newLineWriter(nopCloser{os.Stdout})}}
	default:
		c, err := connectSDK(ctx, t)
		if err != nil {
			return err
		}
		down = c
	}
	l, err := p.open(down)
	if err != nil {
		down.close()
		return err
	}
	defer p.forget(l)
	err = l.serve(ctx)
	if errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil
	}
	return err
}

// nopCloser keeps the proxy's stdout open when a session ends.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// open starts a session over down.
func (p *Proxy) open(down downstream) (*link, error) {
	run, callID := p.session()
	l := newLink(p, down, run, callID)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("mcp: the proxy is closed")
	}
	p.sessions[l] = true
	p.log.Info("toolcas: client session offloads to run " + run)
	return l, nil
}

// forget ends a session and lets go of it.
func (p *Proxy) forget(l *link) {
	l.close()
	p.mu.Lock()
	delete(p.sessions, l)
	p.mu.Unlock()
}

// Handler returns an http.Handler serving the proxy over MCP's streamable
// HTTP transport, one run and one upstream connection per client session.
// A request that came in on a loopback address must name a loopback host
// (Host, and Origin when sent), which keeps web pages out by DNS rebinding.
func (p *Proxy) Handler() http.Handler {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.http == nil {
		p.http = newHTTPServer(p)
	}
	return p.http
}

// Close ends every session and its upstream connection, and returns once
// every upstream process is gone.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	ls := make([]*link, 0, len(p.sessions))
	for l := range p.sessions {
		ls = append(ls, l)
	}
	hs := p.http
	p.mu.Unlock()
	if hs != nil {
		hs.close()
	}
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.close()
		}()
	}
	wg.Wait()
	return nil
}

// started notes a new upstream connection.
func (p *Proxy) started(up upstreamConn) {
	if pid := up.pid(); pid != 0 {
		p.mu.Lock()
		p.lastPid = pid
		p.mu.Unlock()
	}
}

// UpstreamPid returns the process id of the upstream process the proxy
// started last, or 0 when it starts none.
func (p *Proxy) UpstreamPid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastPid
}

// ReadToolName returns the name the read-back tool had in the last tool
// list a client got: ReadToolName unless the upstream has a tool of that
// name.
func (p *Proxy) ReadToolName() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.readName
}

func (p *Proxy) setReadName(name string) {
	p.mu.Lock()
	p.readName = name
	p.mu.Unlock()
}
