package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An Upstream is the MCP server a Proxy sits in front of: a command it
// starts (Command), a URL it reaches over streamable HTTP (URL), or any
// transport (Dial).
type Upstream interface {
	// String names the upstream in messages: its command line or URL.
	String() string
	// open starts or reaches the upstream once; the process, when there is
	// one, is returned so that the proxy can end it and say how it ended.
	open(ctx context.Context) (sdk.Transport, *child, error)
}

// Command is an upstream server the proxy runs as a child process, talking
// MCP over its stdin and stdout. The child is in its own process group and,
// on Linux, gets SIGTERM if the proxy dies: it never outlives the proxy.
type Command struct {
	// Path and Args are the program and its arguments, as for exec.Command.
	Path string
	Args []string
	// Env, when set, is the child's environment; else it inherits ours.
	Env []string
	// Dir is the child's working directory; empty means ours.
	Dir string
	// Stderr receives what the child writes to its stderr (default
	// os.Stderr); the proxy also keeps its end for error messages.
	Stderr io.Writer
	// StopGrace is how long the child has to exit after its stdin closes,
	// and again after SIGTERM, before it is killed (default 2s).
	StopGrace time.Duration
}

// NewCommand returns the upstream that runs name with args.
func NewCommand(name string, args ...string) *Command {
	return &Command{Path: name, Args: args}
}

func (c *Command) String() string {
	return strings.Join(append([]string{c.Path}, c.Args...), " ")
}

func (c *Command) open(context.Context) (sdk.Transport, *child, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env, cmd.Dir = c.Env, c.Dir
	stderr := c.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	grace := c.StopGrace
	if grace <= 0 {
		grace = 2 * time.Second
	}
	ch, err := startChild(cmd, stderr, grace)
	if err != nil {
		return nil, nil, err
	}
	return &sdk.IOTransport{Reader: ch.stdout, Writer: ch.stdin}, ch, nil
}

// URL is an upstream server reached over MCP's streamable HTTP transport.
type URL struct {
	// Endpoint is the server's MCP endpoint, http://host:port/mcp say.
	Endpoint string
	// Client is the HTTP client to use (default http.DefaultClient).
	Client *http.Client
}

func (u *URL) String() string { return u.Endpoint }

func (u *URL) open(context.Context) (sdk.Transport, *child, error) {
	return &sdk.StreamableClientTransport{Endpoint: u.Endpoint, HTTPClient: u.Client, MaxRetries: 1}, nil, nil
}

// Dial is an upstream reached through any transport: Connect is called once
// for every connection the proxy makes (and makes again after the upstream
// went away). Tests use it with the SDK's in-memory transports.
type Dial struct {
	// Name names the upstream in messages.
	Name    string
	Connect func(ctx context.Context) (sdk.Transport, error)
}

func (d *Dial) String() string { return d.Name }

func (d *Dial) open(ctx context.Context) (sdk.Transport, *child, error) {
	t, err := d.Connect(ctx)
	return t, nil, err
}

// upstreamConn is one live connection to the upstream.
type upstreamConn struct {
	cs    *sdk.ClientSession
	child *child
	// down closes once the connection has ended; why says how.
	down chan struct{}
	why  string
}

// watch waits for the connection to end, works out why, and ends the
// child process.
func (uc *upstreamConn) watch(onDown func(*upstreamConn)) {
	err := uc.cs.Wait()
	if uc.child != nil {
		// A crashed child closes its stdout a moment before it is reaped:
		// give the exit status the chance to be the reason.
		uc.child.wait(time.Second)
		uc.why = uc.child.describe()
		uc.child.stop()
	} else if err != nil {
		uc.why = fmt.Sprintf("closed the connection: %v", err)
	} else {
		uc.why = "closed the connection"
	}
	close(uc.down)
	onDown(uc)
}

// isDown reports whether the connection has ended.
func (uc *upstreamConn) isDown() bool {
	select {
	case <-uc.down:
		return true
	default:
		return false
	}
}

// alive reports whether the upstream still answers a ping.
func (uc *upstreamConn) alive(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	return uc.cs.Ping(ctx, nil) == nil
}

// orderedTransport passes the upstream's progress notifications on as it
// reads them, in the order they came, so that each reaches the client
// before the answer that follows it. (The SDK queues notifications for
// their handler apart from answers, and a client drops progress that comes
// after the answer.) Over HTTP, whose connection the SDK needs to see
// unwrapped, a progressTap does the same on the event stream.
type orderedTransport struct {
	sdk.Transport
	p *Proxy
}

func (t *orderedTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &orderedConn{Connection: c, p: t.p}, nil
}

type orderedConn struct {
	sdk.Connection
	p *Proxy
}

func (c *orderedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || req.IsCall() || req.Method != "notifications/progress" {
			return msg, nil
		}
		var params sdk.ProgressNotificationParams
		if json.Unmarshal(req.Params, &params) != nil || !c.p.forwardProgress(ctx, &params, viaConn) {
			return msg, nil
		}
	}
}

var jsonUnmarshal = json.Unmarshal
