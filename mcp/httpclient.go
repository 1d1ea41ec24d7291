package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// httpUp is one MCP session with an upstream over streamable HTTP: each
// message a POST, a request's answer (and what comes with it) as JSON or
// an event stream, which is resumed where it broke off when the server
// numbered its events; a GET stream for what belongs to no request.
type httpUp struct {
	endpoint string
	client   *http.Client
	opts     *connectOptions

	ctx    context.Context
	cancel context.CancelFunc
	in     chan *message
	wg     sync.WaitGroup

	mu        sync.Mutex
	sessionID string
	version   string // negotiated; for messages whose client said none
	initID    string
	stopped   bool
	err       error
	done      chan struct{}
	getOpen   bool
}

func newHTTPUp(endpoint string, client *http.Client, o *connectOptions) *httpUp {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &httpUp{endpoint: endpoint, client: client, opts: o, ctx: ctx, cancel: cancel, in: make(chan *message, 64), done: make(chan struct{})}
}

func (u *httpUp) pid() int       { return 0 }
func (u *httpUp) halfRead() bool { return false }

func (u *httpUp) recv(ctx context.Context) (*message, error) {
	select {
	case m := <-u.in:
		return m, nil
	default:
	}
	select {
	case m := <-u.in:
		return m, nil
	case <-u.done:
		return nil, u.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fail ends the session with err.
func (u *httpUp) fail(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err == nil {
		u.err = err
		close(u.done)
	}
}

// deliver passes a message read from the upstream on, noting the protocol
// version from the answer to initialize.
func (u *httpUp) deliver(m *message) {
	if m.env.isResponse() && len(m.env.Result) > 0 && m.pieces == nil {
		u.mu.Lock()
		isInit := u.initID != "" && idKey(m.env.ID) == u.initID
		u.mu.Unlock()
		if isInit {
			var r struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			json.Unmarshal(m.env.Result, &r)
			u.mu.Lock()
			u.version, u.initID = r.ProtocolVersion, ""
			u.mu.Unlock()
		}
	}
	select {
	case u.in <- m:
	case <-u.ctx.Done():
		m.release()
	}
}

// headers sets what every request of the session carries.
func (u *httpUp) headers(req *http.Request, version string) {
	u.mu.Lock()
	sid, v := u.sessionID, u.version
	u.mu.Unlock()
	if version == "" {
		version = v
	}
	if sid != "" {
		req.Header.Set(hdrSession, sid)
	}
	if version != "" {
		req.Header.Set(hdrVersion, version)
	}
}

// send POSTs a message. A request's answer is read in the background; a
// notification or an answer is sent before send returns, so that what the
// client sends next comes after it.
func (u *httpUp) send(ctx context.Context, m *message) error {
	if m.env.Method == "initialize" && m.env.isRequest() {
		u.mu.Lock()
		u.initID = idKey(m.env.ID)
		u.mu.Unlock()
	}
	if !m.env.isRequest() {
		return u.post(m)
	}
	if m.spool != nil {
		m.spool.retain()
	}
	req := *m
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		defer req.release()
		if err := u.post(&req); err != nil && u.ctx.Err() == nil {
			u.deliver(errorReply(req.env.ID, codeInternal, fmt.Sprintf("toolcas: upstream %s did not answer %s: %v", u.endpoint, req.env.Method, err)))
		}
	}()
	return nil
}

// post sends one message and takes what the upstream answers.
func (u *httpUp) post(m *message) error {
	body, err := m.bytes()
	if err != nil {
		return err
	}
	var rd io.Reader = bytes.NewReader(body)
	if m.pieces != nil {
		// A large message streams from its spool.
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(m.writeTo(pw, false)) }()
		rd, body = pr, nil
	}
	req, err := http.NewRequestWithContext(u.ctx, http.MethodPost, u.endpoint, rd)
	if err != nil {
		return err
	}
	if body == nil {
		req.ContentLength = m.size
	}
	req.Header.Set("Content-Type", contentJSON)
	req.Header.Set("Accept", contentJSON+", "+contentSSE)
	u.headers(req, m.version)
	resp, err := u.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get(hdrSession); sid != "" && m.env.Method == "initialize" {
		u.mu.Lock()
		u.sessionID = sid
		u.mu.Unlock()
	}
	related := ""
	if m.env.isRequest() {
		related = idKey(m.env.ID)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound && u.hasSession():
		err := fmt.Errorf("ended the session (HTTP %d to its session id)", resp.StatusCode)
		u.fail(err)
		return err
	case resp.StatusCode >= 300:
		return fmt.Errorf("HTTP %s: %s", resp.Status, excerpt(resp.Body))
	}
	if m.env.Method == "notifications/initialized" {
		u.openGet()
	}
	if related == "" {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case contentSSE:
		u.readStream(resp.Body, related)
		return nil
	case contentJSON:
		a := &accum{max: u.opts.maxMessage, dir: u.opts.spoolDir}
		if _, err := io.Copy(a, resp.Body); err != nil {
			a.drop()
			return err
		}
		ms, err := a.messages()
		if err != nil {
			return err
		}
		for _, m := range ms {
			m.related = related
			u.deliver(m)
		}
		return nil
	}
	return fmt.Errorf("an answer of type %q, neither %s nor %s", resp.Header.Get("Content-Type"), contentJSON, contentSSE)
}

func (u *httpUp) hasSession() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sessionID != ""
}

// excerpt reads the start of a body, for an error message.
func excerpt(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 300))
	return strings.TrimSpace(string(b))
}

// readStream reads the event stream of a request, and, when it breaks off
// before the answer, resumes it from the last event the server numbered
// (after the delay the server asked for); a stream that cannot be resumed
// tells the client so (its own stream ends).
func (u *httpUp) readStream(body io.Reader, related string) {
	ev := &events{u: u, related: related, retry: time.Second}
	for tries := 0; ; tries++ {
		got := ev.read(body)
		if ev.answered || u.ctx.Err() != nil {
			return
		}
		if ev.lastID == "" || tries > 2 && !got {
			u.deliver(&message{ended: true, related: related})
			return
		}
		select {
		case <-time.After(min(ev.retry, 10*time.Second)):
		case <-u.ctx.Done():
			return
		}
		resp, err := u.get(ev.lastID)
		if err != nil || resp.StatusCode != http.StatusOK {
			if resp != nil {
				resp.Body.Close()
			}
			u.deliver(&message{ended: true, related: related})
			return
		}
		body = resp.Body
		defer resp.Body.Close()
	}
}

// get opens a GET stream, resuming after lastID when it is set.
func (u *httpUp) get(lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(u.ctx, http.MethodGet, u.endpoint, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", contentSSE)
	if lastID != "" {
		req.Header.Set(hdrLastID, lastID)
	}
	u.headers(req, "")
	return u.client.Do(req)
}

// getWait bounds how long the GET stream has to open: what the upstream
// sends on it must find it open, and the client's next message waits.
const getWait = 5 * time.Second

// openGet opens the session's GET stream, for what the upstream sends
// apart from any request, and keeps it open; it returns once the stream
// is open (or the upstream said it has none).
func (u *httpUp) openGet() {
	u.mu.Lock()
	if u.getOpen {
		u.mu.Unlock()
		return
	}
	u.getOpen = true
	u.mu.Unlock()
	opened := make(chan struct{})
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		once := sync.OnceFunc(func() { close(opened) })
		defer once()
		for failures := 0; failures < 5 && u.ctx.Err() == nil; {
			resp, err := u.get("")
			once()
			if err != nil || resp.StatusCode != http.StatusOK {
				if resp != nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusMethodNotAllowed {
						return // no GET stream here
					}
				}
				failures++
			} else {
				ev := &events{u: u}
				if ev.read(resp.Body) {
					failures = 0
				} else {
					failures++
				}
				resp.Body.Close()
			}
			select {
			case <-time.After(time.Second):
			case <-u.ctx.Done():
			}
		}
	}()
	select {
	case <-opened:
	case <-time.After(getWait):
	}
}

// stop ends the session: the upstream is told (DELETE), and every stream
// closes.
func (u *httpUp) stop() {
	var sid string
	if !endOnce(&u.mu, &u.stopped, func() { sid = u.sessionID }) {
		return
	}
	u.cancel()
	if sid != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u.endpoint, nil)
		if err == nil {
			u.headers(req, "")
			if resp, err := u.client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		cancel()
	}
	u.wg.Wait()
	u.fail(errors.New("closed the connection"))
}

// events reads server-sent events, passing each message on.
type events struct {
	u        *httpUp
	related  string
	lastID   string
	retry    time.Duration
	answered bool
}

// read reads a stream to its end; it reports whether any event came.
func (ev *events) read(body io.Reader) bool {
	br := bufio.NewReaderSize(body, 64<<10)
	got := false
	var data *accum
	defer func() {
		if data != nil {
			data.drop()
		}
	}()
	for {
		name, colon, err := fieldName(br)
		if err != nil {
			return got
		}
		if !colon && name == "" {
			// A blank line ends the event.
			if data != nil && data.n > 0 {
				got = true
				ev.dispatch(data)
			} else if data != nil {
				data.drop()
			}
			data = nil
			continue
		}
		if colon {
			if c, err := br.Peek(1); err == nil && c[0] == ' ' {
				br.Discard(1)
			}
		}
		switch name {
		case "data":
			if data == nil {
				data = &accum{max: ev.u.opts.maxMessage, dir: ev.u.opts.spoolDir}
			} else {
				data.Write([]byte("\n"))
			}
			if colon {
				err = restOfLine(br, data)
			}
		case "id", "retry":
			var v capped
			v.max = 1 << 10
			if colon {
				err = restOfLine(br, &v)
			}
			if name == "id" {
				ev.lastID, got = string(v.buf), true
			} else if ms, perr := strconv.Atoi(string(v.buf)); perr == nil && ms >= 0 {
				ev.retry = time.Duration(ms) * time.Millisecond
			}
		default:
			if colon {
				err = restOfLine(br, io.Discard)
			}
		}
		if err != nil {
			return got
		}
	}
}

// fieldName reads a line's field name: up to its colon (colon set), or the
// whole line when it has none. A name is short: past 64 bytes the rest of
// it is dropped.
func fieldName(br *bufio.Reader) (string, bool, error) {
	var name []byte
	for {
		c, err := br.ReadByte()
		if err != nil {
			return "", false, err
		}
		switch c {
		case ':':
			return string(name), true, nil
		case '\n':
			return strings.TrimSuffix(string(name), "\r"), false, nil
		}
		if len(name) < 64 {
			name = append(name, c)
		}
	}
}

// restOfLine copies the rest of a line to w, without its line break.
func restOfLine(br *bufio.Reader, w io.Writer) error {
	cr := false // a '\r' held back: it may end the line
	for {
		chunk, err := br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return err
		}
		end := err == nil
		if end {
			chunk = bytes.TrimSuffix(chunk[:len(chunk)-1], []byte("\r"))
		}
		if cr && (len(chunk) > 0 || !end) {
			w.Write([]byte("\r"))
		}
		cr = false
		if !end && len(chunk) > 0 && chunk[len(chunk)-1] == '\r' {
			chunk, cr = chunk[:len(chunk)-1], true
		}
		w.Write(chunk)
		if end {
			return nil
		}
	}
}

// dispatch passes on the message an event's data holds.
func (ev *events) dispatch(data *accum) {
	ms, err := data.messages()
	if err != nil {
		var big *tooLargeError
		if errors.As(err, &big) && ev.related != "" {
			ev.answered = true
			ev.u.deliver(errorReply(json.RawMessage(ev.related), codeInternal,
				fmt.Sprintf("toolcas: upstream %s answered with %v (see --max-message)", ev.u.endpoint, big)))
			return
		}
		ev.u.fail(errors.New(err.Error()))
		return
	}
	for _, m := range ms {
		if ev.related != "" && m.env.isResponse() && idKey(m.env.ID) == ev.related {
			ev.answered = true
		}
		if m.related == "" {
			m.related = ev.related
		}
		ev.u.deliver(m)
	}
}
