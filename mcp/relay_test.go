//lint:file-ignore SA1019 sampling, elicitation, roots and logging are deprecated in the newest protocol, and clients of older ones still use them: the proxy relays them, and these tests check it does.

package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/mcp"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
)

// pidOf asks the upstream process its pid.
func pidOf(t *testing.T, r *rig) int {
	t.Helper()
	res := r.call(t, "pid", nil)
	pid, err := strconv.Atoi(res.Content[0].(*sdk.TextContent).Text)
	if err != nil {
		t.Fatalf("pid: %s", jsonOf(t, res))
	}
	return pid
}

// TestHalfAMessageRestartsTheUpstream: an upstream that writes half a
// message and no more wedges nothing: the call times out, the upstream is
// stopped, and the next call gets a new one that answers. The timeout leaves
// a loaded machine time to write and read the half message first.
func TestHalfAMessageRestartsTheUpstream(t *testing.T) {
	r := processRig(t, upstreamCommand(""), mcp.WithCallTimeout(3*time.Second))
	first := pidOf(t, r)
	err := callErr(t, r, "partial")
	for _, want := range []string{`did not answer tools/call "partial" within 3s`, "half a message", "next request starts it again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	waitGone(t, first)
	if second := pidOf(t, r); second == first {
		t.Errorf("the wedged upstream %d still answers", first)
	}
	if res := r.call(t, "big", nil); len(offloaded(t, res)) != 1 {
		t.Error("after the restart, big was not offloaded")
	}
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// checkHuge checks that a pointer's one part holds hugeText(n).
func checkHuge(t *testing.T, st *store.Store, res *sdk.CallToolResult, n int) {
	t.Helper()
	recs := offloaded(t, res)
	if len(recs) != 1 {
		t.Fatalf("%d parts offloaded, want 1", len(recs))
	}
	c, err := st.Read(context.Background(), "", recs[0]["key"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if want := hugeText(n); string(c.Data) != want {
		t.Errorf("the offloaded part holds %d bytes, not the %d of the result", len(c.Data), len(want))
	}
	if size := jsonOf(t, res); len(size) > 16<<10 {
		t.Errorf("the pointer is %d bytes", len(size))
	}
}

// TestHugeResultOffloadedInBoundedMemory: a 48 MiB result, three times what
// the SDK's stdio transport takes, is read from the upstream process and
// written to the store as it streams: the proxy allocates a few MiB, what
// it holds of any message, whatever its size; the part reads back byte for
// byte.
func TestHugeResultOffloadedInBoundedMemory(t *testing.T) {
	const n = 48 << 20
	r := processRig(t, upstreamCommand(""))
	var res *sdk.CallToolResult
	alloc := allocated(func() { res = r.call(t, "huge", map[string]any{"n": n}) })
	t.Logf("a %d MiB result offloaded: %d KiB allocated", n>>20, alloc>>10)
	if alloc > 8<<20 {
		t.Errorf("offloading a %d MiB result allocated %d MiB", n>>20, alloc>>20)
	}
	checkHuge(t, r.store, res, n)
}

// httpUpstream runs the test binary as an upstream over streamable HTTP and
// returns its URL.
func httpUpstream(t *testing.T) *mcp.URL {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TOOLCAS_TEST_ROLE=upstream", "TOOLCAS_TEST_UPSTREAM_MODE=http")
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the HTTP upstream said no URL: %v", err)
	}
	return &mcp.URL{Endpoint: strings.TrimSpace(line)}
}

// TestHugeResultOverHTTPInBoundedMemory: the same through an upstream over
// streamable HTTP, whose answer comes as an event stream.
func TestHugeResultOverHTTPInBoundedMemory(t *testing.T) {
	const n = 48 << 20
	r := processRig(t, httpUpstream(t))
	var res *sdk.CallToolResult
	alloc := allocated(func() { res = r.call(t, "huge", map[string]any{"n": n}) })
	t.Logf("a %d MiB result offloaded over HTTP: %d KiB allocated", n>>20, alloc>>10)
	if alloc > 8<<20 {
		t.Errorf("offloading a %d MiB result over HTTP allocated %d MiB", n>>20, alloc>>20)
	}
	checkHuge(t, r.store, res, n)
}

// pipeClient connects a client to the proxy over a pair of pipes, its
// stdio as casctl serves it, taking lines of any length.
func pipeClient(t *testing.T, p *mcp.Proxy) *sdk.ClientSession {
	t.Helper()
	cr, pw := io.Pipe()
	pr, cw := io.Pipe()
	go p.Run(context.Background(), &sdk.IOTransport{Reader: pr, Writer: pw})
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "pipe"}, nil).Connect(context.Background(),
		&sdk.IOTransport{Reader: cr, Writer: cw, MaxLineLength: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestHugeResultPassesAndLimit: a result the policy keeps reaches the
// client whole however large (20 MiB, over the SDK's 16 MiB); one over
// the proxy's limit gets an error naming the limit, and the upstream, still
// whole, answers the next call.
func TestHugeResultPassesAndLimit(t *testing.T) {
	st := openStore(t)
	p, err := mcp.NewProxy(context.Background(), upstreamCommand(""), st, mcp.WithLogger(quietLog()),
		mcp.WithStrategies(policy.MustStrategies(policy.Default(policy.Never))), mcp.WithMaxMessage(32<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cs := pipeClient(t, p)
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "huge", Arguments: map[string]any{"n": 20 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*sdk.TextContent).Text; got != hugeText(20<<20) {
		t.Errorf("a 20 MiB result came back as %d bytes", len(got))
	}
	pid := p.UpstreamPid()
	_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "huge", Arguments: map[string]any{"n": 40 << 20}})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint("over the limit of ", 32<<20)) || !strings.Contains(err.Error(), "--max-message") {
		t.Errorf("a 40 MiB result over a 32 MiB limit: %v", err)
	}
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "pid"}); err != nil || p.UpstreamPid() != pid {
		t.Errorf("after a result over the limit: %v, upstream %d, was %d", err, p.UpstreamPid(), pid)
	}
	if ps, _ := st.List(ctx, store.ListOptions{}); len(ps) != 0 {
		t.Errorf("the store holds %d parts", len(ps))
	}
}

// TestPointerStaysSmall: a result of 10,000 small parts becomes a pointer
// within 16 KiB (its text lists 20 parts, its links and _meta as many as
// fit, and each sums up the rest), and every part reads back by its key.
func TestPointerStaysSmall(t *testing.T) {
	const n = 10000
	r := newRig(t, newFake(nil), mcp.WithStrategies(policy.MustStrategies(policy.Default(policy.Always))))
	res := r.call(t, "many", map[string]any{"n": n})
	size := len(jsonOf(t, res))
	t.Logf("a result of %d parts: a pointer of %d bytes", n, size)
	if size > 16<<10 {
		t.Errorf("the pointer to %d parts is %d bytes, more than 16 KiB", n, size)
	}
	recs := offloaded(t, res)
	if len(recs) < 1 || len(recs) > hook.MaxPointerParts {
		t.Errorf("_meta lists %d parts, want 1 to %d", len(recs), hook.MaxPointerParts)
	}
	if got := res.Meta[mcp.MetaPartsKey]; got != float64(n) {
		t.Errorf("_meta says %v parts in all, want %d", got, n)
	}
	links := 0
	for _, c := range res.Content {
		if _, ok := c.(*sdk.ResourceLink); ok {
			links++
		}
	}
	if links != len(recs) {
		t.Errorf("%d resource links for %d records", links, len(recs))
	}
	ps, err := r.store.List(context.Background(), store.ListOptions{})
	if err != nil || len(ps) != n {
		t.Fatalf("the store holds %d parts (%v), want %d", len(ps), err, n)
	}
	for _, p := range ps {
		c, err := r.store.Read(context.Background(), "", p.Key)
		if err != nil || !strings.HasPrefix(string(c.Data), "item ") {
			t.Fatalf("part %s: %q, %v", p.Key, c.Data, err)
		}
	}
}

// TestUpstreamAsksTheClient: what the upstream asks the client (sampling,
// elicitation, roots) reaches the client and its answers the upstream, and
// its log messages reach the client, through the proxy as without it.
func TestUpstreamAsksTheClient(t *testing.T) {
	f := newFake(nil)
	ctx := context.Background()
	var logged []string
	logs := make(chan string, 16)
	client := sdk.NewClient(&sdk.Implementation{Name: "asked"}, &sdk.ClientOptions{
		CreateMessageHandler: func(_ context.Context, r *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			return &sdk.CreateMessageResult{Model: "m", Role: "assistant", Content: &sdk.TextContent{Text: "sampled " + r.Params.Messages[0].Content.(*sdk.TextContent).Text}}, nil
		},
		ElicitationHandler: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes to " + r.Params.Message}}, nil
		},
		LoggingMessageHandler: func(_ context.Context, r *sdk.LoggingMessageRequest) { logs <- fmt.Sprint(r.Params.Data) },
	})
	client.AddRoots(&sdk.Root{URI: "file:///work/project", Name: "project"})
	ask := func(t *testing.T, tr sdk.Transport) string {
		t.Helper()
		cs, err := client.Connect(ctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case l := <-logs:
			logged = append(logged, l)
		case <-time.After(deadline):
			t.Fatal("no log message reached the client")
		}
		return res.Content[0].(*sdk.TextContent).Text
	}
	tr, _ := dialFake(f).Connect(ctx)
	want := ask(t, tr)
	r := newRig(t, f)
	a, b := sdk.NewInMemoryTransports()
	go r.proxy.Run(ctx, a)
	got := ask(t, b)
	if got != want || !strings.Contains(got, "sampled hello") || !strings.Contains(got, "yes to which?") || !strings.Contains(got, "file:///work/project") {
		t.Errorf("through the proxy the upstream heard %q; without it %q", got, want)
	}
	if len(logged) != 2 || logged[0] != logged[1] {
		t.Errorf("log messages: %q", logged)
	}
}

// TestHTTPSessions: the proxy's streamable HTTP transport as a client sees
// it: a session starts with initialize, a message that is no request is
// accepted (202), a request is answered on its own stream, an unknown
// session is 404, a second GET stream 409, a foreign Host 403; DELETE and
// idleness end a session and its upstream process.
func TestHTTPSessions(t *testing.T) {
	st := openStore(t)
	p, err := mcp.NewProxy(context.Background(), upstreamCommand(""), st, mcp.WithLogger(quietLog()), mcp.WithIdleTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	post := func(sid, body string, hdr ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		if hdr != nil && hdr[0] == "Host" {
			req.Host = hdr[1]
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	resp := post("", initialize)
	body, _ := io.ReadAll(resp.Body)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" || !strings.Contains(resp.Header.Get("Content-Type"), "text/event-stream") || !strings.Contains(string(body), `"protocolVersion"`) {
		t.Fatalf("initialize: %d, session %q, %q: %s", resp.StatusCode, sid, resp.Header.Get("Content-Type"), body)
	}
	if resp := post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Errorf("a notification: %d, want 202", resp.StatusCode)
	}
	resp = post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pid"}}`)
	body, _ = io.ReadAll(resp.Body)
	var pid int
	if i := strings.Index(string(body), `"text":"`); i >= 0 {
		fmt.Sscanf(string(body[i+8:]), "%d", &pid)
	}
	if pid == 0 {
		t.Fatalf("tools/call pid: %s", body)
	}
	for _, tc := range []struct {
		what   string
		resp   *http.Response
		status int
	}{
		{"an unknown session", post("no-such-session", `{"jsonrpc":"2.0","id":3,"method":"ping"}`), http.StatusNotFound},
		{"no session, no initialize", post("", `{"jsonrpc":"2.0","id":3,"method":"ping"}`), http.StatusBadRequest},
		{"a foreign Host", post(sid, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, "Host", "evil.example.com"), http.StatusForbidden},
		{"a foreign Origin", post(sid, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, "Origin", "http://evil.example.com"), http.StatusForbidden},
		{"not JSON", post(sid, `{"jsonrpc":`), http.StatusBadRequest},
	} {
		if tc.resp.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d", tc.what, tc.resp.StatusCode, tc.status)
		}
		tc.resp.Body.Close()
	}
	get := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	g1 := get()
	if g1.StatusCode != 200 {
		t.Errorf("GET: %d", g1.StatusCode)
	}
	if g2 := get(); g2.StatusCode != http.StatusConflict {
		t.Errorf("a second GET: %d, want 409", g2.StatusCode)
	}
	g1.Body.Close()
	// Without a stream open, the session is idle: it ends after a second,
	// and its upstream with it.
	waitGone(t, pid)
	if resp := post(sid, `{"jsonrpc":"2.0","id":4,"method":"ping"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a session idle past its timeout: %d, want 404", resp.StatusCode)
	}

	resp = post("", initialize)
	sid2 := resp.Header.Get("Mcp-Session-Id")
	io.ReadAll(resp.Body)
	resp = post(sid2, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pid"}}`)
	io.ReadAll(resp.Body)
	pid2 := p.UpstreamPid()
	req, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
	req.Header.Set("Mcp-Session-Id", sid2)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("DELETE: %v, %v", resp, err)
	}
	waitGone(t, pid2)
}

// TestHTTPUpstreamResumes: an HTTP upstream that ends a call's event stream
// before the answer, having numbered its events, is asked again from the
// last event, after the delay it asked for; the call gets its answer.
func TestHTTPUpstreamResumes(t *testing.T) {
	resumed := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			return
		}
		if r.Method == http.MethodGet {
			if id := r.Header.Get("Last-Event-Id"); id != "" {
				resumed <- id
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, "id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"call-1\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"resumed answer\"}]}}\n\n")
				return
			}
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage
			Method string
		}
		json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Mcp-Session-Id", "up-session")
		switch req.Method {
		case "initialize":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}}`, req.ID)
		case "tools/call":
			w.Header().Set("Content-Type", "text/event-stream")
			// A numbered event, a delay to wait, then the stream ends.
			fmt.Fprint(w, "id: e1\nretry: 50\ndata: \n\n")
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(up.Close)
	st := openStore(t)
	p, err := mcp.NewProxy(context.Background(), &mcp.URL{Endpoint: up.URL}, st, mcp.WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cr, pw := io.Pipe()
	pr, cw := io.Pipe()
	go p.Run(context.Background(), &sdk.IOTransport{Reader: pr, Writer: pw})
	send := func(s string) { io.WriteString(cw, s+"\n") }
	lines := bufio.NewReader(cr)
	send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if l, err := lines.ReadString('\n'); err != nil || !strings.Contains(l, `"init"`) {
		t.Fatalf("initialize: %q, %v", l, err)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"t"}}`)
	l, err := lines.ReadString('\n')
	if err != nil || !strings.Contains(l, "resumed answer") {
		t.Fatalf("the call got %q, %v", l, err)
	}
	if id := <-resumed; id != "e1" {
		t.Errorf("resumed from %q, want e1", id)
	}
}

// TestInvalidBase64PassesAsItCame: an upstream's image whose payload is
// not base64 cannot be stored; the result reaches the client as the
// upstream sent it, at once, and the proxy says why on its log.
func TestInvalidBase64PassesAsItCame(t *testing.T) {
	st := openStore(t)
	var log lockedBuffer
	offload, err := mcp.ParseOffload([]string{"*=over:10"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcp.NewProxy(context.Background(), upstreamCommand("raw"), st,
		mcp.WithLogger(slog.New(slog.NewTextHandler(&log, nil))), mcp.WithStrategies(offload))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cr, pw := io.Pipe() // client → proxy
	pr, cw := io.Pipe() // proxy → client
	go p.Run(context.Background(), &sdk.IOTransport{Reader: cr, Writer: cw})
	defer pw.Close()
	lines := bufio.NewScanner(pr)
	lines.Buffer(nil, 8<<20)
	send := func(msg string) {
		if _, err := io.WriteString(pw, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(id string) json.RawMessage {
		t.Helper()
		for lines.Scan() {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
				t.Fatalf("the proxy wrote %q: %v", lines.Text(), err)
			}
			if string(m.ID) == id {
				if m.Error != nil {
					t.Fatalf("request %s: error %s", id, m.Error)
				}
				return m.Result
			}
		}
		t.Fatalf("no answer to %s: %v", id, lines.Err())
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw-client","version":"1"}}}`)
	answer("1")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// A small message is walked in memory, one over 1 MiB from a spool.
	for i, n := range []int{100, 3 << 20} {
		id := strconv.Itoa(i + 2)
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"badimage","arguments":{"n":%d}}}`, id, n))
		got := answer(id)
		var gotV, wantV any
		json.Unmarshal(got, &gotV)
		json.Unmarshal([]byte(badImageResult(n)), &wantV)
		if !reflect.DeepEqual(gotV, wantV) {
			t.Errorf("a result with %d bytes of text changed on its way:\n got %.300s\nwant %.300s", n, got, badImageResult(n))
		}
	}
	if !strings.Contains(log.String(), "not valid base64") {
		t.Errorf("the proxy's log does not say why the result stayed: %s", log.String())
	}
}

// lockedBuffer is a buffer that goroutines may write to at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stallingTransport gives a connection that never passes a ping on, and
// whose Close waits for release: the proxy's drop of it can be held open.
type stallingTransport struct {
	sdk.Transport
	closing chan struct{} // closed when Close is called
	release chan struct{} // closes to let Close finish
	wrote   chan string   // the methods written after Close began
}

func (s *stallingTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := s.Transport.Connect(ctx)
	return &stallingConn{Connection: c, s: s}, err
}

type stallingConn struct {
	sdk.Connection
	s    *stallingTransport
	once sync.Once
}

func (c *stallingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok {
		select {
		case <-c.s.closing:
			c.s.wrote <- req.Method
		default:
		}
		if req.Method == "ping" {
			return nil
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *stallingConn) Close() error {
	c.once.Do(func() { close(c.s.closing) })
	<-c.s.release
	return c.Connection.Close()
}

// TestRequestDuringStopGoesToTheNextUpstream: a request that comes while an
// upstream that stopped answering is being stopped is not sent to it (where
// it could only fail), but to the upstream started after it.
func TestRequestDuringStopGoesToTheNextUpstream(t *testing.T) {
	f := newFake(nil)
	st := &stallingTransport{closing: make(chan struct{}), release: make(chan struct{}), wrote: make(chan string, 16)}
	first := true
	up := &mcp.Dial{Name: "stalling-upstream", Connect: func(ctx context.Context) (sdk.Transport, error) {
		tr, err := dialFake(f).Connect(ctx)
		if err != nil || !first {
			return tr, err
		}
		first = false
		st.Transport = tr
		return st, nil
	}}
	release := sync.OnceFunc(func() { close(st.release) })
	t.Cleanup(release)
	r := processRig(t, up, mcp.WithCallTimeout(100*time.Millisecond))
	if err := callErr(t, r, "slow"); !strings.Contains(err.Error(), `did not answer tools/call "slow" within 100ms`) {
		t.Errorf("slow: %v, want a timeout", err)
	}
	// The ping after the timeout goes unanswered: the proxy stops the
	// upstream, and its Close holds.
	<-st.closing
	answered := make(chan error, 1)
	go func() {
		_, err := r.client.CallTool(context.Background(), &sdk.CallToolParams{Name: "small"})
		answered <- err
	}()
	select {
	case m := <-st.wrote:
		t.Errorf("%s was sent to the upstream being stopped", m)
	case err := <-answered:
		t.Fatalf("small answered before the stopped upstream's Close returned: %v", err)
	case <-time.After(500 * time.Millisecond):
		// The request had time to reach the stopping upstream, and did not.
	}
	release()
	if err := <-answered; err != nil {
		t.Errorf("small, sent while the upstream was being stopped: %v", err)
	}
}
