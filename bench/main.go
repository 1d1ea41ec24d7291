// Command bench measures how much toolcas saves and how fast it is, against
// what users would use instead, in one run on one machine:
//
//	go run ./bench            # the full report, in bench/results/
//	go run ./bench -quick     # a small run, under 30 s, report in a temp dir
//	go run ./bench -json      # results as JSON on stdout
//	go run ./bench -trace bench/traces/mini-swe-agent-deepseek.jsonl.gz \
//	    -synthetic=false -out bench/results/real-trace   # a real trace
//	go run ./bench -mcp       # the MCP proxy's added latency, bench/results/MCP.md
//	go run ./bench -scale -dir /dev/shm  # maintenance at 10k to 1M parts, bench/results/SCALE.md
//	go run ./bench -remote    # local vs PostgreSQL and S3 on loopback, bench/results/REMOTE.md
//	go run ./bench -search -trace-scale 130 -dir /tmp  # Grep and its index vs rg, bench/results/SEARCH.md
//
// It replays a deterministic agent trace (runs of steps calling read_file,
// grep, list_dir, run_tests, web_fetch and screenshot over the Go source
// tree) through the offload hook into each store, each in its own process,
// and measures the project's speed targets against bare file-system work.
// With -trace it also replays recorded tool output of real agents into
// every store, in rounds that take the stores in turn, packs the CAS
// stores at the end, and compares them on disk and in speed.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/internal/trace"
)

const (
	childEnv  = "TOOLCAS_BENCH_CHILD"
	configEnv = "TOOLCAS_BENCH_CONFIG"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if role := os.Getenv(childEnv); role != "" {
		if strings.HasPrefix(role, "mcp-") {
			os.Exit(mcpChild(role))
		}
		os.Exit(child(ctx, role, os.Getenv(configEnv), os.Stdout, os.Stderr))
	}
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

// options are the command's flags.
type options struct {
	quick     bool
	json      bool
	out       string
	dir       string
	runs      int
	steps     int
	seed      uint64
	zipf      float64
	targets   bool
	command   string
	trace     string
	threshold int
	rounds    int
	synthetic bool
	agents    int
}

// reportHead is what the reports of a trace's replays begin with (Report,
// remoteReport): the command, when and where it ran, and the synthetic
// trace. It is embedded, so that its fields stay first in their JSON.
type reportHead struct {
	Command string       `json:"command"`
	Date    time.Time    `json:"date"`
	Machine machine      `json:"machine"`
	Trace   trace.Config `json:"trace"`
}

// reportHead is the head of a report of the run o asks for, started at
// start, its stores in work.
func (o options) reportHead(start time.Time, work string) reportHead {
	return reportHead{Command: o.command, Date: start.UTC().Truncate(time.Second), Machine: describeMachine(work),
		Trace: trace.Config{Seed: o.seed, Runs: o.runs, Steps: o.steps, Zipf: o.zipf}}
}

// Report is everything one run measured.
type Report struct {
	reportHead
	Seconds  float64        `json:"seconds"`
	Repeat   []replayResult `json:"repeat"`
	NoRepeat []replayResult `json:"no_repeat"`
	// RepeatRounds and NoRepeatRounds hold every replay, round by round;
	// Repeat and NoRepeat each store's median round of them.
	RepeatRounds   []replayResult `json:"repeat_rounds,omitempty"`
	NoRepeatRounds []replayResult `json:"no_repeat_rounds,omitempty"`
	Targets        []target       `json:"targets"`
	// LoadBefore and LoadAfter are the machine's load averages when the
	// run started and ended: figures taken on a busy machine say so.
	LoadBefore string   `json:"load_before,omitempty"`
	LoadAfter  string   `json:"load_after,omitempty"`
	Checks     []string `json:"checks"`
	// Real is the replay of a real trace, when one was given.
	Real *realReport `json:"real_trace,omitempty"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if err := platformErr(); err != nil {
		return err
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.BoolVar(&o.quick, "quick", false, "a small run, under 30 s")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON")
	fs.StringVar(&o.out, "out", filepath.Join("bench", "results"), "where the report and charts go (empty: nowhere)")
	fs.StringVar(&o.dir, "dir", "", "where the stores are made (default: a temp directory)")
	fs.IntVar(&o.runs, "runs", 0, "agent runs (default 10, 2 with -quick)")
	fs.IntVar(&o.steps, "steps", 0, "steps per run (default 200, 25 with -quick)")
	fs.Uint64Var(&o.seed, "seed", 1, "trace seed")
	fs.Float64Var(&o.zipf, "zipf", 1.1, "Zipf exponent of repetition (over 1; higher repeats more)")
	fs.BoolVar(&o.targets, "targets", true, "measure the speed targets")
	fs.StringVar(&o.trace, "trace", "", "also replay this real trace (JSON lines of tool results, chat message lists, .traj.json; a file or a directory)")
	fs.IntVar(&o.agents, "agents", 1, "with -trace: also replay the real trace into every store with this many agents writing at once in one process (the one-agent replays are always made and reported)")
	fs.IntVar(&o.threshold, "threshold", 2000, "with -trace: offload results over this many characters")
	fs.IntVar(&o.rounds, "rounds", 0, "rounds of replays, the stores taking turns (default 3, 1 with -quick)")
	fs.BoolVar(&o.synthetic, "synthetic", true, "replay the synthetic trace and measure the targets (false: only -trace)")
	writePath := fs.Bool("write-path", false, "only measure the write path's targets (durable step, sync=none, four runs at once) and print them")
	mcpBench := fs.Bool("mcp", false, "measure the MCP proxy's added latency instead (bench/results/MCP.md)")
	mcpCalls := fs.Int("mcp-calls", 500, "with -mcp: calls of each tool each way per round")
	mcpRounds := fs.Int("mcp-rounds", 3, "with -mcp: rounds")
	scale := fs.Bool("scale", false, "measure maintenance at 10,000 to 1,000,000 parts instead (bench/results/SCALE.md); not part of -quick")
	scaleSizes := fs.String("scale-sizes", "10000,100000,1000000", "with -scale: the store sizes, in parts, comma-separated")
	scaleReuse := fs.Bool("scale-reuse", false, "with -scale: keep each filled store in -dir as scale-N-filled and measure on a copy of it, reusing one an earlier run left there instead of filling again (remove them by hand when done)")
	scaleOps := fs.String("scale-ops", "", "with -scale: measure only these steps, comma-separated, of "+strings.Join(scaleSteps, ",")+" (default all); printed as JSON, not written to -out unless -out is given")
	remote := fs.Bool("remote", false, "replay the trace into a local store and into stores on PostgreSQL and S3 (servers started on loopback) instead (bench/results/REMOTE.md); not part of -quick")
	searchBench := fs.Bool("search", false, "measure search instead: Store.Grep and its index against rg over a directory store of the real trace's offloaded results, and the alternatives to the index (bench/results/SEARCH.md); the stores of the scaled copy stay in -dir, when it is given, as search-scaled")
	traceScale := fs.Int("trace-scale", 1, "with -search: copies of the real trace's offloaded results to search")
	searchRounds := fs.Int("search-rounds", 7, "with -search: rounds of timed searches")
	searchCasctl := fs.String("casctl", "", "with -search: also time this casctl binary's grep command")
	retention := fs.Bool("retention", false, "measure a retention quota instead: the real trace replayed -retention-copies times into a store with no policy and one with a quota of a tenth of that (bench/results/RETENTION.md)")
	retentionCopies := fs.Int("retention-copies", 100, "with -retention: copies of the real trace to replay")
	retentionActive := fs.Duration("retention-active", 5*time.Second, "with -retention: the policy's active window (and keep_loose_for)")
	contextBench := fs.Bool("context", false, "measure what offloading saves in context instead: each run of -trace (default the real trace) replayed as a conversation, the tokens every model call sends counted with o200k_base, per configuration (bench/results/CONTEXT.md)")
	contextTokens := fs.Int("context-tokens", 500, "with -context: toolcas's OverTokens threshold")
	contextBudget := fs.Int("context-step-budget", 2000, "with -context: toolcas's step budget, in tokens")
	contextWindow := fs.String("context-window", "4096,8192,16384", "with -context: the trigger's context windows, in tokens, comma-separated: each compactor runs at each")
	contextAt := fs.Float64("context-compact-at", compact.DefaultCompactAt, "with -context: the share of the window at which the trigger compacts")
	contextTo := fs.Float64("context-compact-to", compact.DefaultCompactTo, "with -context: the share of the window the trigger compacts to")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	outSet := false
	fs.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	o.command = strings.Join(append([]string{"go run ./bench"}, args...), " ")
	if *writePath {
		return runWritePath(ctx, o, stdout)
	}
	if *mcpBench {
		if *mcpCalls < 1 || *mcpRounds < 1 {
			return usageError{fmt.Errorf("-mcp-calls %d -mcp-rounds %d: both must be positive", *mcpCalls, *mcpRounds)}
		}
		return runMCPBench(ctx, o, *mcpCalls, *mcpRounds, stdout, stderr)
	}
	if *contextBench {
		windows, err := parseSizes(*contextWindow, 1)
		if err != nil {
			return usageError{fmt.Errorf("-context-window %q: %w", *contextWindow, err)}
		}
		if *contextTokens < 0 || *contextBudget < 1 {
			return usageError{fmt.Errorf("-context-tokens %d -context-step-budget %d: the threshold must be 0 or more, the budget positive", *contextTokens, *contextBudget)}
		}
		if o.trace == "" {
			o.trace = filepath.Join("bench", "traces", "mini-swe-agent-deepseek.jsonl.gz")
		}
		dir, removeDir, err := workDir(o.dir, "toolcas-context-")
		if err != nil {
			return err
		}
		defer removeDir()
		return runContext(ctx, contextRun{trace: o.trace, tokens: *contextTokens, stepBudget: *contextBudget, windows: windows,
			compactAt: *contextAt, compactTo: *contextTo, dir: dir, out: o.out, json: o.json, command: o.command}, stdout, stderr)
	}
	if *retention {
		if *retentionCopies < 1 || *retentionActive <= 0 {
			return usageError{fmt.Errorf("-retention-copies %d -retention-active %v: both must be positive", *retentionCopies, *retentionActive)}
		}
		if o.trace == "" {
			o.trace = filepath.Join("bench", "traces", "mini-swe-agent-deepseek.jsonl.gz")
		}
		if o.rounds == 0 {
			o.rounds = 2
		}
		dir, removeDir, err := workDir(o.dir, "toolcas-retention-")
		if err != nil {
			return err
		}
		defer removeDir()
		return runRetention(ctx, retentionRun{trace: o.trace, threshold: o.threshold, copies: *retentionCopies, rounds: o.rounds,
			active: *retentionActive, dir: dir, out: o.out, command: o.command}, stdout, stderr)
	}
	if *searchBench {
		if *traceScale < 1 || *searchRounds < 1 {
			return usageError{fmt.Errorf("-trace-scale %d -search-rounds %d: both must be positive", *traceScale, *searchRounds)}
		}
		if o.trace == "" {
			o.trace = filepath.Join("bench", "traces", "mini-swe-agent-deepseek.jsonl.gz")
		}
		dir, removeDir, err := workDir(o.dir, "toolcas-search-")
		if err != nil {
			return err
		}
		defer removeDir()
		return runSearch(ctx, searchRun{trace: o.trace, threshold: o.threshold, scale: *traceScale, rounds: *searchRounds,
			dir: dir, out: o.out, command: o.command, seed: o.seed, casctl: *searchCasctl, agentCalls: 1000}, stdout, stderr)
	}
	if *scale {
		sizes, err := parseSizes(*scaleSizes, 10_000)
		if err != nil {
			return usageError{fmt.Errorf("-scale-sizes %q: %w", *scaleSizes, err)}
		}
		if o.quick {
			return usageError{errors.New("-scale and -quick: the scale section is never quick")}
		}
		ops, err := parseScaleOps(*scaleOps)
		if err != nil {
			return usageError{err}
		}
		if len(ops) < len(scaleSteps) && !outSet {
			// Some steps only: a report of them would replace the
			// committed one with a table of blanks. They print as JSON,
			// unless told where to write.
			o.out = ""
		}
		if *scaleReuse && o.dir == "" {
			return usageError{errors.New("-scale-reuse needs -dir: the filled stores are kept there")}
		}
		dir, removeDir, err := workDir(o.dir, "toolcas-scale-")
		if err != nil {
			return err
		}
		defer removeDir()
		return runScale(ctx, scaleRun{sizes: sizes, dir: dir, out: o.out, command: o.command, reuse: *scaleReuse, ops: ops}, stderr)
	}
	if o.runs == 0 {
		o.runs = map[bool]int{true: 2, false: 10}[o.quick]
	}
	if o.steps == 0 {
		o.steps = map[bool]int{true: 25, false: 200}[o.quick]
	}
	if o.runs < 1 || o.steps < 1 {
		return usageError{fmt.Errorf("-runs %d -steps %d: both must be positive", o.runs, o.steps)}
	}
	if o.rounds == 0 {
		o.rounds = map[bool]int{true: 1, false: 3}[o.quick]
	}
	if o.agents < 1 || o.agents > 64 {
		return usageError{fmt.Errorf("-agents %d: want 1 to 64", o.agents)}
	}
	if o.threshold < 0 || o.rounds < 1 {
		return usageError{fmt.Errorf("-threshold %d -rounds %d: the threshold must not be negative, the rounds positive", o.threshold, o.rounds)}
	}
	if *remote {
		if o.quick {
			return usageError{errors.New("-remote and -quick: the remote section is never quick")}
		}
		return runRemote(ctx, o, stdout, stderr)
	}
	if !o.synthetic && o.trace == "" {
		return usageError{errors.New("-synthetic=false measures nothing without -trace")}
	}
	if o.trace != "" {
		if _, err := loadRealTrace(o.trace); err != nil {
			return usageError{err}
		}
	}
	if o.quick && !outSet {
		// A quick run is a smoke test: it never overwrites the committed
		// report unless told where to write.
		dir, err := os.MkdirTemp("", "toolcas-bench-report-")
		if err != nil {
			return err
		}
		o.out = dir
	}
	work, removeWork, err := workDir(o.dir, "toolcas-bench-")
	if err != nil {
		return err
	}
	defer removeWork()
	start := time.Now()
	rep := Report{reportHead: o.reportHead(start, work), LoadBefore: loadAverage()}
	progress := func(format string, args ...any) {
		if !o.json {
			fmt.Fprintf(stderr, format+"\n", args...)
		}
	}

	stores := []string{storeFloorNone, storeFloorFull, storeDirNone, storeDirFull, storeCASNone, storeCASFull}
	samples := 60
	if !o.synthetic {
		stores = nil
	}
	// The stores take turns, round by round, the order turning each round,
	// so that none always runs first on a cold disk or last on a tired one;
	// the tables show each store's median round, the ratios every round.
	rep.RepeatRounds, err = replayRounds(ctx, stores, o.rounds, progress, "the trace", func(name string) replayConfig {
		return replayConfig{Store: name, Dir: filepath.Join(work, name), Trace: rep.Trace, Samples: samples, TraceTag: "repeat"}
	})
	if err != nil {
		return err
	}
	rep.Repeat = medianRounds(rep.RepeatRounds, stores)
	norep := rep.Trace
	norep.NoRepeat = true
	norep.Runs = max(1, rep.Trace.Runs/3)
	norepStores := []string{storeDirNone, storeCASNone, storeDirFull, storeCASFull}
	if !o.synthetic {
		norepStores = nil
	}
	rep.NoRepeatRounds, err = replayRounds(ctx, norepStores, o.rounds, progress, "the no-repetition trace", func(name string) replayConfig {
		return replayConfig{Store: name, Dir: filepath.Join(work, "norep-"+name), Trace: norep, Samples: samples, TraceTag: "no-repeat"}
	})
	if err != nil {
		return err
	}
	rep.NoRepeat = medianRounds(rep.NoRepeatRounds, norepStores)
	if o.trace != "" {
		real, err := replayReal(ctx, o, work, progress)
		if err != nil {
			return err
		}
		rep.Real = real
	}
	if o.targets && o.synthetic {
		progress("measuring the speed targets…")
		var ts []target
		if err := runChild(ctx, "targets", targetsConfig{Dir: filepath.Join(work, "targets"), Quick: o.quick}, &ts); err != nil {
			return fmt.Errorf("targets: %w", err)
		}
		size := int64(1 << 30)
		if o.quick {
			size = 128 << 20
		}
		progress("streaming %d MiB…", size>>20)
		var hwm int64
		if err := runChild(ctx, "stream", streamConfig{Dir: filepath.Join(work, "stream"), Size: size}, &hwm); err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		os.RemoveAll(filepath.Join(work, "stream"))
		ts = append(ts, target{fmt.Sprintf("streaming put of %d MiB", size>>20), "peak RSS < 64 MiB",
			fmt.Sprintf("%.1f MiB", float64(hwm)/1024), float64(hwm) / 1024, hwm < 64<<10})
		ts = append(ts, traceTargets(rep.Repeat)...)
		rep.Targets = ts
	}
	if rep.Real != nil {
		rep.Targets = append(rep.Targets, rep.Real.targets()...)
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.LoadAfter = loadAverage()
	rep.Checks = check(rep)

	if o.out != "" {
		progress("writing the report to %s…", o.out)
		if err := writeReport(o.out, rep); err != nil {
			return err
		}
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprint(stdout, summary(rep))
	if len(rep.Checks) > 0 {
		return fmt.Errorf("the report does not add up: %s", strings.Join(rep.Checks, "; "))
	}
	return nil
}

// workDir returns dir, or, when dir is "", a new temporary directory named
// after pattern, with what removes the temporary one once the run is done:
// what a run makes in a -dir it was given stays there.
func workDir(dir, pattern string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", func() {}, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// traceTargets are the targets measured on the replayed trace.
func traceTargets(rs []replayResult) []target {
	var out []target
	for _, r := range rs {
		if r.Store != storeCASFull {
			continue
		}
		limit := float64(r.UniqueBytes)*1.02 + float64(r.IndexBytes)
		out = append(out, target{"stored bytes on the bench trace", "≤ unique bytes × 1.02 + index",
			fmt.Sprintf("%s stored for %s unique (%.4f ×), index %s", mib(r.StoredBytes), mib(r.UniqueBytes), float64(r.StoredBytes)/float64(max(r.UniqueBytes, 1)), mib(r.IndexBytes)),
			float64(r.StoredBytes) / float64(max(r.UniqueBytes, 1)), float64(r.StoredBytes+r.IndexBytes) <= limit})
		perPart := float64(r.IndexBytes) / float64(max(r.Parts, 1))
		out = append(out, target{"index size on the bench trace", "≤ 512 B per part", fmt.Sprintf("%.0f B per part (%d parts)", perPart, r.Parts), perPart, perPart <= 512})

	}
	return out
}

type streamConfig struct {
	Dir  string `json:"dir"`
	Size int64  `json:"size"`
}

// runChild runs this program in a role, in its own process, and decodes
// the JSON it prints into out.
// parseSizes reads a comma-separated list of whole numbers, each at least
// least.
func parseSizes(list string, least int) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < least {
			return nil, fmt.Errorf("want comma-separated whole numbers of %d or more, not %q", least, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func runChild(ctx context.Context, role string, cfg, out any) error {
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), childEnv+"="+role, configEnv+"="+string(b))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return json.Unmarshal(stdout.Bytes(), out)
}

// child runs one role and prints its result as JSON. With
// TOOLCAS_BENCH_CPUPROFILE=dir set, each child writes a CPU profile there,
// named for its role and store: where the time goes.
func child(ctx context.Context, role, cfg string, stdout, stderr io.Writer) int {
	var (
		res any
		err error
	)
	if dir := os.Getenv("TOOLCAS_BENCH_CPUPROFILE"); dir != "" {
		var tag struct {
			Store    string `json:"store"`
			TraceTag string `json:"trace_tag"`
			Op       string `json:"op"`
		}
		json.Unmarshal([]byte(cfg), &tag)
		name := strings.Trim(strings.Join([]string{role, tag.TraceTag, tag.Store, tag.Op}, "-"), "-")
		if f, err := os.Create(filepath.Join(dir, name+".prof")); err == nil {
			pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	switch role {
	case "replay":
		res, err = decoded(ctx, cfg, replay)
	case "targets":
		res, err = decoded(ctx, cfg, measureTargets)
	case "writepath":
		res, err = decoded(ctx, cfg, func(ctx context.Context, c targetsConfig) ([]target, error) {
			return writePathTargets(ctx, c.Dir, c.Quick)
		})
	case "scale":
		res, err = decoded(ctx, cfg, scaleChild)
	case "remotecopy":
		res, err = decoded(ctx, cfg, remoteCopy)
	case "stream":
		res, err = decoded(ctx, cfg, func(ctx context.Context, c streamConfig) (int64, error) {
			return streamRSS(ctx, c.Dir, c.Size)
		})
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// decoded runs a child's role: it decodes the role's configuration, the
// JSON runChild passed, from cfg and calls f with it.
func decoded[C, R any](ctx context.Context, cfg string, f func(context.Context, C) (R, error)) (any, error) {
	var c C
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		return nil, err
	}
	return f(ctx, c)
}

// machine describes where the numbers were taken.
type machine struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	MemoryGiB  int    `json:"memory_gib"`
	Kernel     string `json:"kernel"`
	FileSystem string `json:"file_system"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
}

func describeMachine(dir string) machine {
	m := machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kib int64
		fmt.Sscanf(string(b), "MemTotal: %d kB", &kib)
		m.MemoryGiB = int((kib + 1<<19) >> 20)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.FileSystem = fileSystem(dir)
	return m
}

// fileSystem names the file system holding dir, from /proc/self/mounts.
func fileSystem(dir string) string {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	// The stores' directory may not exist yet: its nearest existing
	// parent is on the same file system.
	abs, _ := filepath.Abs(dir)
	for {
		real, err := filepath.EvalSymlinks(abs)
		if err == nil || filepath.Dir(abs) == abs {
			abs = real
			break
		}
		abs = filepath.Dir(abs)
	}
	best, fstype, dev := "", "unknown", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		mnt := fields[1]
		if (abs == mnt || strings.HasPrefix(abs, strings.TrimSuffix(mnt, "/")+"/")) && len(mnt) > len(best) {
			best, fstype, dev = mnt, fields[2], fields[0]
		}
	}
	if fstype == "ext4" {
		if journal, known := ext4Journal("/proc", dev); known && !journal {
			fstype = ext4NoJournal
		}
	}
	return fstype + " (" + best + ")"
}

// ext4NoJournal is the file system's name in a report's machine line for
// an ext4 without a journal (see ext4Journal).
const ext4NoJournal = "ext4 without a journal"

// ext4Journal says whether the ext4 file system on device dev has a
// journal, as the proc file system under proc tells (known is false where
// it does not tell). Without one, making a file passes over every inode
// its group freed in the last minutes (the kernel's recently_deleted), so
// that what a new file costs swings with what was removed lately: a
// reader of the report wants to know.
func ext4Journal(proc, dev string) (journal, known bool) {
	name := filepath.Base(dev)
	if _, err := os.Stat(filepath.Join(proc, "fs", "ext4", name)); err != nil {
		return false, false
	}
	journals, err := os.ReadDir(filepath.Join(proc, "fs", "jbd2"))
	if err != nil {
		return false, false
	}
	for _, j := range journals {
		// A journal's directory is named for its device and inode.
		if strings.HasPrefix(j.Name(), name+"-") {
			return true, true
		}
	}
	return false, true
}

func mib(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
