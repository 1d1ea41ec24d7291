package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/mcp"
)

type mcpProxyOptions struct {
	offload     []string
	config      string
	run         string
	listen      string
	upstreamURL string
	timeout     time.Duration
	noLinks     bool
	quiet       bool
	maxMessage  int64
	spoolDir    string
	idle        time.Duration
	maxResource int64
}

func newMCPProxyCommand(g *globals) *cobra.Command {
	var o mcpProxyOptions
	cmd := &cobra.Command{
		Use:   "proxy [flags] -- UPSTREAM-COMMAND [ARGS...]",
		Short: "Serve an MCP server's tools with their large results offloaded",
		Long: `proxy is an MCP server on stdio (or, with --listen, streamable HTTP) in front
of one upstream MCP server: the command after --, run as a child over stdio,
or --upstream-url, reached over streamable HTTP.

Every message passes between the client and the upstream as it came: tools,
prompts, resources, completions, logging, and what the upstream asks the
client (sampling, elicitation, roots). Every tool result goes through the
offload hook: one over the policy's threshold is stored and the client gets a
pointer instead, with a resource link per part. The read_tool_result tool
(renamed if the upstream has one) and resources/read of toolcas://RUN/KEY read
offloaded parts back. Each client session has its own upstream (its own
process, for a command) and is a run, --run NAME or one named from the date and
a random suffix; the step is the session's count of tool calls. An upstream
that dies, or stops answering after a call timed out (--timeout), is started
again on the session's next request.

A message over a few megabytes passes through a temporary file (--spool-dir),
in bounded memory; one over --max-message is refused with an error naming the
limit.

Policies: --offload TOOL=over:N|always|never, repeated ('*' for every other
tool; default '*=over:8000'), or --config FILE holding a hook configuration
(what hook.Load reads; its offload_strategies and preview_chars apply, the
store is always --store).`,
		Example: `  casctl mcp proxy -- npx -y @modelcontextprotocol/server-filesystem ~/src
  casctl mcp proxy --offload '*=over:4000' --offload 'get_time=never' \
    -- uvx mcp-server-fetch
  casctl mcp proxy --upstream-url http://localhost:3001/mcp \
    --listen localhost:8931`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return usagef("mcp proxy: %q before --: put the upstream command after --", args[0])
			}
			return runMCPProxy(cmd.Context(), g, o, args)
		},
	}
	// casctl mcp proxy npx -y SERVER (a client that dropped the --): the
	// upstream's flags are not casctl's, and the error says where they go.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if before := c.Flags().Args(); len(before) > 0 {
			return usagef("mcp proxy: %v, after %q: the upstream command and its flags go after --: casctl mcp proxy [flags] -- %s ...",
				err, before[0], before[0])
		}
		return usagef("mcp proxy: %v", err)
	})
	f := cmd.Flags()
	f.StringArrayVar(&o.offload, "offload", nil, "offload policy TOOL=over:N|always|never (repeatable; '*' for every other tool)")
	f.StringVar(&o.config, "config", "", "hook configuration file giving the policies (instead of --offload)")
	f.StringVar(&o.run, "run", "", "run name for every session (default: date and random suffix per session)")
	f.StringVar(&o.listen, "listen", "", "serve streamable HTTP on this address (host:port) instead of stdio")
	f.StringVar(&o.upstreamURL, "upstream-url", "", "reach the upstream over streamable HTTP at this URL instead of running a command")
	f.DurationVar(&o.timeout, "timeout", 0, "cancel a tool call the upstream has not answered within this long (0: no limit)")
	f.BoolVar(&o.noLinks, "no-links", false, "pointers carry no resource links, only text")
	f.Int64Var(&o.maxMessage, "max-message", mcp.DefaultMaxMessage, "refuse a message (a tool's result, say) of more than this many bytes")
	f.StringVar(&o.spoolDir, "spool-dir", "", "keep messages too large for memory here while relaying them (default: the system's temporary directory)")
	f.DurationVar(&o.idle, "idle-timeout", mcp.DefaultIdleTimeout, "with --listen, end a client session (and its upstream) idle this long")
	f.BoolVar(&o.quiet, "quiet", false, "log only errors to stderr")
	f.Int64Var(&o.maxResource, "max-resource-bytes", mcp.DefaultMaxResourceBytes, "resources/read of a toolcas:// part returns at most this many bytes: a longer text its first lines, and how to read on")
	return cmd
}

func runMCPProxy(ctx context.Context, g *globals, o mcpProxyOptions, args []string) error {
	var up mcp.Upstream
	switch {
	case o.upstreamURL != "" && len(args) > 0:
		return usagef("mcp proxy: give --upstream-url or an upstream command after --, not both")
	case o.upstreamURL != "":
		up = &mcp.URL{Endpoint: o.upstreamURL}
	case len(args) > 0:
		up = &mcp.Command{Path: args[0], Args: args[1:], Stderr: g.stderr}
	default:
		return usagef("mcp proxy: no upstream: give its command after -- (casctl mcp proxy -- npx -y SERVER) or --upstream-url URL")
	}
	if o.config != "" && len(o.offload) > 0 {
		return usagef("mcp proxy: give --offload or --config, not both")
	}
	if o.timeout < 0 {
		return usagef("mcp proxy: --timeout %s is negative", o.timeout)
	}
	level := slog.LevelInfo
	if o.quiet {
		level = slog.LevelError
	}
	log := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level}))
	opts := []mcp.Option{mcp.WithLogger(log), mcp.WithCallTimeout(o.timeout), mcp.WithResourceLinks(!o.noLinks), mcp.WithSpoolDir(o.spoolDir)}
	if o.maxMessage < 1<<10 {
		return usagef("mcp proxy: --max-message %d: want at least 1024 bytes", o.maxMessage)
	}
	if o.idle <= 0 {
		return usagef("mcp proxy: --idle-timeout %s: want a positive duration", o.idle)
	}
	if o.maxResource < 4<<10 {
		return usagef("mcp proxy: --max-resource-bytes %d: want at least 4096 bytes", o.maxResource)
	}
	opts = append(opts, mcp.WithMaxMessage(o.maxMessage), mcp.WithIdleTimeout(o.idle), mcp.WithMaxResourceBytes(o.maxResource))
	if o.run != "" {
		if err := hook.CheckRun(o.run); err != nil {
			return usagef("mcp proxy: --run: %v", err)
		}
		opts = append(opts, mcp.WithRun(o.run))
	}
	if o.config != "" {
		data, err := os.ReadFile(o.config)
		if err != nil {
			return fmt.Errorf("mcp proxy: --config: %w", err)
		}
		h, err := hook.Load(data)
		if err != nil {
			return fmt.Errorf("mcp proxy: --config %s: %w", o.config, err)
		}
		defer h.Close()
		opts = append(opts, mcp.WithHook(h))
	} else {
		s, err := mcp.ParseOffload(o.offload)
		if err != nil {
			return usagef("mcp proxy: --offload: %v", err)
		}
		opts = append(opts, mcp.WithStrategies(s))
	}
	ctx, stop := untilSignal(ctx)
	defer stop()
	// The proxy is what an agent's configuration starts: its first start
	// makes the store, as demo does.
	st, created, err := g.create(ctx)
	if err != nil {
		return fail("mcp proxy", err)
	}
	defer st.Close()
	if created {
		// stderr: stdout is the MCP connection.
		fmt.Fprintf(g.stderr, "casctl: created store at %s\n", st.Dir())
	}
	p, err := mcp.NewProxy(ctx, up, st, opts...)
	if err != nil {
		return fmt.Errorf("mcp proxy: %w", err)
	}
	defer p.Close()
	if o.listen == "" {
		return p.Run(ctx, &sdk.IOTransport{Reader: readCloser{g.stdin}, Writer: writeCloser{g.stdout}})
	}
	// On a signal, end the sessions at once: a request in flight then
	// gets its end of stream, and the server's shutdown does not wait
	// for it.
	go func() {
		<-ctx.Done()
		p.Close()
	}()
	return serveHTTP(ctx, g, o.listen, p.Handler(), log)
}

// shutdownWait is how long an HTTP server waits, once told to stop, for
// the requests it is answering.
const shutdownWait = time.Second

// serveHTTP serves h at /mcp on addr until ctx ends.
func serveHTTP(ctx context.Context, g *globals, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mcp: --listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(g.stderr, "casctl: serving MCP at http://%s/mcp\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("mcp: %w", err)
	case <-ctx.Done():
	}
	// Within 2 s of a signal, whatever is in flight: what has not ended
	// by then is cut.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownWait)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("shutdown: " + err.Error())
	}
	srv.Close()
	return nil
}
