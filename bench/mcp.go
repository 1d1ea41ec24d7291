package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/mcp"
	"github.com/toolcas/toolcas/store"
)

// The MCP benchmark (go run ./bench -mcp) measures what the proxy adds to
// a tools/call: the same client calls the same upstream server process,
// directly and through a proxy process in front of another copy of it, in
// turns, and compares the latencies. The small result stays under the
// policy's threshold; the 64 KiB one is offloaded into a durable store,
// and is different on every call, so that every call writes a blob.
const (
	mcpStoreEnv = "TOOLCAS_BENCH_MCP_STORE"
	smallSize   = 200
	bigSize     = 64 << 10
)

// mcpUpstream serves the benchmark's two tools on stdio.
func mcpUpstream(ctx context.Context) error {
	s := sdk.NewServer(&sdk.Implementation{Name: "bench-upstream", Version: "1"}, nil)
	schema := map[string]any{"type": "object"}
	small := strings.Repeat("s", smallSize)
	var n atomic.Int64
	s.AddTool(&sdk.Tool{Name: "small", InputSchema: schema}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: small}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "big", InputSchema: schema}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		head := fmt.Sprintf("result %d of pid %d\n", n.Add(1), os.Getpid())
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: head + strings.Repeat("b", bigSize-len(head))}}}, nil
	})
	return s.Run(ctx, &sdk.StdioTransport{})
}

// mcpProxy is casctl mcp proxy's work, in front of mcpUpstream: a durable
// store and the default policy (offload over 8,000 characters).
func mcpProxy(ctx context.Context) error {
	st, err := store.Open(ctx, os.Getenv(mcpStoreEnv), store.WithCreate())
	if err != nil {
		return err
	}
	defer st.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	up := &mcp.Command{Path: exe, Env: append(os.Environ(), childEnv+"=mcp-upstream")}
	p, err := mcp.NewProxy(ctx, up, st)
	if err != nil {
		return err
	}
	return p.Run(ctx, &sdk.StdioTransport{})
}

// mcpRun is one measured series.
type mcpRun struct {
	Tool    string
	Path    string // "direct" or "proxy"
	Samples []time.Duration
}

// benchMCP runs the benchmark: reps rounds of n calls of each tool each
// way, interleaved call by call, after a warm-up.
func benchMCP(ctx context.Context, dir string, n, reps int, stderr io.Writer) ([]mcpRun, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	stderr = &lockedWriter{w: stderr} // both children write to it
	connect := func(role string, env ...string) (*sdk.ClientSession, error) {
		cmd := exec.Command(exe)
		cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
		cmd.Stderr = stderr
		return sdk.NewClient(&sdk.Implementation{Name: "bench"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	}
	direct, err := connect("mcp-upstream")
	if err != nil {
		return nil, fmt.Errorf("start the upstream: %w", err)
	}
	defer direct.Close()
	proxied, err := connect("mcp-proxy", mcpStoreEnv+"="+filepath.Join(dir, "mcp-store"))
	if err != nil {
		return nil, fmt.Errorf("start the proxy: %w", err)
	}
	defer proxied.Close()
	sessions := map[string]*sdk.ClientSession{"direct": direct, "proxy": proxied}
	call := func(path, tool string) (time.Duration, error) {
		start := time.Now()
		res, err := sessions[path].CallTool(ctx, &sdk.CallToolParams{Name: tool})
		d := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("%s %s: %w", path, tool, err)
		}
		_, offloaded := res.Meta["tool_result_offloaded"]
		if want := path == "proxy" && tool == "big"; offloaded != want {
			return 0, fmt.Errorf("%s %s: offloaded %v, want %v", path, tool, offloaded, want)
		}
		return d, nil
	}
	var runs []mcpRun
	for _, tool := range []string{"small", "big"} {
		for _, path := range []string{"direct", "proxy"} {
			runs = append(runs, mcpRun{Tool: tool, Path: path})
		}
	}
	for i := 0; i < 50; i++ { // warm-up
		for _, r := range runs {
			if _, err := call(r.Path, r.Tool); err != nil {
				return nil, err
			}
		}
	}
	for rep := 0; rep < reps; rep++ {
		fmt.Fprintf(stderr, "mcp: round %d of %d…\n", rep+1, reps)
		for i := 0; i < n; i++ {
			// Alternate which way goes first, so that neither always
			// follows the other.
			order := []int{0, 1, 2, 3}
			if i%2 == 1 {
				order = []int{1, 0, 3, 2}
			}
			for _, k := range order {
				d, err := call(runs[k].Path, runs[k].Tool)
				if err != nil {
					return nil, err
				}
				runs[k].Samples = append(runs[k].Samples, d)
			}
		}
	}
	return runs, nil
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

// mcpReport renders the results as markdown.
func mcpReport(command string, m machine, n, reps int, runs []mcpRun, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# MCP proxy: added latency per tools/call\n\n")
	fmt.Fprintf(&b, "Regenerate with `%s` (about %s here).\n\n", command, took.Round(time.Second))
	fmt.Fprintf(&b, "Machine: %s, %d cores, %d GiB, kernel %s, %s, store on %s.\n\n", m.CPU, m.Cores, m.MemoryGiB, m.Kernel, m.GoVersion, m.FileSystem)
	fmt.Fprintf(&b, "One Go MCP client (the official SDK, v1.8.0) calls the same upstream server, a Go process on stdio,\n")
	fmt.Fprintf(&b, "directly and through the proxy (a process on stdio, with the upstream as its child), call by call\n")
	fmt.Fprintf(&b, "in turns, %d rounds of %d calls of each tool each way, after 50 warm-up calls.\n", reps, n)
	fmt.Fprintf(&b, "`small` answers %d bytes (under the default threshold: passed untouched);\n", smallSize)
	fmt.Fprintf(&b, "`big` answers 64 KiB, different on every call (offloaded: a new blob and row in a durable store, fsync'd, every call).\n\n")
	w := tabwriter.NewWriter(&b, 0, 4, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(w, "| result\t round\t direct p50\t proxy p50\t added p50\t direct p99\t proxy p99\t added p99\t")
	fmt.Fprintln(w, "|---\t---\t---\t---\t---\t---\t---\t---\t")
	for t := 0; t < len(runs); t += 2 {
		d, p := runs[t], runs[t+1]
		rows := [][2][]time.Duration{}
		for r := 0; r < reps; r++ {
			rows = append(rows, [2][]time.Duration{d.Samples[r*n : (r+1)*n], p.Samples[r*n : (r+1)*n]})
		}
		rows = append(rows, [2][]time.Duration{d.Samples, p.Samples})
		for r, row := range rows {
			label := fmt.Sprint(r + 1)
			if r == reps {
				label = "all"
			}
			d50, p50 := quantile(row[0], 0.5), quantile(row[1], 0.5)
			d99, p99 := quantile(row[0], 0.99), quantile(row[1], 0.99)
			fmt.Fprintf(w, "| %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t\n", d.Tool, label, ms(d50), ms(p50), ms(p50-d50), ms(d99), ms(p99), ms(p99-d99))
		}
	}
	w.Flush()
	small := quantile(runs[1].Samples, 0.5) - quantile(runs[0].Samples, 0.5)
	verdict := "met"
	if small > time.Millisecond {
		verdict = "NOT met"
	}
	fmt.Fprintf(&b, "\nGoal: at most 1 ms added at p50 for the small result: %s (%s added over all rounds).\n", verdict, ms(small))
	fmt.Fprintf(&b, "\nThe p99s move with whatever else the machine runs (a p99 difference can even come out negative); the p50s are steady from round to round.\n")
	return strings.ReplaceAll(b.String(), " |\n", "\n")
}

// runMCPBench is go run ./bench -mcp.
func runMCPBench(ctx context.Context, o options, n, reps int, stdout, stderr io.Writer) error {
	work, removeWork, err := workDir(o.dir, "toolcas-bench-mcp-")
	if err != nil {
		return err
	}
	defer removeWork()
	start := time.Now()
	runs, err := benchMCP(ctx, work, n, reps, stderr)
	if err != nil {
		return err
	}
	report := mcpReport(o.command, describeMachine(work), n, reps, runs, time.Since(start))
	if o.out != "" {
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(o.out, "MCP.md"), []byte(report), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprint(stdout, report)
	return nil
}

// mcpChild runs an MCP role on stdio until its client goes.
func mcpChild(role string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	switch role {
	case "mcp-upstream":
		err = mcpUpstream(ctx)
	case "mcp-proxy":
		err = mcpProxy(ctx)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "bench:", role+":", err)
		return 1
	}
	return 0
}

// lockedWriter serialises writes from several processes' stderr copiers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
