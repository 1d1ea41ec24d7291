package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/procstat"
	"github.com/toolcas/toolcas/internal/trace"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
)

// The stores a trace is replayed into.
const (
	storeCASFull = "cas-full"
	storeCASNone = "cas-none"
	// storeCASRecent is the CAS store whose index commits without a sync.
	storeCASRecent = "cas-recent-keys"
	storeDirFull   = "dir-full"
	storeDirNone   = "dir-none"
	storeFloorFull = "floor-full"
	storeFloorNone = "floor-none"
)

// storeNotes says what each store is, for the report.
var storeNotes = map[string]string{
	storeCASFull:   "toolcas CAS store, durable (the default)",
	storeCASNone:   "toolcas CAS store, sync=none",
	storeCASRecent: "toolcas CAS store, durability recent-keys-may-be-lost (blobs durable, index row committed without a sync)",
	storeDirFull:   "Haystack-style directory store, durable (temp, fsync, rename, dir fsync)",
	storeDirNone:   "Haystack-style directory store, as Haystack writes (no fsync)",
	storeFloorFull: "floor: temp, write, fsync, rename, dir fsync; no index, no dedup",
	storeFloorNone: "floor without fsync",
}

// replayConfig is what a replay child is told.
type replayConfig struct {
	Store string       `json:"store"`
	Dir   string       `json:"dir"`
	Trace trace.Config `json:"trace"`
	// Samples is how many points of the bytes-on-disk curve are taken
	// during the replay, each a walk of the store's directory between two
	// steps; 0 takes only the last, after the replay.
	Samples  int    `json:"samples"`
	TraceTag string `json:"trace_tag"`
	// RealTrace, when set, is a real trace's path, replayed instead of the
	// synthetic trace with every tool offloaded over Threshold characters;
	// the CAS stores are then packed at the end.
	RealTrace string `json:"real_trace,omitempty"`
	Threshold int    `json:"threshold,omitempty"`
	// Agents, over one, replays the trace's runs that many at once, each
	// agent taking the next whole run when it finishes one, as agents
	// running side by side in one process write.
	Agents int `json:"agents,omitempty"`
	// Remote says where the stores of the remote section keep their index
	// and blobs (remote.go).
	Remote *remoteEnd `json:"remote,omitempty"`
}

// curvePoint is the state after a step.
type curvePoint struct {
	Step    int   `json:"step"`
	Logical int64 `json:"logical_bytes"`
	OnDisk  int64 `json:"on_disk_bytes"`
}

// toolRow is a tool's share.
type toolRow struct {
	Tool    string `json:"tool"`
	Parts   int64  `json:"parts"`
	Logical int64  `json:"logical_bytes"`
	Stored  int64  `json:"stored_bytes"`
}

// replayResult is what a replay child measured.
type replayResult struct {
	Store string `json:"store"`
	Trace string `json:"trace"`
	// Agents is how many agents wrote at once (0 or 1: one); Round is the
	// round of the replay, from 1, where rounds were run.
	Agents  int `json:"agents,omitempty"`
	Round   int `json:"round,omitempty"`
	Steps   int `json:"steps"`
	Results int `json:"results"`
	// Offloaded counts results replaced by a pointer; Parts their parts.
	Offloaded int `json:"offloaded"`
	Parts     int `json:"parts"`
	// LogicalBytes is the size of every offloaded part; UniqueBytes that of
	// the distinct ones (same bytes, same extension).
	LogicalBytes int64 `json:"logical_bytes"`
	UniqueBytes  int64 `json:"unique_bytes"`
	// StoredBytes is the size of the data files on disk (blobs, or files).
	StoredBytes int64 `json:"stored_bytes"`
	IndexBytes  int64 `json:"index_bytes"`
	// BlockBytes is what the file system allocated for everything, as du.
	BlockBytes int64   `json:"block_bytes"`
	Files      int     `json:"files"`
	Dirs       int     `json:"dirs"`
	DedupRatio float64 `json:"dedup_ratio"`
	// Seconds is the time spent in the hook's Offload calls (with several
	// agents, the time from the first step to the last); PerSecond the
	// results they handled per second of it.
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"results_per_second"`
	// FoldSeconds is the time the first read after the replay took to fold
	// the steps the replay staged (sync=none; see index.FoldStaged), not
	// counted in Seconds.
	FoldSeconds float64 `json:"fold_seconds,omitempty"`
	// Latencies are per step (one Offload call), in milliseconds.
	P50        float64   `json:"p50_ms"`
	P90        float64   `json:"p90_ms"`
	P99        float64   `json:"p99_ms"`
	Latencies  []float64 `json:"latencies_ms"`
	PeakRSSKiB int64     `json:"peak_rss_kib"`
	// GC and verify, on the CAS stores: gc after pruning the first run.
	GCSeconds     float64      `json:"gc_seconds,omitempty"`
	GCFreedBytes  int64        `json:"gc_freed_bytes,omitempty"`
	VerifySeconds float64      `json:"verify_seconds,omitempty"`
	VerifyMBps    float64      `json:"verify_mb_per_s,omitempty"`
	HashMBps      float64      `json:"hash_mb_per_s,omitempty"`
	VerifyOK      bool         `json:"verify_ok,omitempty"`
	ByTool        []toolRow    `json:"by_tool"`
	Curve         []curvePoint `json:"curve"`
	// After packing everything (CAS stores, real traces): the time it
	// took, what the store then takes on disk, and the latency of reading
	// packed blobs of at most 64 KiB back by key.
	PackSeconds  float64 `json:"pack_seconds,omitempty"`
	PackedBlocks int64   `json:"packed_block_bytes,omitempty"`
	// PackedReserve is the part of PackedBlocks that is the reserve file.
	PackedReserve int64   `json:"packed_reserve_bytes,omitempty"`
	PackedData    int64   `json:"packed_data_bytes,omitempty"`
	PackedIndex   int64   `json:"packed_index_bytes,omitempty"`
	PackedFiles   int     `json:"packed_files,omitempty"`
	PackedReads   int     `json:"packed_reads,omitempty"`
	PackedReadP50 float64 `json:"packed_read_p50_ms,omitempty"`
	PackedReadP99 float64 `json:"packed_read_p99_ms,omitempty"`
	PackedReadsOK bool    `json:"packed_reads_ok,omitempty"`
}

// benchStrategies are the policies of the replay: what a team would set.
func benchStrategies() *policy.Strategies {
	return policy.MustStrategies(
		policy.For("screenshot", policy.Always),
		policy.For("web_fetch", policy.OverChars(4000)),
		policy.For("run_tests", policy.OverChars(2000)),
		policy.ForGroup([]string{"read_file", "grep"}, policy.OverChars(1500)),
		policy.Default(policy.OverChars(4000)),
	)
}

func openStore(ctx context.Context, name, dir string) (hook.Store, func() error, error) {
	switch name {
	case storeCASFull, storeCASNone, storeCASRecent:
		opts := []store.Option{store.WithCreate()}
		switch name {
		case storeCASNone:
			opts = append(opts, store.WithDurability(cas.SyncNone))
		case storeCASRecent:
			opts = append(opts, store.RecentKeysMayBeLostOnPowerCut())
		}
		s, err := store.Open(ctx, dir, opts...)
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	case storeDirFull, storeDirNone:
		var opts []hook.DirOption
		if name == storeDirFull {
			opts = append(opts, hook.Durable())
		}
		s, err := hook.NewDirStore(dir, opts...)
		return s, func() error { return nil }, err
	case storeFloorFull, storeFloorNone:
		s, err := newFloorStore(dir, name == storeFloorFull)
		return s, func() error { return nil }, err
	}
	return nil, nil, fmt.Errorf("unknown store %q", name)
}

// replay runs in a child process: it replays the trace into one store and
// measures it.
func replay(ctx context.Context, c replayConfig) (replayResult, error) {
	res := replayResult{Store: c.Store, Trace: c.TraceTag}
	var tr stepSource
	strategies := benchStrategies()
	total := c.Trace.Runs * c.Trace.Steps
	if c.RealTrace != "" {
		rt, err := loadRealTrace(c.RealTrace)
		if err != nil {
			return res, err
		}
		tr, total = rt, len(rt.steps)
		strategies = policy.MustStrategies(policy.Default(policy.OverChars(c.Threshold)))
	} else {
		st, err := trace.New(c.Trace)
		if err != nil {
			return res, err
		}
		tr = st
	}
	s, closeStore, err := openReplayStore(ctx, c)
	if err != nil {
		return res, err
	}
	h, err := hook.New(s, strategies)
	if err != nil {
		return res, err
	}
	type blobKey struct {
		d   cas.Digest
		ext string
	}
	unique := map[blobKey]bool{}
	toolLogical := map[string]*toolRow{}
	every := 0 // no point during the replay
	if c.Samples > 0 {
		every = max(1, total/c.Samples)
	}
	var mu sync.Mutex // over the counts, when agents write at once
	account := func(step trace.Step, out []hook.Result, took time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		res.Latencies = append(res.Latencies, float64(took.Microseconds())/1000)
		res.Steps++
		for i, r := range out {
			res.Results++
			if !hook.IsPointer(r) {
				continue
			}
			res.Offloaded++
			refs := hook.References(r)
			for k, p := range step.Results[i].Parts {
				data := []byte(p.Text)
				if p.Kind != hook.KindText {
					data = p.Data
				}
				res.Parts++
				res.LogicalBytes += int64(len(data))
				bk := blobKey{cas.Sum(data), filepath.Ext(refs[k].Path)}
				if !unique[bk] {
					unique[bk] = true
					res.UniqueBytes += int64(len(data))
				}
				row := toolLogical[r.Tool]
				if row == nil {
					row = &toolRow{Tool: r.Tool}
					toolLogical[r.Tool] = row
				}
				row.Parts++
				row.Logical += int64(len(data))
			}
		}
		// The curve is drawn for one agent only: du between steps would
		// stall the agents writing meanwhile.
		if every > 0 && c.Agents <= 1 && res.Steps%every == 0 {
			res.Curve = append(res.Curve, curvePoint{Step: res.Steps, Logical: res.LogicalBytes, OnDisk: du(c.Dir).blocks})
		}
	}
	var busy time.Duration // in Offload calls only: not making the trace, not measuring
	if c.Agents > 1 {
		res.Agents = c.Agents
		if busy, err = replayAgents(ctx, h, tr, c.Agents, account); err != nil {
			return res, err
		}
	}
	if c.Agents <= 1 {
		err := eachStep(tr, func(step trace.Step) error {
			t0 := time.Now()
			out, err := h.Offload(ctx, hook.Step{Run: step.Run, Number: step.Number}, step.Results)
			took := time.Since(t0)
			busy += took
			if err != nil {
				return err
			}
			account(step, out, took)
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	if cs, ok := s.(*store.Store); ok {
		// Rows still waiting for their shared commit (sync=none) are part
		// of the work: it counts.
		t0 := time.Now()
		if err := cs.Flush(); err != nil {
			return res, err
		}
		busy += time.Since(t0)
		// The rows staged (sync=none) are folded into the index's tables
		// by the next read: that work is reported beside the replay's.
		t0 = time.Now()
		if err := cs.FoldStaged(ctx); err != nil {
			return res, err
		}
		res.FoldSeconds = time.Since(t0).Seconds()
	}
	res.Seconds = busy.Seconds()
	res.PerSecond = float64(res.Results) / res.Seconds
	res.Curve = append(res.Curve, curvePoint{Step: res.Steps, Logical: res.LogicalBytes, OnDisk: du(c.Dir).blocks})
	res.P50, res.P90, res.P99 = percentile(res.Latencies, 50), percentile(res.Latencies, 90), percentile(res.Latencies, 99)

	// What the store takes on disk, before gc changes it.
	cs, isCAS := s.(*store.Store)
	if isCAS {
		if err := cs.Checkpoint(ctx); err != nil {
			return res, err
		}
	}
	u := du(c.Dir)
	res.StoredBytes, res.BlockBytes, res.Files, res.Dirs, res.IndexBytes = u.data, u.blocks, u.files, u.dirs, u.index
	res.DedupRatio = 1
	if res.StoredBytes > 0 {
		res.DedupRatio = float64(res.LogicalBytes) / float64(res.StoredBytes)
	}
	if isCAS && c.RealTrace != "" {
		if err := packFinish(ctx, cs, c.Dir, &res); err != nil {
			return res, err
		}
	}
	if isCAS && cs.Remote() {
		if err := remoteFinish(ctx, cs, &res); err != nil {
			return res, err
		}
	} else if isCAS {
		if err := casFinish(ctx, cs, &res); err != nil {
			return res, err
		}
	} else {
		for _, row := range toolLogical {
			row.Stored = row.Logical
			res.ByTool = append(res.ByTool, *row)
		}
	}
	sort.Slice(res.ByTool, func(i, j int) bool { return res.ByTool[i].Logical > res.ByTool[j].Logical })
	if err := closeStore(); err != nil {
		return res, err
	}
	res.PeakRSSKiB = procstat.PeakRSSKiB()
	return res, nil
}

// stepSource is a trace to replay: the synthetic one (trace.Trace) or a
// real one (realTrace).
type stepSource interface {
	Next() (trace.Step, bool, error)
}

// eachStep calls f with each of tr's steps, in order, until tr ends or
// either fails.
func eachStep(tr stepSource, f func(trace.Step) error) error {
	for {
		step, ok, err := tr.Next()
		if err != nil || !ok {
			return err
		}
		if err := f(step); err != nil {
			return err
		}
	}
}

// replayAgents replays a trace's runs with agents writing at once: each
// agent replays a whole run, step by step, then takes the next run not yet
// taken, in the trace's order. It returns the time from the first step to
// the end of the last.
func replayAgents(ctx context.Context, h *hook.Hook, tr stepSource, agents int, account func(trace.Step, []hook.Result, time.Duration)) (time.Duration, error) {
	var (
		order []string
		runs  = map[string][]trace.Step{}
	)
	err := eachStep(tr, func(step trace.Step) error {
		if _, seen := runs[step.Run]; !seen {
			order = append(order, step.Run)
		}
		runs[step.Run] = append(runs[step.Run], step)
		return nil
	})
	if err != nil {
		return 0, err
	}
	next := make(chan []trace.Step, len(order))
	for _, r := range order {
		next <- runs[r]
	}
	close(next)
	// Each agent keeps what it did and it is accounted for after the wall
	// clock stops: accounting hashes every part under one lock, which
	// would add the same serial cost to every store and pull their ratio
	// towards 1. The first error stops every agent.
	type done struct {
		step trace.Step
		out  []hook.Result
		took time.Duration
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, agents)
	did := make([][]done, agents)
	var wg sync.WaitGroup
	t0 := time.Now()
	for a := range agents {
		wg.Go(func() {
			for steps := range next {
				for _, step := range steps {
					if ctx.Err() != nil {
						return
					}
					s0 := time.Now()
					out, err := h.Offload(ctx, hook.Step{Run: step.Run, Number: step.Number}, step.Results)
					if err != nil {
						errs[a] = err
						cancel()
						return
					}
					did[a] = append(did[a], done{step, out, time.Since(s0)})
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return wall, err
	}
	for _, steps := range did {
		for _, d := range steps {
			account(d.step, d.out, d.took)
		}
	}
	return wall, nil
}

// casFinish measures what only the CAS store does: per-tool dedup, verify
// against plain hashing of the same bytes, and gc after pruning a run.
func casFinish(ctx context.Context, s *store.Store, res *replayResult) error {
	st, err := statsByTool(ctx, s, res)
	if err != nil {
		return err
	}
	// BLAKE3 over the same files, read the same way, as the yardstick.
	t0 := time.Now()
	hashed, err := hashFiles(ctx, s)
	if err != nil {
		return err
	}
	hashSecs := time.Since(t0).Seconds()
	if err := timeVerify(ctx, s, res); err != nil {
		return err
	}
	res.HashMBps = float64(hashed) / 1e6 / hashSecs
	if _, err := s.Prune(ctx, store.PruneOptions{Run: firstRun(st)}); err != nil {
		return err
	}
	t0 = time.Now()
	g, err := s.GC(ctx, store.GCOptions{Grace: 0})
	if err != nil {
		return err
	}
	res.GCSeconds = time.Since(t0).Seconds()
	res.GCFreedBytes = g.FreedBytes
	return nil
}

// statsByTool reads a CAS store's stats, after a replay, and adds its
// tools' parts and bytes to res: what the store says it keeps, where the
// other stores' rows are counted from the trace.
func statsByTool(ctx context.Context, s *store.Store, res *replayResult) (store.Stats, error) {
	st, err := s.Stats(ctx, "")
	if err != nil {
		return st, err
	}
	for _, t := range st.ByTool {
		res.ByTool = append(res.ByTool, toolRow{Tool: t.Name, Parts: t.Parts, Logical: t.LogicalBytes, Stored: t.StoredBytes})
	}
	return st, nil
}

// timeVerify runs verify over a CAS store, which reads every blob and
// hashes it, and sets in res its time, speed and whether it found the
// store whole.
func timeVerify(ctx context.Context, s *store.Store, res *replayResult) error {
	t0 := time.Now()
	v, err := s.Verify(ctx, store.VerifyOptions{})
	if err != nil {
		return err
	}
	res.VerifySeconds = time.Since(t0).Seconds()
	res.VerifyOK = v.OK
	res.VerifyMBps = float64(v.CheckedBytes) / 1e6 / res.VerifySeconds
	return nil
}

func firstRun(st store.Stats) string {
	first := ""
	var at time.Time
	for _, r := range st.ByRun {
		if first == "" || r.First.Before(at) {
			first, at = r.Name, r.First
		}
	}
	return first
}

// usage is what a store takes on disk.
type usage struct {
	data, index, blocks int64
	// reserve is the blocks of the store's reserve file, counted in blocks
	// too: the space kept so that gc can run on a full disk, which grows
	// with the index.
	reserve     int64
	files, dirs int
}

// du walks a store: data files (blobs or result files), the index files,
// and the blocks every file and directory occupies.
func du(dir string) usage {
	var u usage
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if blocks, ok := diskBytes(fi); ok {
			u.blocks += blocks
			if !d.IsDir() && d.Name() == store.ReserveFile {
				u.reserve += blocks
			}
		}
		// An open writer's marker is bookkeeping, like the lock files: its
		// blocks count, not as data, a file or a directory.
		if d.Name() == store.UnsyncedDir || filepath.Base(filepath.Dir(p)) == store.UnsyncedDir {
			return nil
		}
		if d.IsDir() {
			u.dirs++
			return nil
		}
		u.files++
		name := d.Name()
		switch {
		case name == store.IndexFile || name == store.IndexFile+"-wal" || name == store.IndexFile+"-shm":
			u.index += fi.Size()
		case name == cas.MarkerFile || name == store.LockFile || name == store.IntentFile || name == store.ReserveFile || filepath.Ext(name) == ".lock":
		default:
			u.data += fi.Size()
		}
		return nil
	})
	return u
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// packFinish packs every blob, measures the store on disk again, and reads
// packed blobs of at most 64 KiB back by key, in random order (a read never
// profits from its neighbour's frame), timing each read and checking its
// size (its bytes are re-hashed by the read itself).
func packFinish(ctx context.Context, s *store.Store, dir string, res *replayResult) error {
	t0 := time.Now()
	if _, err := s.Pack(ctx, store.PackOptions{OlderThan: 0}); err != nil {
		return err
	}
	res.PackSeconds = time.Since(t0).Seconds()
	// Measured as pack leaves the store, still open: every file in its
	// directory counts, the index's log and shared memory included, with
	// no checkpoint of the benchmark's own (pack cuts the log itself).
	u := du(dir)
	res.PackedBlocks, res.PackedData, res.PackedIndex, res.PackedFiles = u.blocks, u.data, u.index, u.files
	res.PackedReserve = u.reserve
	parts, err := s.List(ctx, store.ListOptions{})
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	var lat []float64
	res.PackedReadsOK = true
	for _, p := range parts {
		if p.Bytes > 64<<10 {
			continue
		}
		t0 := time.Now()
		c, err := s.Read(ctx, p.Run, p.Key)
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
		if err != nil || int64(len(c.Data)) != p.Bytes {
			res.PackedReadsOK = false
		}
		if len(lat) == 1000 {
			break
		}
	}
	res.PackedReads = len(lat)
	res.PackedReadP50, res.PackedReadP99 = percentile(lat, 50), percentile(lat, 99)
	return nil
}
