package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/internal/procstat"
	"github.com/toolcas/toolcas/store"
)

// The scale section: what maintenance costs as a store grows to a million
// parts. Each size gets a store of its own, filled once without fsync;
// then each command runs in a process of its own, so that its peak memory
// is its own, on the same store: stats, ls, show of a blob 50,000 parts
// share, durable puts, gc --dry-run, then a tenth of the runs pruned and
// gc with a durable writer putting all along, verify, and BLAKE3 alone
// over the same blob files.

// scaleParts are the parts of each run of the filled store.
const scaleRunParts = 1000

// scaleConfig configures the scale children.
type scaleConfig struct {
	Dir   string `json:"dir"`
	Parts int    `json:"parts"`
	Op    string `json:"op"`
}

// scaleOp is what one maintenance command took.
type scaleOp struct {
	Op     string  `json:"op"`
	Millis float64 `json:"ms"`
	// CPUMillis is the CPU time the process used for the op, in user
	// and system mode, on all its threads.
	CPUMillis float64 `json:"cpu_ms,omitempty"`
	PeakKiB   int64   `json:"peak_kib"`
	Detail    string  `json:"detail"`
	Bytes     int64   `json:"bytes,omitempty"`
	P50Milli  float64 `json:"p50_ms,omitempty"`
	P99Milli  float64 `json:"p99_ms,omitempty"`
	MaxMilli  float64 `json:"max_ms,omitempty"`
	Over100   int     `json:"over_100ms,omitempty"`
	Count     int     `json:"count,omitempty"`
}

// scaleSize is every figure of one store size.
type scaleSize struct {
	Parts    int       `json:"parts"`
	FillSecs float64   `json:"fill_seconds"`
	Ops      []scaleOp `json:"ops"`
	// Reused says the store was a copy of one an earlier run filled
	// (-scale-reuse): FillSecs is the copy's time then.
	Reused bool `json:"reused,omitempty"`
	// Writer is the durable writer putting while gc ran.
	Writer scaleOp `json:"writer_during_gc"`
	// PackWriter is the durable writer putting while pack and a gc
	// started beside it ran.
	PackWriter scaleOp `json:"writer_during_pack,omitzero"`
}

// byOp returns the size's ops by name, for the tables' cells.
func (sz scaleSize) byOp() map[string]scaleOp {
	op := map[string]scaleOp{}
	for _, o := range sz.Ops {
		op[o.Op] = o
	}
	return op
}

// scaleReport is the scale section.
type scaleReport struct {
	Command    string      `json:"command"`
	Date       time.Time   `json:"date"`
	Machine    machine     `json:"machine"`
	LoadBefore string      `json:"load_before"`
	LoadAfter  string      `json:"load_after"`
	Sizes      []scaleSize `json:"sizes"`
}

// hotContent is the content that 50,000 parts (a tenth, in smaller stores)
// share, for show.
const hotContent = "shared by many parts\n"

// scaleText is the content of part i: unique for even i, the content of
// part i-1 again for odd i (so that blobs are half the parts), padded to
// 300 to 1,800 bytes.
func scaleText(i, n int) string {
	if i%(n/min(50_000, n/10)) == 0 {
		return hotContent
	}
	if i%2 == 1 {
		i--
	}
	pad := 300 + (i*7919)%1500
	line := fmt.Sprintf("result %d of a tool call: some output that an agent produced\n", i)
	return strings.Repeat(line, pad/len(line)+1)[:pad]
}

func scaleItem(i, n int) hook.Item {
	tools := []string{"read_file", "grep", "run_tests", "list_dir"}
	return hook.Item{Key: hook.Key{Run: fmt.Sprint("run-", i/scaleRunParts), Step: i % scaleRunParts, Tool: tools[i%len(tools)],
		CallID: fmt.Sprint("call-", i), Part: -1, Ext: ".txt"}, Part: hook.Text(scaleText(i, n))}
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// scaleSteps are the steps of the scale section, in the order they run:
// "gc" is gc with a durable writer putting all along; "pack" packs every
// loose blob while a gc runs beside it and a durable writer puts all
// along (last: it changes the store the other steps read).
var scaleSteps = []string{"stats", "ls-50", "ls-run", "show", "put", "gc-dry", "prune", "gc", "verify", "index-check", "recount", "blake3", "pack"}

// parseScaleOps parses -scale-ops: the steps named, or every step when
// list is empty.
func parseScaleOps(list string) (map[string]bool, error) {
	ops := map[string]bool{}
	if strings.TrimSpace(list) == "" {
		for _, op := range scaleSteps {
			ops[op] = true
		}
		return ops, nil
	}
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(scaleSteps, f) {
			return nil, fmt.Errorf("-scale-ops %q: no step %q; the steps are %s", list, f, strings.Join(scaleSteps, ","))
		}
		ops[f] = true
	}
	return ops, nil
}

// scaleRun is what -scale was asked to do.
type scaleRun struct {
	sizes   []int
	dir     string
	out     string
	command string
	// reuse keeps each filled store as scale-N-filled in dir, and measures
	// on a copy of it, filling only when no such store is there.
	reuse bool
	// ops are the steps to measure.
	ops map[string]bool
}

// runScale builds a store of each size in dir, measures it, removes it,
// and writes the section into out as SCALE.md and scale.json.
func runScale(ctx context.Context, run scaleRun, stdout io.Writer) error {
	rep := scaleReport{Command: run.command, Date: time.Now().UTC(), Machine: describeMachine(run.dir), LoadBefore: loadAvg()}
	for _, n := range run.sizes {
		sd := filepath.Join(run.dir, fmt.Sprint("scale-", n))
		os.RemoveAll(sd)
		size, err := measureSize(ctx, run, sd, n, stdout)
		os.RemoveAll(sd)
		if err != nil {
			return fmt.Errorf("%d parts: %w", n, err)
		}
		rep.Sizes = append(rep.Sizes, size)
	}
	rep.LoadAfter = loadAvg()
	if run.out == "" {
		return json.NewEncoder(stdout).Encode(rep)
	}
	return writeSection(run.out, "scale.json", rep, "SCALE.md", scaleMarkdown(rep))
}

// writeSection writes a section's report into dir, made if need be: rep as
// indented JSON into jsonName, for tools, and md into mdName, for readers.
func writeSection(dir, jsonName string, rep any, mdName, md string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, jsonName), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, mdName), []byte(md), 0o644)
}

// fillScale fills the store of n parts in dir. With reuse, the filled
// store is kept as dir-filled and copied into dir, or only copied when an
// earlier run left it there: the copy keeps the files' times, so that it
// is the store the fill left. Reused says no fill ran.
func fillScale(ctx context.Context, run scaleRun, dir string, n int) (reused bool, err error) {
	fill := func(into string) error {
		var r scaleOp
		return runChild(ctx, "scale", scaleConfig{Dir: into, Parts: n, Op: "fill"}, &r)
	}
	if !run.reuse {
		return false, fill(dir)
	}
	filled := dir + "-filled"
	if _, err := os.Stat(filepath.Join(filled, cas.MarkerFile)); err != nil {
		os.RemoveAll(filled)
		if err := fill(filled); err != nil {
			os.RemoveAll(filled)
			return false, err
		}
	} else {
		reused = true
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", filled, dir).CombinedOutput(); err != nil {
		return reused, fmt.Errorf("copy %s: %w: %s", filled, err, out)
	}
	return reused, nil
}

func measureSize(ctx context.Context, run scaleRun, dir string, n int, log io.Writer) (scaleSize, error) {
	size := scaleSize{Parts: n}
	start := time.Now()
	reused, err := fillScale(ctx, run, dir, n)
	if err != nil {
		return size, fmt.Errorf("fill: %w", err)
	}
	size.FillSecs = time.Since(start).Seconds()
	size.Reused = reused
	fmt.Fprintf(log, "scale: %d parts filled in %.0f s (reused a filled store: %v)\n", n, size.FillSecs, reused)
	for _, op := range scaleSteps {
		if !run.ops[op] {
			continue
		}
		if op == "gc" || op == "pack" {
			ops := []string{"gc"}
			if op == "pack" {
				ops = []string{"pack", "gc-beside-pack"}
			}
			rs, writer, err := withWriter(ctx, dir, n, ops...)
			if err != nil {
				return size, err
			}
			for _, r := range rs {
				fmt.Fprintf(log, "scale: %d parts: %s %.1f ms, peak %d KiB %s\n", n, r.Op, r.Millis, r.PeakKiB, r.Detail)
			}
			fmt.Fprintf(log, "scale: %d parts: writer during %s: %+v\n", n, op, writer)
			size.Ops = append(size.Ops, rs...)
			if op == "gc" {
				size.Writer = writer
			} else {
				size.PackWriter = writer
			}
			continue
		}
		var r scaleOp
		if op == "show" {
			r, err = showRounds(ctx, dir, n)
		} else {
			err = runChild(ctx, "scale", scaleConfig{Dir: dir, Parts: n, Op: op}, &r)
		}
		if err != nil {
			return size, fmt.Errorf("%s: %w", op, err)
		}
		fmt.Fprintf(log, "scale: %d parts: %s %.1f ms, peak %d KiB %s\n", n, op, r.Millis, r.PeakKiB, r.Detail)
		size.Ops = append(size.Ops, r)
	}
	return size, nil
}

// showProcesses is how many processes the show step runs, one after another:
// a single show takes a few milliseconds, less than what other work on the
// machine can add to one of them.
const showProcesses = 5

// showRounds runs show in showProcesses processes of their own and returns
// the median, naming the fastest and the slowest in its detail.
func showRounds(ctx context.Context, dir string, n int) (scaleOp, error) {
	var rs []scaleOp
	for range showProcesses {
		var r scaleOp
		if err := runChild(ctx, "scale", scaleConfig{Dir: dir, Parts: n, Op: "show"}, &r); err != nil {
			return r, err
		}
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b scaleOp) int { return cmp.Compare(a.Millis, b.Millis) })
	r := rs[len(rs)/2]
	r.Detail += fmt.Sprintf(", the median of %d processes (%s to %s)", len(rs), dur(rs[0].Millis), dur(rs[len(rs)-1].Millis))
	return r, nil
}

// withWriter runs ops, each in a process of its own and all at once,
// while another process puts durably, one part a step, from before they
// start until after they all end.
func withWriter(ctx context.Context, dir string, n int, ops ...string) ([]scaleOp, scaleOp, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, scaleOp{}, err
	}
	cfg, _ := json.Marshal(scaleConfig{Dir: dir, Parts: n, Op: "writer"})
	w := exec.CommandContext(ctx, exe)
	w.Env = append(os.Environ(), childEnv+"=scale", configEnv+"="+string(cfg))
	stdin, err := w.StdinPipe()
	if err != nil {
		return nil, scaleOp{}, err
	}
	stderr, err := w.StderrPipe()
	if err != nil {
		return nil, scaleOp{}, err
	}
	var stdout strings.Builder
	w.Stdout = &stdout
	if err := w.Start(); err != nil {
		return nil, scaleOp{}, err
	}
	defer w.Process.Kill()
	// The writer says when its first put is done.
	sc := bufio.NewScanner(stderr)
	ready := false
	var said []string
	for sc.Scan() {
		if sc.Text() == "writing" {
			ready = true
			break
		}
		said = append(said, sc.Text())
	}
	if !ready {
		w.Wait()
		return nil, scaleOp{}, fmt.Errorf("writer: %s", strings.Join(said, "; "))
	}
	go io.Copy(io.Discard, stderr)
	rs := make([]scaleOp, len(ops))
	errs := make([]error, len(ops))
	var wg sync.WaitGroup
	for i, op := range ops {
		wg.Go(func() {
			if errs[i] = runChild(ctx, "scale", scaleConfig{Dir: dir, Parts: n, Op: op}, &rs[i]); errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", op, errs[i])
			}
		})
	}
	wg.Wait()
	stdin.Close()
	if err := w.Wait(); err != nil {
		return rs, scaleOp{}, fmt.Errorf("writer: %w", err)
	}
	var wr scaleOp
	if err := json.Unmarshal([]byte(stdout.String()), &wr); err != nil {
		return rs, wr, fmt.Errorf("writer: %w", err)
	}
	return rs, wr, errors.Join(errs...)
}

// scaleChild runs one scale operation in this process.
func scaleChild(ctx context.Context, c scaleConfig) (scaleOp, error) {
	r := scaleOp{Op: c.Op}
	opts := []store.Option{}
	switch c.Op {
	case "fill":
		opts = append(opts, store.WithCreate(), store.WithDurability(cas.SyncNone))
	case "blake3":
		start, cpu := time.Now(), procstat.CPUTime()
		var files int
		err := filepath.WalkDir(filepath.Join(c.Dir, cas.BlobsDir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			cas.Sum(b)
			files++
			r.Bytes += int64(len(b))
			return nil
		})
		r.Millis = float64(time.Since(start).Microseconds()) / 1000
		r.CPUMillis = float64((procstat.CPUTime() - cpu).Microseconds()) / 1000
		r.PeakKiB = procstat.PeakRSSKiB()
		r.Detail = fmt.Sprintf("%d files, %s", files, mib(r.Bytes))
		return r, err
	}
	s, err := store.Open(ctx, c.Dir, opts...)
	if err != nil {
		return r, err
	}
	defer s.Close()
	// The index's own checks are measured on the index alone, opened
	// before the clock starts.
	var ix *index.Index
	if c.Op == "index-check" || c.Op == "recount" {
		if ix, err = index.Open(ctx, filepath.Join(c.Dir, store.IndexFile), index.ReadOnly()); err != nil {
			return r, err
		}
		defer ix.Close()
	}
	start, cpu := time.Now(), procstat.CPUTime()
	switch c.Op {
	case "fill":
		const batch = 1000
		for i := 0; i < c.Parts; i += batch {
			items := make([]hook.Item, 0, batch)
			for j := i; j < min(i+batch, c.Parts); j++ {
				items = append(items, scaleItem(j, c.Parts))
			}
			if _, err := s.Write(ctx, items); err != nil {
				return r, err
			}
		}
	case "stats":
		st, err := s.Stats(ctx, "")
		if err != nil {
			return r, err
		}
		r.Detail = fmt.Sprintf("%d parts, %d blobs, %d runs", st.Parts, st.Blobs, st.Runs)
	case "ls-50":
		ps, err := s.List(ctx, store.ListOptions{Limit: 50})
		if err != nil {
			return r, err
		}
		r.Detail = fmt.Sprintf("%d parts", len(ps))
	case "ls-run":
		ps, err := s.List(ctx, store.ListOptions{Run: "run-1"})
		if err != nil {
			return r, err
		}
		r.Detail = fmt.Sprintf("%d parts", len(ps))
	case "show":
		// What casctl show of a key does once the store is open: resolve
		// the key, then the part, its blob and the first ten parts
		// sharing it. Part 0 holds the shared content.
		p, err := s.Resolve(ctx, "", scaleItem(0, c.Parts).Key.String())
		if err != nil {
			return r, err
		}
		d, err := s.ShowPartFirst(ctx, p, 10)
		if err != nil {
			return r, err
		}
		if d.Blob.Blob.Digest != cas.Sum([]byte(hotContent)) {
			return r, fmt.Errorf("show: part 0 is not the shared content")
		}
		r.Detail = fmt.Sprintf("%d of %d parts sharing the blob", len(d.Sharing), d.SharingTotal)
	case "put":
		var lat []time.Duration
		for i := range 200 {
			t := time.Now()
			it := scaleItem(c.Parts+i, c.Parts)
			it.Key.Run = "put"
			if _, err := s.Write(ctx, []hook.Item{it}); err != nil {
				return r, err
			}
			lat = append(lat, time.Since(t))
		}
		latencies(&r, lat)
		r.Detail = "200 durable one-part steps"
	case "gc-dry":
		res, err := s.GC(ctx, store.GCOptions{DryRun: true})
		if err != nil {
			return r, err
		}
		r.Detail = fmt.Sprintf("would remove %d blobs", res.RemovedBlobs)
	case "prune":
		// A tenth of the runs.
		runs := c.Parts / scaleRunParts
		var removed int64
		for k := 0; k < runs; k += 10 {
			res, err := s.Prune(ctx, store.PruneOptions{Run: fmt.Sprint("run-", k)})
			if err != nil {
				return r, err
			}
			removed += res.RemovedParts
		}
		r.Detail = fmt.Sprintf("%d parts of %d runs", removed, (runs+9)/10)
	case "gc", "gc-beside-pack":
		res, err := s.GC(ctx, store.GCOptions{Grace: 0})
		if err != nil {
			return r, err
		}
		r.Detail = fmt.Sprintf("removed %d blobs, %s", res.RemovedBlobs, mib(res.FreedBytes))
	case "pack":
		res, err := s.Pack(ctx, store.PackOptions{})
		if err != nil {
			return r, err
		}
		r.Bytes = res.RawBytes
		r.Detail = fmt.Sprintf("packed %d blobs, %s into %s", res.Blobs, mib(res.RawBytes), mib(res.PackBytes))
	case "verify":
		res, err := s.Verify(ctx, store.VerifyOptions{})
		if err != nil {
			return r, err
		}
		if !res.OK {
			return r, fmt.Errorf("verify found damage: %d corrupt, %d missing, %q", len(res.Corrupt), len(res.Missing), res.CountDrift)
		}
		r.Bytes = res.CheckedBytes
		r.Detail = fmt.Sprintf("%d blobs, %s", res.Checked, mib(res.CheckedBytes))
	case "index-check", "recount":
		// SQLite's integrity check alone, or the recount of the counters
		// behind stats alone, as verify runs each beside the re-hashing.
		check, found, whole := ix.IntegrityCheck, "index check found damage", "no damage"
		if c.Op == "recount" {
			check, found, whole = ix.CountDrift, "recount found drift", "no drift"
		}
		problems, err := check(ctx)
		if err != nil {
			return r, err
		}
		if len(problems) > 0 {
			return r, fmt.Errorf("%s: %q", found, problems)
		}
		r.Detail = whole
	case "writer":
		var lat []time.Duration
		type step struct {
			d  time.Duration
			at time.Duration
		}
		var slow []step // the slowest five, slowest first
		done := make(chan struct{})
		go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
		for i := 0; ; i++ {
			t := time.Now()
			it := scaleItem(c.Parts+1000+i, c.Parts)
			it.Key.Run = "writer"
			if _, err := s.Write(ctx, []hook.Item{it}); err != nil {
				return r, err
			}
			lat = append(lat, time.Since(t))
			if d := time.Since(t); d > 100*time.Millisecond {
				slow = append(slow, step{d, t.Sub(start)})
				slices.SortFunc(slow, func(a, b step) int { return cmp.Compare(b.d, a.d) })
				slow = slow[:min(len(slow), 5)]
			}
			if i == 0 {
				fmt.Fprintln(os.Stderr, "writing")
			}
			select {
			case <-done:
				latencies(&r, lat)
				r.Detail = fmt.Sprintf("%d durable one-part steps", len(lat))
				if len(slow) > 0 {
					var says []string
					for _, st := range slow {
						says = append(says, fmt.Sprintf("%s at +%.2f s", dur(float64(st.d.Microseconds())/1000), st.at.Seconds()))
					}
					r.Detail += " (the slowest: " + strings.Join(says, ", ") + ")"
				}
				r.PeakKiB = procstat.PeakRSSKiB()
				return r, nil
			default:
			}
		}
	default:
		return r, fmt.Errorf("unknown scale op %q", c.Op)
	}
	r.Millis = float64(time.Since(start).Microseconds()) / 1000
	r.CPUMillis = float64((procstat.CPUTime() - cpu).Microseconds()) / 1000
	r.PeakKiB = procstat.PeakRSSKiB()
	return r, nil
}

// latencies sets the percentiles of lat into r.
func latencies(r *scaleOp, lat []time.Duration) {
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r.Count = len(lat)
	r.P50Milli = ms(lat[len(lat)/2])
	r.P99Milli = ms(lat[len(lat)*99/100])
	r.MaxMilli = ms(lat[len(lat)-1])
	for _, d := range lat {
		if d > 100*time.Millisecond {
			r.Over100++
		}
	}
}

// scaleMarkdown renders the section.
func scaleMarkdown(rep scaleReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# toolcas at scale: maintenance from 10,000 to a million parts\n\n")
	fmt.Fprintf(&b, "- Command: `%s`\n", rep.Command)
	fmt.Fprintf(&b, "- Date: %s\n", rep.Date.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "- Machine: %s, %d cores, %d GiB, Linux %s, stores on %s\n", rep.Machine.CPU, rep.Machine.Cores,
		rep.Machine.MemoryGiB, rep.Machine.Kernel, rep.Machine.FileSystem)
	fmt.Fprintf(&b, "- Load average (1, 5, 15 min) before: %s; after: %s\n", rep.LoadBefore, rep.LoadAfter)
	fmt.Fprintf(&b, "- Each store: runs of %d parts of 300 to 1,800 bytes of text, every second part the same bytes as the one before (blobs are half the parts), and one blob that 50,000 parts (a tenth, below a million) share; filled without fsync, once. Each command then runs in a process of its own on it; its time is the library call's, without opening the store. show is the resolution of a key whose blob the many parts share and the part's details with the first ten of them, the median of %d processes.\n\n", scaleRunParts, showProcesses)
	numberTable(&b, "parts", "fill", "put p50 / p99", "ls --limit 50", "ls of a run", "show (shared blob)", "stats", "gc --dry-run", "prune a tenth", "gc", "writer during gc: p50 / p99 / max, > 100 ms", "verify", "BLAKE3 alone", "verify / BLAKE3 speed")
	for _, sz := range rep.Sizes {
		op := sz.byOp()
		cell := func(name string) string {
			o := op[name]
			return fmt.Sprintf("%s, %s", dur(o.Millis), mib(o.PeakKiB<<10))
		}
		w := sz.Writer
		ratio := 0.0
		if op["verify"].Millis > 0 {
			ratio = op["blake3"].Millis / op["verify"].Millis
		}
		fmt.Fprintf(&b, "| %d | %.0f s | %.2f / %.2f ms | %s | %s | %s | %s | %s | %s | %s | %.1f / %.1f / %.1f ms, %d of %d | %s | %s | %.2f |\n",
			sz.Parts, sz.FillSecs, op["put"].P50Milli, op["put"].P99Milli, cell("ls-50"), cell("ls-run"), cell("show"), cell("stats"),
			cell("gc-dry"), cell("prune"), cell("gc"), w.P50Milli, w.P99Milli, w.MaxMilli, w.Over100, w.Count, cell("verify"),
			cell("blake3"), ratio)
	}
	b.WriteString("\nEach cell: the time, then the process's peak resident memory. What each command found:\n\n")
	for _, sz := range rep.Sizes {
		fmt.Fprintf(&b, "- %d parts:", sz.Parts)
		for _, o := range sz.Ops {
			if o.Detail != "" {
				fmt.Fprintf(&b, " %s: %s;", o.Op, o.Detail)
			}
		}
		fmt.Fprintf(&b, " writer during gc: %s.\n", sz.Writer.Detail)
	}
	b.WriteString(packMarkdown(rep))
	b.WriteString(verifyMarkdown(rep))
	return b.String()
}

// packMarkdown renders pack, run with a gc started beside it and a
// durable writer putting all along: how long the writer's steps took
// while both held the store.
func packMarkdown(rep scaleReport) string {
	var b strings.Builder
	b.WriteString("\nPack of every loose blob, with a gc started at the same time in another process and a durable writer putting one part a step in a third, from before both start until both end. The goal: no write waits more than 100 ms for pack or gc.\n\n")
	numberTable(&b, "parts", "pack", "gc beside it", "writer: p50 / p99 / max", "steps over 100 ms")
	for _, sz := range rep.Sizes {
		op := sz.byOp()
		w := sz.PackWriter
		if w.Count == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %d | %s, %s | %s, %s | %.1f / %.1f / %.1f ms | %d of %d |\n", sz.Parts,
			dur(op["pack"].Millis), op["pack"].Detail, dur(op["gc-beside-pack"].Millis), op["gc-beside-pack"].Detail,
			w.P50Milli, w.P99Milli, w.MaxMilli, w.Over100, w.Count)
	}
	return b.String()
}

// numberTable writes the header of a Markdown table whose columns all
// hold numbers, aligned right.
func numberTable(b *strings.Builder, cols ...string) {
	fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat(" ---: |", len(cols)))
}

func dur(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%.2f s", ms/1000)
	}
	return fmt.Sprintf("%.1f ms", ms)
}

// verifyMarkdown renders what bounds verify's speed: its time and CPU time
// beside those of the two whole-index checks it runs beside the
// re-hashing, each alone, and of BLAKE3 alone over the same files.
func verifyMarkdown(rep scaleReport) string {
	var b strings.Builder
	b.WriteString("\nWhat verify spends, each in a process of its own: the time, then the CPU time on all threads. verify runs SQLite's integrity check and the recount of the counters behind stats beside its re-hashing; each is also run alone. BLAKE3 alone reads and hashes the same files one after another. Verify meets its target when its time is at most the budget, BLAKE3's time / 0.8.\n\n")
	numberTable(&b, "parts", "verify", "integrity check alone", "recount alone", "BLAKE3 alone", "budget")
	for _, sz := range rep.Sizes {
		op := sz.byOp()
		cell := func(name string) string {
			o, ok := op[name]
			if !ok {
				return "not run"
			}
			return fmt.Sprintf("%s, CPU %s", dur(o.Millis), dur(o.CPUMillis))
		}
		budget := "not run"
		if o, ok := op["blake3"]; ok {
			budget = dur(o.Millis / 0.8)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", sz.Parts, cell("verify"), cell("index-check"), cell("recount"), cell("blake3"), budget)
	}
	return b.String()
}
