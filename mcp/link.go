package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A link is one client session through the proxy, with its own connection
// to the upstream: every message passes from one side to the other as it
// came, but for what the proxy adds (the read-back tool, toolcas://
// resources, the capabilities they need) and what it changes (a tool result
// its policy offloads).
type link struct {
	p    *Proxy
	down downstream
	// run and callID are where the session's results go (see session).
	run, callID string
	calls       atomic.Int64 // the session's tool calls: each one's step

	ctx    context.Context
	cancel context.CancelFunc

	// connectMu makes one connection at a time.
	connectMu sync.Mutex

	mu sync.Mutex
	up upstreamConn
	// upDone closes when up's reader has stopped; downWhy then says why.
	upDone  chan struct{}
	downWhy string
	// initialize is the client's initialize request, to start a new
	// upstream as the first was started; initialized, its notification.
	initialize  *message
	initialized bool
	version     string
	// pending are the client's requests the upstream has not answered.
	pending map[string]*call
	// own are the proxy's own requests to the upstream, by id.
	own map[string]chan *message
	// upTools are the names of the upstream's tools, as its lists said.
	upTools  map[string]bool
	upCaps   upCaps
	readName string
	closed   bool

	ownSeq atomic.Int64
}

// call is a client request waiting for the upstream's answer.
type call struct {
	id       json.RawMessage
	method   string
	tool     string
	args     json.RawMessage
	step     int
	progress string // the request's progress token, as JSON
	cursor   bool   // a list request asking for a later page
	timer    *time.Timer
}

func newLink(p *Proxy, down downstream, run, callID string) *link {
	ctx, cancel := context.WithCancel(context.Background())
	return &link{
		p: p, down: down, run: run, callID: callID, ctx: ctx, cancel: cancel,
		pending: map[string]*call{}, own: map[string]chan *message{}, upTools: map[string]bool{}, readName: ReadToolName,
	}
}

// serve relays until the client leaves or ctx ends, then ends the upstream.
func (l *link) serve(ctx context.Context) error {
	defer l.close()
	errc := make(chan error, 1)
	go func() { errc <- l.readClient() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return nil
	case <-l.ctx.Done():
		return nil
	}
}

// readClient handles the client's messages until it leaves.
func (l *link) readClient() error {
	for {
		m, err := l.down.recv(l.ctx)
		if err != nil {
			var big *tooLargeError
			var bad *notJSONRPCError
			switch {
			case errors.As(err, &big):
				if len(big.id) > 0 {
					l.reply(errorReply(big.id, codeInvalidRequest, "toolcas: "+big.Error()))
				}
				continue
			case errors.As(err, &bad):
				l.reply(errorReply(json.RawMessage("null"), codeParseError, "toolcas: "+bad.Error()))
				continue
			}
			if l.ctx.Err() != nil {
				return nil
			}
			return err
		}
		handled := m.handled
		l.fromClient(m)
		if handled != nil {
			close(handled)
		}
	}
}

// close ends the session and its upstream connection.
func (l *link) close() {
	var up upstreamConn
	if !endOnce(&l.mu, &l.closed, func() { up = l.up }) {
		return
	}
	l.cancel()
	if up != nil {
		up.stop()
	}
	l.down.close()
}

// endOnce marks something ended: under mu, it sets *ended and runs end
// (which takes what the ending needs while the lock is held) and reports
// true, unless *ended was set already, when it does neither and reports
// false.
func endOnce(mu *sync.Mutex, ended *bool, end func()) bool {
	mu.Lock()
	defer mu.Unlock()
	if *ended {
		return false
	}
	*ended = true
	end()
	return true
}

// JSON-RPC error codes the proxy answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeInvalidParams  = -32602
	codeInternal       = -32603
)

// errorReply returns an error response to the request id.
func errorReply(id json.RawMessage, code int, msg string) *message {
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	m := newMessage(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, msg}})
	m.related = idKey(id)
	return m
}

// resultReply returns a response to the request id with result.
func resultReply(id json.RawMessage, result any) *message {
	m := newMessage(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, result})
	m.related = idKey(id)
	return m
}

// reply sends a message to the client, saying so when it cannot.
func (l *link) reply(m *message) {
	defer m.release()
	if err := l.down.send(l.ctx, m); err != nil && l.ctx.Err() == nil {
		l.p.log.Debug("toolcas: send to the client: " + err.Error())
	}
}

// errorf returns an error message naming the upstream.
func (l *link) errorf(format string, args ...any) string {
	return fmt.Sprintf("toolcas: upstream %s "+format, append([]any{l.p.up}, args...)...)
}

// fromClient handles one message from the client.
func (l *link) fromClient(m *message) {
	env := &m.env
	switch {
	case env.isResponse():
		// The client's answer to the upstream's request.
		l.forward(m)
		return
	case env.isNotification():
		switch env.Method {
		case "notifications/initialized":
			l.mu.Lock()
			l.initialized = true
			l.mu.Unlock()
		case "notifications/cancelled":
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(env.Params, &p) == nil {
				l.settle(idKey(p.RequestID))
			}
		}
		l.forward(m)
		return
	}
	c := &call{id: env.ID, method: env.Method}
	var params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		URI       string          `json:"uri"`
		Cursor    *string         `json:"cursor"`
		Meta      struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if len(env.Params) > 0 {
		json.Unmarshal(env.Params, &params)
	}
	c.progress = idKey(params.Meta.ProgressToken)
	c.cursor = params.Cursor != nil && *params.Cursor != ""
	switch env.Method {
	case "initialize":
		l.mu.Lock()
		l.initialize = m
		l.mu.Unlock()
	case "tools/call":
		c.tool, c.args = params.Name, params.Arguments
		c.step = int(l.calls.Add(1))
		if l.isReadTool(params.Name) {
			go l.readTool(m, c)
			return
		}
	case "resources/read":
		if strings.HasPrefix(params.URI, Scheme+"://") {
			go l.readResource(m, params.URI)
			return
		}
	case "tools/list", "resources/list", "resources/templates/list":
		if res, ok := l.localList(env.Method); ok {
			l.reply(resultReply(c.id, res))
			m.release()
			return
		}
	}
	l.request(m, c)
}

// isReadTool reports whether a call names the read-back tool, and not a
// tool of the upstream's.
func (l *link) isReadTool(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return name == l.readName && !l.upTools[name]
}

// request passes a client request upstream, connecting first if need be;
// the reader's side takes its answer.
func (l *link) request(m *message, c *call) {
	defer m.release()
	up, err := l.upstream(m.env.Method == "initialize")
	if err != nil {
		l.reply(errorReply(c.id, codeInternal, err.Error()))
		return
	}
	l.track(c)
	if err := up.send(l.ctx, m); err != nil {
		l.settle(idKey(c.id))
		l.reply(errorReply(c.id, codeInternal, l.errorf("could not be sent %s: %v", c.what(), err)))
	}
}

// track registers a call as waiting, a tool call with its deadline.
func (l *link) track(c *call) {
	key := idKey(c.id)
	// The timer is set under the lock that settle reads it under: it may
	// fire, or the answer come, before AfterFunc returns.
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending[key] = c
	if d := l.p.timeout; d > 0 && c.method == "tools/call" {
		c.timer = time.AfterFunc(d, func() { l.timedOut(key, c) })
	}
}

// settle forgets a call, answered or given up on, and returns it.
func (l *link) settle(key string) *call {
	l.mu.Lock()
	c := l.pending[key]
	delete(l.pending, key)
	var t *time.Timer
	if c != nil {
		t = c.timer
	}
	l.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	return c
}

// what names a call in messages.
func (c *call) what() string {
	if c.method == "tools/call" {
		return fmt.Sprintf("tools/call %q", c.tool)
	}
	return c.method
}

// timedOut answers a call the upstream left unanswered past the timeout,
// cancels it upstream, and checks that the upstream still answers at all:
// one that does not (it hangs, or left half a message on its stdout) is
// ended, and the next request starts it again.
func (l *link) timedOut(key string, c *call) {
	if l.settle(key) != c {
		return
	}
	l.mu.Lock()
	up, done := l.up, l.upDone
	l.mu.Unlock()
	msg := l.errorf("did not answer %s within %s: the call was cancelled", c.what(), l.p.timeout)
	if up != nil && up.halfRead() {
		// Half a message, and nothing more: whatever it sends next is
		// lost with it. Stop it before the client's next request.
		l.drop(up, "left half a message on its stdout and stopped")
		<-done
		l.reply(errorReply(c.id, codeInternal, msg+"; it left half a message unsent, and was stopped: the next request starts it again"))
		return
	}
	l.reply(errorReply(c.id, codeInternal, msg))
	if up == nil {
		return
	}
	cancel := newMessage(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": c.id, "reason": "toolcas: timed out after " + l.p.timeout.String()}})
	up.send(l.ctx, cancel)
	wait := min(max(l.p.timeout, time.Second), 10*time.Second)
	if _, err := l.ask(up, "ping", map[string]any{}, wait); err != nil && l.ctx.Err() == nil {
		l.p.log.Warn(l.errorf("stopped answering (%v): it is stopped, and the next request starts it again", err))
		l.drop(up, "stopped answering: no answer to a ping within "+wait.String()+" after "+c.what()+" timed out")
	}
}

// ask sends the proxy's own request upstream and waits for its answer.
func (l *link) ask(up upstreamConn, method string, params any, wait time.Duration) (*message, error) {
	id := fmt.Sprintf(`"toolcas-%d"`, l.ownSeq.Add(1))
	ch := make(chan *message, 1)
	l.mu.Lock()
	l.own[id] = ch
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.own, id)
		l.mu.Unlock()
	}()
	req := newMessage(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
	if err := up.send(l.ctx, req); err != nil {
		return nil, err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case m := <-ch:
		if m == nil {
			return nil, errors.New(l.why())
		}
		return m, nil
	case <-t.C:
		return nil, fmt.Errorf("no answer to %s within %s", method, wait)
	case <-l.ctx.Done():
		return nil, l.ctx.Err()
	}
}

// why says how the last upstream connection ended.
func (l *link) why() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.downWhy == "" {
		return "closed the connection"
	}
	return l.downWhy
}

// upstream returns the live upstream connection, connecting when there is
// none: for the client's first request, whatever it is (initialize, or
// server/discover of the stateless protocol). A new connection for a session
// that had one (the upstream died, or stopped answering) is initialized as
// the client initialized the first, unless the client's initialize is what
// comes next (forInit).
func (l *link) upstream(forInit bool) (upstreamConn, error) {
	l.connectMu.Lock()
	defer l.connectMu.Unlock()
	l.mu.Lock()
	if l.up != nil && l.downWhy != "" {
		// Being stopped: its reader ends soon, and fails its calls; a
		// request sent to it now would only fail too.
		done := l.upDone
		l.mu.Unlock()
		<-done
		l.mu.Lock()
	}
	up, closed, init, initialized := l.up, l.closed, l.initialize, l.initialized
	l.mu.Unlock()
	switch {
	case closed:
		return nil, errors.New(l.errorf("is not connected: the session is ending"))
	case up != nil:
		return up, nil
	}
	up, err := l.p.up.connect(l.ctx, &connectOptions{maxMessage: l.p.maxMessage, spoolDir: l.p.spoolDir})
	if err != nil {
		return nil, errors.New(l.errorf("did not start: %v", err))
	}
	done := make(chan struct{})
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		up.stop()
		return nil, errors.New(l.errorf("is not connected: the session is ending"))
	}
	l.up, l.upDone, l.downWhy = up, done, ""
	l.mu.Unlock()
	l.p.started(up)
	go l.readUpstream(up, done)
	if forInit || init == nil {
		// The client's initialize comes next, or the session has none (a
		// stateless protocol, whose every request says who asks).
		return up, nil
	}
	ans, err := l.ask(up, "initialize", init.env.Params, initWait)
	if err == nil && len(ans.env.Error) > 0 {
		err = fmt.Errorf("answered initialize with an error: %s", ans.env.Error)
	}
	if err != nil {
		l.drop(up, err.Error())
		<-done
		return nil, errors.New(l.errorf("did not start an MCP session again: %s", l.why()))
	}
	if initialized {
		up.send(l.ctx, newMessage(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}))
	}
	return up, nil
}

// initWait bounds how long a restarted upstream has to answer initialize.
const initWait = 30 * time.Second

// drop ends an upstream connection, noting why (unless its reader already
// said): its calls fail, and the next request connects again.
func (l *link) drop(up upstreamConn, why string) {
	l.mu.Lock()
	if l.up == up && l.downWhy == "" {
		l.downWhy = why
	}
	l.mu.Unlock()
	up.stop()
}

// readUpstream reads the upstream's messages until its connection ends,
// then fails every call waiting on it.
func (l *link) readUpstream(up upstreamConn, done chan struct{}) {
	defer close(done)
	for {
		m, err := up.recv(l.ctx)
		if err != nil {
			var big *tooLargeError
			if errors.As(err, &big) {
				l.tooLarge(big)
				continue
			}
			l.upstreamEnded(up, err)
			return
		}
		l.fromUpstream(m)
	}
}

// tooLarge answers the call whose answer was over the limit.
func (l *link) tooLarge(big *tooLargeError) {
	c := l.settle(idKey(big.id))
	if c == nil {
		l.p.log.Warn(l.errorf("sent %v, which the proxy dropped", big))
		return
	}
	l.reply(errorReply(c.id, codeInternal, l.errorf("answered %s with %v (see --max-message)", c.what(), big)))
}

// upstreamEnded fails the calls an ended connection leaves unanswered.
func (l *link) upstreamEnded(up upstreamConn, err error) {
	up.stop()
	l.mu.Lock()
	if l.up != up {
		l.mu.Unlock()
		return
	}
	if l.downWhy == "" || l.closed {
		l.downWhy = err.Error()
	}
	why, closed := l.downWhy, l.closed
	l.up = nil
	calls := l.pending
	l.pending = map[string]*call{}
	own := l.own
	l.own = map[string]chan *message{}
	l.mu.Unlock()
	for _, ch := range own {
		ch <- nil
	}
	if closed {
		return
	}
	l.p.log.Warn(fmt.Sprintf("toolcas: upstream %s %s", l.p.up, why))
	for _, c := range calls {
		if c.timer != nil {
			c.timer.Stop()
		}
		l.reply(errorReply(c.id, codeInternal, l.errorf("%s during %s", why, c.what())))
	}
}

// fromUpstream handles one message from the upstream.
func (l *link) fromUpstream(m *message) {
	env := &m.env
	if m.ended {
		// The stream of a request ended without its answer: end the
		// client's too; the answer may still come another way.
		l.down.unanswered(m.related)
		return
	}
	if !env.isResponse() {
		if m.related == "" {
			m.related = l.relate(m)
		}
		l.reply(m)
		return
	}
	key := idKey(env.ID)
	l.mu.Lock()
	ch, own := l.own[key]
	l.mu.Unlock()
	if own {
		ch <- m
		return
	}
	c := l.settle(key)
	if c == nil {
		// An answer to a call the client cancelled, or that timed out.
		m.release()
		return
	}
	m.related = key
	if len(env.Error) > 0 {
		l.reply(m)
		return
	}
	switch c.method {
	case "initialize", "server/discover":
		l.reply(l.initResult(m))
	case "tools/list":
		l.reply(l.toolList(m, c))
	case "resources/templates/list":
		l.reply(l.templateList(m, c))
	case "tools/call":
		// Offloading writes to the store: the reader goes on meanwhile.
		go l.reply(l.offload(m, c))
	default:
		l.reply(m)
	}
}

// relate returns the client request an upstream request or notification
// belongs with, for a transport that cannot say (stdio): a progress
// notification, by its token; news of a change, the client's
// subscriptions/listen, if it made one; anything else, the one call in
// flight, if only one is.
func (l *link) relate(m *message) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch m.env.Method {
	case "notifications/progress":
		var p struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		}
		if m.env.Params != nil && json.Unmarshal(m.env.Params, &p) == nil {
			tok := idKey(p.ProgressToken)
			for key, c := range l.pending {
				if c.progress == tok {
					return key
				}
			}
		}
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed", "notifications/resources/updated":
		for key, c := range l.pending {
			if c.method == listen {
				return key
			}
		}
	}
	only := ""
	for key, c := range l.pending {
		if c.method == listen {
			continue
		}
		if only != "" {
			return ""
		}
		only = key
	}
	return only
}

// listen is the request of the stateless protocol that stays open for as
// long as the client wants news of changes.
const listen = "subscriptions/listen"

// forward passes a message upstream as it came, if there is an upstream.
func (l *link) forward(m *message) {
	defer m.release()
	l.mu.Lock()
	up := l.up
	l.mu.Unlock()
	if up == nil {
		l.p.log.Debug(fmt.Sprintf("toolcas: %s dropped: the upstream is not connected", m.env.Method))
		return
	}
	if err := up.send(l.ctx, m); err != nil {
		l.p.log.Debug("toolcas: send upstream: " + err.Error())
	}
}
