package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/mcp"
	"github.com/toolcas/toolcas/store"
)

// runUpstreamProcess is the test binary as an upstream server on stdio.
// TOOLCAS_TEST_UPSTREAM_MODE=exit makes it fail at start.
func runUpstreamProcess() int {
	switch os.Getenv("TOOLCAS_TEST_UPSTREAM_MODE") {
	case "exit":
		fmt.Fprintln(os.Stderr, "fake upstream: cannot start: missing config")
		return 7
	case "raw":
		return runRawUpstream()
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "fake-process", Version: "1"}, nil)
	add := func(name string, h func(context.Context) (*sdk.CallToolResult, error)) {
		s.AddTool(&sdk.Tool{Name: name, InputSchema: objectSchema}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return h(ctx)
		})
	}
	add("pid", func(context.Context) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: text(strconv.Itoa(os.Getpid()))}, nil
	})
	add("big", func(context.Context) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: text(bigText)}, nil
	})
	add("crash", func(context.Context) (*sdk.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "fake upstream: crashing on purpose")
		os.Exit(3)
		return nil, nil
	})
	add("garbage", func(ctx context.Context) (*sdk.CallToolResult, error) {
		os.Stdout.Write([]byte("this is not JSON-RPC\n"))
		<-ctx.Done()
		return nil, ctx.Err()
	})
	add("hang", func(ctx context.Context) (*sdk.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	add("partial", func(ctx context.Context) (*sdk.CallToolResult, error) {
		// Half a message, and nothing more from this process: a
		// notification the SDK sends meanwhile would otherwise finish the
		// line, and the proxy rightly calls that not JSON-RPC.
		os.Stdout.Write([]byte(`{"jsonrpc":"2.0","id":99,"result":{"content":[{"type":"text","text":"abc`))
		silenceStdout()
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s.AddTool(&sdk.Tool{Name: "huge", InputSchema: objectSchema}, func(_ context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var a struct{ N int }
		json.Unmarshal(r.Params.Arguments, &a)
		return &sdk.CallToolResult{Content: text(hugeText(a.N))}, nil
	})
	if os.Getenv("TOOLCAS_TEST_UPSTREAM_MODE") == "http" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("http://%s/mcp\n", ln.Addr())
		http.Serve(ln, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
		return 0
	}
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// badImageResult is what the raw upstream's one tool answers: an image
// whose payload is not base64, beside a text of n bytes, both over any
// threshold.
func badImageResult(n int) string {
	return `{"content":[{"type":"text","text":"` + strings.Repeat("a text long enough to offload. ", n/31+1)[:n] + `"},` +
		`{"type":"image","mimeType":"image/png","data":"!!! this is not base64 at all !!!"}]}`
}

// runRawUpstream is an MCP server written by hand, line by line, for
// answers the SDK would never send: its one tool, "badimage", answers
// badImageResult, with a text of the size its argument "n" says.
func runRawUpstream() int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 8<<20)
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Arguments       struct {
					N int `json:"n"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || req.ID == nil {
			continue // a notification, or an answer
		}
		var result string
		switch req.Method {
		case "initialize":
			result = fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`, req.Params.ProtocolVersion)
		case "tools/list":
			result = `{"tools":[{"name":"badimage","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			result = badImageResult(max(req.Params.Arguments.N, 40))
		case "ping":
			result = `{}`
		default:
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no method %s"}}`+"\n", req.ID, req.Method)
			continue
		}
		fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", req.ID, result)
	}
	return 0
}

// hugeText is at least n bytes of numbered lines, with what JSON escapes
// and code points of two and three bytes along the way, the same for the
// same n.
func hugeText(n int) string {
	var b strings.Builder
	b.Grow(n + 100)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %08d \"quoted\" \\ tab\t é ∑ %s\n", i, strings.Repeat("x", i%50))
	}
	return b.String()
}

// upstreamCommand runs the test binary as the upstream server.
func upstreamCommand(mode string) *mcp.Command {
	return &mcp.Command{Path: os.Args[0], Stderr: &bytes.Buffer{},
		Env: append(os.Environ(), "TOOLCAS_TEST_ROLE=upstream", "TOOLCAS_TEST_UPSTREAM_MODE="+mode)}
}

// runProxyProcess is the test binary as a proxy on stdio, in front of the
// test binary as an upstream, writing to the store TOOLCAS_TEST_STORE, as
// casctl mcp proxy does.
func runProxyProcess() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	st, err := store.Open(ctx, os.Getenv("TOOLCAS_TEST_STORE"), store.WithCreate())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	up := upstreamCommand("")
	up.Stderr = os.Stderr
	p, err := mcp.NewProxy(ctx, up, st)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := p.Run(ctx, &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// gone reports whether no live process has this pid (a zombie waiting for
// a parent that is not ours to reap counts as gone: it runs no more).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !exists(pid)
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// waitGone polls until pid is gone, failing past the deadline.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !gone(pid) {
		if time.Now().After(end) {
			t.Fatalf("process %d still runs %s after the proxy ended", pid, deadline)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

func TestUpstreamNeverOutlivesProxy(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	for _, way := range []string{"client goes", "SIGTERM", "SIGKILL"} {
		t.Run(way, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "TOOLCAS_TEST_ROLE=proxy", "TOOLCAS_TEST_STORE="+t.TempDir())
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			ctx := context.Background()
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, &sdk.IOTransport{Reader: stdout, Writer: stdin}, nil)
			if err != nil {
				t.Fatalf("connect: %v; proxy stderr: %s", err, stderr.String())
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "pid"})
			if err != nil {
				t.Fatal(err)
			}
			pid, _ := strconv.Atoi(res.Content[0].(*sdk.TextContent).Text)
			if pid == 0 || pid == cmd.Process.Pid || gone(pid) {
				t.Fatalf("upstream pid %d: not a live child of the proxy %d", pid, cmd.Process.Pid)
			}
			switch way {
			case "client goes":
				stdin.Close()
			case "SIGTERM":
				cmd.Process.Signal(syscall.SIGTERM)
			case "SIGKILL":
				cmd.Process.Kill()
			}
			err = cmd.Wait()
			if way != "SIGKILL" && err != nil {
				t.Errorf("proxy exited with %v; stderr: %s", err, stderr.String())
			}
			waitGone(t, pid)
		})
	}
}

// processRig is a proxy in this process in front of the test binary as an
// upstream process.
func processRig(t *testing.T, up mcp.Upstream, opts ...mcp.Option) *rig {
	t.Helper()
	r := &rig{store: openStore(t), changed: make(chan struct{}, 16), progress: make(chan *sdk.ProgressNotificationParams, 16)}
	p, err := mcp.NewProxy(context.Background(), up, r.store, append([]mcp.Option{mcp.WithLogger(quietLog())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	r.proxy = p
	r.client = r.connect(t)
	return r
}

// connectErr connects a client to a proxy in front of up, which must fail,
// and returns the error.
func connectErr(t *testing.T, up mcp.Upstream) error {
	t.Helper()
	st := openStore(t)
	p, err := mcp.NewProxy(context.Background(), up, st, mcp.WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a, b := sdk.NewInMemoryTransports()
	go p.Run(context.Background(), a)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(context.Background(), b, nil)
	if err == nil {
		cs.Close()
		t.Fatalf("a client connected through a proxy in front of %s", up)
	}
	storeUntouched(t, st)
	return err
}

// callErr calls a tool and returns the error the client gets.
func callErr(t *testing.T, r *rig, tool string) error {
	t.Helper()
	res, err := r.client.CallTool(context.Background(), &sdk.CallToolParams{Name: tool})
	if err == nil {
		t.Fatalf("call %s succeeded: %s", tool, jsonOf(t, res))
	}
	return err
}

// storeUntouched checks that the store holds nothing and is whole.
func storeUntouched(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	ps, err := st.List(ctx, store.ListOptions{})
	if err != nil || len(ps) != 0 {
		t.Errorf("store holds %d parts after a failed call, want 0 (%v)", len(ps), err)
	}
	v, err := st.Verify(ctx, store.VerifyOptions{})
	if err != nil || !v.OK || len(v.Orphans)+len(v.Temp) != 0 {
		t.Errorf("store verify after a failed call: %+v, %v", v, err)
	}
}

func TestBadUpstream(t *testing.T) {
	mustSay := func(t *testing.T, err error, parts ...string) {
		t.Helper()
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not say %q", err, p)
			}
		}
	}
	readToolWorks := func(t *testing.T, r *rig) {
		t.Helper()
		res := r.call(t, r.proxy.ReadToolName(), map[string]any{"ref": "nothing/1_x_call0.txt"})
		if !res.IsError {
			t.Errorf("read of a missing key did not say so: %s", jsonOf(t, res))
		}
	}

	// An upstream that cannot start fails the client's initialize with an
	// error naming it and saying why: never a session without its tools.
	t.Run("wont start", func(t *testing.T) {
		err := connectErr(t, mcp.NewCommand("/nonexistent/mcp-server", "--flag"))
		mustSay(t, err, "/nonexistent/mcp-server --flag", "did not start", "no such file")
	})
	t.Run("exits at start", func(t *testing.T) {
		err := connectErr(t, upstreamCommand("exit"))
		mustSay(t, err, os.Args[0], "exited with status 7", "missing config")
	})
	t.Run("dies mid-call", func(t *testing.T) {
		r := processRig(t, upstreamCommand(""))
		err := callErr(t, r, "crash")
		mustSay(t, err, os.Args[0], `tools/call "crash"`, "exited with status 3", "crashing on purpose")
		storeUntouched(t, r.store)
		readToolWorks(t, r) // with the upstream down
		// The next call starts the upstream again.
		if res := r.call(t, "big", nil); len(offloaded(t, res)) != 1 {
			t.Errorf("after a restart, big was not offloaded")
		}
	})
	t.Run("garbage", func(t *testing.T) {
		r := processRig(t, upstreamCommand(""))
		err := callErr(t, r, "garbage")
		mustSay(t, err, os.Args[0], "not JSON-RPC", "this is not JSON-RPC")
		storeUntouched(t, r.store)
		if res := r.call(t, "pid", nil); res.IsError {
			t.Errorf("after garbage, pid failed: %s", jsonOf(t, res))
		}
	})
	t.Run("timeout", func(t *testing.T) {
		r := processRig(t, upstreamCommand(""), mcp.WithCallTimeout(300*time.Millisecond))
		err := callErr(t, r, "hang")
		mustSay(t, err, os.Args[0], `did not answer tools/call "hang" within 300ms`)
		storeUntouched(t, r.store)
		if res := r.call(t, "pid", nil); res.IsError {
			t.Errorf("after a timeout, pid failed: %s", jsonOf(t, res))
		}
		var werr interface{ Error() string }
		if errors.As(err, &werr) && strings.Contains(werr.Error(), "internal") {
			t.Logf("error: %v", werr)
		}
	})
}
