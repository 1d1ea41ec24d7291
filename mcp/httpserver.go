package mcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// httpServer serves the proxy over MCP's streamable HTTP transport: a POST
// carries the client's messages (its requests answered on an event stream
// of their own), a GET opens the stream for what belongs to no request, a
// DELETE ends the session.
type httpServer struct {
	p *Proxy

	mu       sync.Mutex
	sessions map[string]*httpSession
	closed   bool
	stop     chan struct{}
}

func newHTTPServer(p *Proxy) *httpServer {
	h := &httpServer{p: p, sessions: map[string]*httpSession{}, stop: make(chan struct{})}
	go h.reap()
	return h
}

// Headers of the transport.
const (
	hdrSession  = "Mcp-Session-Id"
	hdrVersion  = "Mcp-Protocol-Version"
	hdrLastID   = "Last-Event-Id"
	contentJSON = "application/json"
	contentSSE  = "text/event-stream"
)

func (h *httpServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if why := foreignHost(r); why != "" {
		httpError(w, http.StatusForbidden, codeInvalidRequest, why)
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.get(w, r)
	case http.MethodDelete:
		h.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		httpError(w, http.StatusMethodNotAllowed, codeInvalidRequest, r.Method+" is not a method of this endpoint: POST, GET or DELETE")
	}
}

// foreignHost says why a request that came in on a loopback address names
// another host (a web page's, by DNS rebinding), or "".
func foreignHost(r *http.Request) string {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return ""
	}
	ta, ok := local.(*net.TCPAddr)
	if !ok || !ta.IP.IsLoopback() {
		return ""
	}
	if !loopbackName(r.Host) {
		return fmt.Sprintf("invalid Host %q: this server listens on a loopback address and answers only to localhost", r.Host)
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !loopbackName(u.Host) {
			return fmt.Sprintf("invalid Origin %q: this server listens on a loopback address and answers only to localhost", o)
		}
	}
	return ""
}

// loopbackName reports whether host (with a port or not) names this
// machine's loopback.
func loopbackName(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// httpError answers with a status and a JSON-RPC error.
func httpError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", contentJSON)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
}

func (h *httpServer) post(w http.ResponseWriter, r *http.Request) {
	a := &accum{max: h.p.maxMessage, dir: h.p.spoolDir}
	if _, err := io.Copy(a, r.Body); err != nil {
		a.drop()
		httpError(w, http.StatusBadRequest, codeParseError, "reading the request: "+err.Error())
		return
	}
	ms, err := a.messages()
	if err != nil {
		var big *tooLargeError
		if errors.As(err, &big) {
			httpError(w, http.StatusRequestEntityTooLarge, codeInvalidRequest, big.Error())
			return
		}
		httpError(w, http.StatusBadRequest, codeParseError, "toolcas: "+err.Error())
		return
	}
	release := func() {
		for _, m := range ms {
			m.release()
		}
	}
	version := r.Header.Get(hdrVersion)
	var ids []string
	for _, m := range ms {
		m.version = version
		if m.env.isRequest() {
			ids = append(ids, idKey(m.env.ID))
		}
	}
	sid := r.Header.Get(hdrSession)
	var s *httpSession
	if sid == "" {
		if len(ms) != 1 || ms[0].env.Method != "initialize" {
			release()
			httpError(w, http.StatusBadRequest, codeInvalidRequest, "no "+hdrSession+" header: a session starts with initialize")
			return
		}
		if s, err = h.open(); err != nil {
			release()
			httpError(w, http.StatusServiceUnavailable, codeInternal, err.Error())
			return
		}
		w.Header().Set(hdrSession, s.id)
	} else if s = h.session(sid); s == nil {
		release()
		httpError(w, http.StatusNotFound, codeInvalidRequest, "no session "+sid+": it ended, or never was; initialize a new one")
		return
	}
	s.touch()
	if len(ids) == 0 {
		// Notifications and answers: accepted once passed on, so that what
		// the client does next comes after them.
		for _, m := range ms {
			if err := s.deliver(r.Context(), m); err != nil {
				httpError(w, http.StatusNotFound, codeInvalidRequest, err.Error())
				return
			}
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	st := s.openStream(ids)
	defer s.closeStream(st)
	s.startStream(w, st)
	for _, m := range ms {
		if err := s.deliver(r.Context(), m); err != nil {
			return
		}
	}
	select {
	case <-st.done:
	case <-r.Context().Done():
	case <-s.gone:
	}
}

func (h *httpServer) get(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), contentSSE) {
		httpError(w, http.StatusNotAcceptable, codeInvalidRequest, "a GET must accept "+contentSSE)
		return
	}
	s := h.sessionOf(w, r)
	if s == nil {
		return
	}
	st, ok := s.openGet()
	if !ok {
		httpError(w, http.StatusConflict, codeInvalidRequest, "this session has a GET stream open already")
		return
	}
	defer s.closeStream(st)
	s.startStream(w, st)
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.gone:
			return
		case <-st.done:
			return
		case <-tick.C:
			if st.comment("keep-alive") != nil {
				return
			}
		}
	}
}

// keepAlive is how often an idle GET stream gets a comment, which finds a
// client that went away.
const keepAlive = 25 * time.Second

func (h *httpServer) delete(w http.ResponseWriter, r *http.Request) {
	s := h.sessionOf(w, r)
	if s == nil {
		return
	}
	s.close()
	w.WriteHeader(http.StatusOK)
}

// sessionOf returns the session a request names, answering it when there
// is none.
func (h *httpServer) sessionOf(w http.ResponseWriter, r *http.Request) *httpSession {
	sid := r.Header.Get(hdrSession)
	if sid == "" {
		httpError(w, http.StatusBadRequest, codeInvalidRequest, "no "+hdrSession+" header")
		return nil
	}
	s := h.session(sid)
	if s == nil {
		httpError(w, http.StatusNotFound, codeInvalidRequest, "no session "+sid+": it ended, or never was; initialize a new one")
	}
	return s
}

// session returns the live session with this id, or nil: one that ended
// but is not yet forgotten (its upstream is still stopping) is gone too.
func (h *httpServer) session(id string) *httpSession {
	h.mu.Lock()
	s := h.sessions[id]
	h.mu.Unlock()
	if s == nil || s.ended() {
		return nil
	}
	return s
}

// open starts a session, and its link, which serves until it ends.
func (h *httpServer) open() (*httpSession, error) {
	s := &httpSession{id: rand.Text(), in: make(chan inbound, 16), gone: make(chan struct{}), streams: map[string]*sseStream{}}
	s.touch()
	l, err := h.p.open(s)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.p.forget(l)
		return nil, errors.New("the proxy is shutting down")
	}
	h.sessions[s.id] = s
	h.mu.Unlock()
	go func() {
		l.serve(context.Background())
		h.p.forget(l)
		h.mu.Lock()
		delete(h.sessions, s.id)
		h.mu.Unlock()
	}()
	return s, nil
}

// reap ends the sessions idle past the proxy's idle timeout.
func (h *httpServer) reap() {
	t := time.NewTicker(max(h.p.idle/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		h.mu.Lock()
		var idle []*httpSession
		for _, s := range h.sessions {
			if s.idleFor() > h.p.idle {
				idle = append(idle, s)
			}
		}
		h.mu.Unlock()
		for _, s := range idle {
			h.p.log.Info("toolcas: ending client session " + s.id + ": idle for " + h.p.idle.String())
			s.close()
		}
	}
}

// close ends every session.
func (h *httpServer) close() {
	var ss []*httpSession
	endOnce(&h.mu, &h.closed, func() {
		close(h.stop)
		ss = slices.Collect(maps.Values(h.sessions))
	})
	for _, s := range ss {
		s.close()
	}
}

// httpSession is a client session over HTTP: the downstream of its link.
type httpSession struct {
	id string
	in chan inbound
	// gone closes when the session ends.
	gone chan struct{}

	mu      sync.Mutex
	closed  bool
	streams map[string]*sseStream // by the id of a request each answers
	open    []*sseStream          // every stream attached, newest last
	get     *sseStream
	backlog []*message
	active  time.Time // the last request, or the last stream's end
}

// inbound is a client message on its way to the link, and the signal that
// it was handled.
type inbound struct {
	m    *message
	done chan struct{}
}

// maxBacklog bounds the messages kept for a client that has no stream
// open to take them.
const maxBacklog = 256

func (s *httpSession) touch() {
	s.mu.Lock()
	s.active = time.Now()
	s.mu.Unlock()
}

func (s *httpSession) idleFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.open) > 0 {
		return 0
	}
	return time.Since(s.active)
}

// deliver passes a client message to the link and waits until it was
// handled (a notification passed upstream, say).
func (s *httpSession) deliver(ctx context.Context, m *message) error {
	in := inbound{m: m, done: make(chan struct{})}
	select {
	case s.in <- in:
	case <-s.gone:
		m.release()
		return errors.New("the session ended")
	case <-ctx.Done():
		m.release()
		return ctx.Err()
	}
	select {
	case <-in.done:
	case <-s.gone:
	case <-ctx.Done():
	}
	return nil
}

func (s *httpSession) recv(ctx context.Context) (*message, error) {
	select {
	case in := <-s.in:
		in.m.handled = in.done
		return in.m, nil
	case <-s.gone:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// send writes a message on the stream of the request it belongs with; else
// on the GET stream; else on the newest stream open; else it waits for one.
func (s *httpSession) send(_ context.Context, m *message) error {
	for range 3 {
		s.mu.Lock()
		st := s.streams[m.related]
		if st == nil {
			st = s.get
		}
		if st == nil && len(s.open) > 0 {
			st = s.open[len(s.open)-1]
		}
		if st == nil {
			if !s.closed {
				if len(s.backlog) == maxBacklog {
					s.backlog[0].release()
					s.backlog = s.backlog[1:]
				}
				if m.spool != nil {
					m.spool.retain()
				}
				kept := *m
				s.backlog = append(s.backlog, &kept)
			}
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		err := st.write(m)
		if err == nil {
			if m.env.isResponse() {
				s.answered(st, m.related)
			}
			return nil
		}
		s.closeStream(st)
	}
	return errors.New("no stream of the client's takes messages")
}

// answered notes that a stream's request got its answer; a stream whose
// every request did ends.
func (s *httpSession) answered(st *sseStream, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[id] == st {
		delete(s.streams, id)
	}
	st.answered(id)
}

func (s *httpSession) unanswered(id string) {
	s.mu.Lock()
	st := s.streams[id]
	s.mu.Unlock()
	if st != nil {
		s.answered(st, id)
	}
}

// flushBacklog sends what waited for a stream.
func (s *httpSession) flushBacklog() {
	s.mu.Lock()
	b := s.backlog
	s.backlog = nil
	s.mu.Unlock()
	for _, m := range b {
		s.send(context.Background(), m)
		m.release()
	}
}

// openStream registers the stream of a POST's requests.
func (s *httpSession) openStream(ids []string) *sseStream {
	st := newSSEStream(ids)
	s.mu.Lock()
	for _, id := range ids {
		s.streams[id] = st
	}
	s.open = append(s.open, st)
	s.mu.Unlock()
	return st
}

// openGet registers the GET stream, unless one is open.
func (s *httpSession) openGet() (*sseStream, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.get != nil {
		return nil, false
	}
	st := newSSEStream(nil)
	s.get = st
	s.open = append(s.open, st)
	return st, true
}

// closeStream forgets a stream whose HTTP request ended.
func (s *httpSession) closeStream(st *sseStream) {
	st.detach()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, o := range s.streams {
		if o == st {
			delete(s.streams, id)
		}
	}
	if s.get == st {
		s.get = nil
	}
	for i, o := range s.open {
		if o == st {
			s.open = append(s.open[:i], s.open[i+1:]...)
			break
		}
	}
	s.active = time.Now()
}

func (s *httpSession) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *httpSession) close() {
	var backlog []*message
	if !endOnce(&s.mu, &s.closed, func() { backlog, s.backlog = s.backlog, nil }) {
		return
	}
	for _, m := range backlog {
		m.release()
	}
	close(s.gone)
}

// startStream answers with an event stream, attaches st to it and sends
// what the session held back while it had no stream.
func (s *httpSession) startStream(w http.ResponseWriter, st *sseStream) {
	w.Header().Set("Content-Type", contentSSE)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	st.attach(w)
	s.flushBacklog()
}

// sseStream is one HTTP response carrying server-sent events.
type sseStream struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	pending map[string]bool // requests not yet answered
	done    chan struct{}   // closes once every request was answered
	ended   bool
}

func newSSEStream(ids []string) *sseStream {
	st := &sseStream{pending: map[string]bool{}, done: make(chan struct{})}
	for _, id := range ids {
		st.pending[id] = true
	}
	return st
}

func (st *sseStream) attach(w http.ResponseWriter) {
	st.mu.Lock()
	st.w = w
	st.mu.Unlock()
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// detach stops writes: the HTTP request is over.
func (st *sseStream) detach() {
	st.mu.Lock()
	st.w = nil
	st.ended = true
	st.mu.Unlock()
}

var errStreamEnded = errors.New("the stream ended")

// write sends one message as an event.
func (st *sseStream) write(m *message) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.w == nil || st.ended {
		return errStreamEnded
	}
	if _, err := io.WriteString(st.w, "event: message\ndata: "); err != nil {
		return err
	}
	if err := m.writeTo(st.w, true); err != nil {
		return err
	}
	if _, err := io.WriteString(st.w, "\n\n"); err != nil {
		return err
	}
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// comment sends an SSE comment, which clients ignore.
func (st *sseStream) comment(text string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.w == nil {
		return errStreamEnded
	}
	if _, err := io.WriteString(st.w, ": "+text+"\n\n"); err != nil {
		return err
	}
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

func (st *sseStream) answered(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.pending[id] {
		return
	}
	delete(st.pending, id)
	if len(st.pending) == 0 && !st.ended {
		st.ended = true
		close(st.done)
	}
}
