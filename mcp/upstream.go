package mcp

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An Upstream is the MCP server a Proxy sits in front of: a command it
// starts (Command), a URL it reaches over streamable HTTP (URL), or any
// transport (Dial).
type Upstream interface {
	// String names the upstream in messages: its command line or URL.
	String() string
	// connect starts or reaches the upstream once, for one client session.
	connect(ctx context.Context, o *connectOptions) (upstreamConn, error)
}

// connectOptions are what a connection to the upstream needs to know.
type connectOptions struct {
	maxMessage int64
	spoolDir   string
}

// Command is an upstream server the proxy runs as a child process, talking
// MCP over its stdin and stdout: one process for each client session. The child is in its own process group and,
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
	// and again after SIGTERM, before it is killed (default 500ms: a
	// proxy told to stop is gone, its upstream with it, within 2s).
	StopGrace time.Duration
}

// NewCommand returns the upstream that runs name with args.
func NewCommand(name string, args ...string) *Command {
	return &Command{Path: name, Args: args}
}

func (c *Command) String() string {
	return strings.Join(append([]string{c.Path}, c.Args...), " ")
}

func (c *Command) connect(_ context.Context, o *connectOptions) (upstreamConn, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env, cmd.Dir = c.Env, c.Dir
	stderr := c.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	grace := c.StopGrace
	if grace <= 0 {
		grace = 500 * time.Millisecond
	}
	ch, err := startChild(cmd, stderr, grace)
	if err != nil {
		return nil, err
	}
	return &childConn{lineConn: lineConn{r: newLineReader(ch.stdout, o.maxMessage, o.spoolDir), w: newLineWriter(ch.stdin)}, ch: ch}, nil
}

// URL is an upstream server reached over MCP's streamable HTTP transport:
// one MCP session for each client session.
type URL struct {
	// Endpoint is the server's MCP endpoint, http://host:port/mcp say.
	Endpoint string
	// Client is the HTTP client to use (default http.DefaultClient).
	Client *http.Client
}

func (u *URL) String() string { return u.Endpoint }

func (u *URL) connect(_ context.Context, o *connectOptions) (upstreamConn, error) {
	return newHTTPUp(u.Endpoint, u.Client, o), nil
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

func (d *Dial) connect(ctx context.Context, _ *connectOptions) (upstreamConn, error) {
	t, err := d.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return connectSDK(ctx, t)
}
