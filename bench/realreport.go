package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolcas/toolcas/store"
)

// realStores are the stores a real trace is replayed into.
var realStores = []string{storeDirNone, storeDirFull, storeCASNone, storeCASFull, storeCASRecent}

// realReport is the replay of a real trace: every store, every round.
type realReport struct {
	Path      string `json:"path"`
	Threshold int    `json:"threshold"`
	Rounds    int    `json:"rounds"`
	// Agents, over one, is how many agents wrote at once in the replays
	// made besides the one-agent replays.
	Agents int `json:"agents,omitempty"`
	// Results holds one replay per store per round, round by round.
	Results []replayResult `json:"results"`
	// FileSystem is the stores' (see fileSystem).
	FileSystem string `json:"file_system"`
	// NewFileBefore and NewFileAfter are what a new file cost in the work
	// directory before the rounds and after them (see newFileCost).
	NewFileBefore time.Duration `json:"new_file_before_ns"`
	NewFileAfter  time.Duration `json:"new_file_after_ns"`
}

// replayReal replays the real trace into every store, o.rounds times, the
// order of the stores turning each round so that none always runs first on
// a cold disk or last on a tired one.
//
// Each replay writes into a directory of its own, and all are removed
// together at the end: on ext4, files made just after another store's
// were removed cost more (the allocator passes over the inodes freed a
// moment ago), which would charge one store for the one before it. Each
// replay also starts after sync(2), waiting for no bytes another left
// unwritten.
func replayReal(ctx context.Context, o options, work string, progress func(string, ...any)) (*realReport, error) {
	r := &realReport{Path: o.trace, Threshold: o.threshold, Rounds: o.rounds, FileSystem: fileSystem(work)}
	agents := []int{1}
	if o.agents > 1 {
		r.Agents = o.agents
		agents = append(agents, o.agents)
	}
	var dirs []string
	defer func() {
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}()
	probe := func(name string) (time.Duration, error) {
		d := filepath.Join(work, name)
		dirs = append(dirs, d)
		return newFileCost(d, newFileProbes)
	}
	var err error
	if r.NewFileBefore, err = probe("new-file-cost-before"); err != nil {
		return nil, err
	}
	for round := range o.rounds {
		for _, n := range agents {
			for i := range realStores {
				name := realStores[(i+round)%len(realStores)]
				progress("replaying %s into %s, %d agent(s) at once (round %d of %d)…", filepath.Base(o.trace), name, n, round+1, o.rounds)
				// No curve: nothing draws it, and the walks of the store
				// between steps that take its points would weigh on the
				// steps after them (the caches they evict, the wall time
				// they add to a store's background work), more on a store
				// with more directories to walk.
				cfg := replayConfig{Store: name, Dir: filepath.Join(work, fmt.Sprintf("real-%s-%d-%d", name, n, round+1)),
					TraceTag: "real", RealTrace: o.trace, Threshold: o.threshold, Agents: n}
				dirs = append(dirs, cfg.Dir)
				syncAll()
				var res replayResult
				if err := runChild(ctx, "replay", cfg, &res); err != nil {
					return nil, fmt.Errorf("replay of %s into %s: %w", o.trace, name, err)
				}
				res.Round = round + 1
				r.Results = append(r.Results, res)
			}
		}
	}
	if r.NewFileAfter, err = probe("new-file-cost-after"); err != nil {
		return nil, err
	}
	return r, nil
}

// newFileProbes is how many files newFileCost makes.
const newFileProbes = 256

// newFileCost makes the directory dir (what a run that stopped left there
// removed first) and n new 4 KiB files in it, without syncs, and returns
// the mean time a file took: what a store's new file costs on that file
// system at that moment. On an ext4 without a journal it can cost many
// times more for minutes after files near it were removed. The files
// stay, to be removed with the rest at the end: removed now, they would
// make the next store's files dearer.
func newFileCost(dir string, n int) (time.Duration, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return 0, fmt.Errorf("new file cost: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0, fmt.Errorf("new file cost: %w", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return 0, fmt.Errorf("new file cost: %w", err)
	}
	data := make([]byte, 4<<10)
	t0 := time.Now()
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), data, 0o644); err != nil {
			return 0, fmt.Errorf("new file cost: %w", err)
		}
	}
	return time.Since(t0) / time.Duration(max(n, 1)), nil
}

// of returns a store's replays with one agent, one per round.
func (r *realReport) of(store string) []replayResult { return r.ofAgents(store, 1) }

// ofAgents returns a store's replays with n agents at once, one per round.
func (r *realReport) ofAgents(store string, n int) []replayResult {
	var out []replayResult
	for _, x := range r.Results {
		if x.Store == store && max(x.Agents, 1) == n {
			out = append(out, x)
		}
	}
	return out
}

// ratios returns, per round, f(a) / f(b) for the two stores' replays of
// that round with one agent, and their minimum and median.
func (r *realReport) ratios(a, b string, f func(replayResult) float64) (min, median float64) {
	return r.ratiosAgents(a, b, 1, f)
}

// ratiosAgents is ratios for the replays with n agents at once.
func (r *realReport) ratiosAgents(a, b string, n int, f func(replayResult) float64) (min, median float64) {
	as, bs := r.ofAgents(a, n), r.ofAgents(b, n)
	var rs []float64
	for i := range min2(len(as), len(bs)) {
		if d := f(bs[i]); d > 0 {
			rs = append(rs, f(as[i])/d)
		}
	}
	if len(rs) == 0 {
		return 0, 0
	}
	slices.Sort(rs)
	return rs[0], rs[len(rs)/2]
}

func min2(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// worst returns the largest value of f over a store's rounds.
func (r *realReport) worst(store string, f func(replayResult) float64) float64 {
	w := 0.0
	for _, x := range r.of(store) {
		w = max(w, f(x))
	}
	return w
}

// targets are the goals measured on the real trace.
func (r *realReport) targets() []target {
	// Every block in the store's directory counts: blobs, packs, the index
	// with its log and shared memory, the reserve file, the directories.
	blocks := func(x replayResult) float64 { return float64(x.BlockBytes) }
	perSec := func(x replayResult) float64 { return x.PerSecond }
	// Smaller on disk: directory blocks / CAS blocks after pack.
	dmin, dmed := r.ratios(storeDirFull, storeCASFull, func(x replayResult) float64 {
		if x.Store != storeCASFull {
			return blocks(x)
		}
		return float64(x.PackedBlocks)
	})
	tmin, tmed := r.ratios(storeCASFull, storeDirFull, perSec)
	rmin, rmed := r.ratios(storeCASRecent, storeDirFull, perSec)
	p99 := r.worst(storeCASFull, func(x replayResult) float64 { return x.PackedReadP99 })
	ok := true
	for _, x := range r.of(storeCASFull) {
		ok = ok && x.PackedReadsOK
	}
	name := filepath.Base(r.Path)
	// Without syncs, on a tmpfs no disk hides the CPU either store spends.
	noSync := 1.0
	if strings.HasPrefix(r.FileSystem, "tmpfs") {
		noSync = 0.8
	}
	nmin, nmed := r.ratios(storeCASNone, storeDirNone, perSec)
	// Without syncs the steps are staged, and folded by the next read: the
	// ratio with that fold counted too, beside the goal's.
	folded := func(x replayResult) float64 { return float64(x.Results) / (x.Seconds + x.FoldSeconds) }
	fmin, fmed := r.ratios(storeCASNone, storeDirNone, folded)
	// A speed is judged by the median of its rounds' ratios, the least
	// given beside it, as the write path's targets are: on an ext4 without
	// a journal one store's replays of the same trace differ threefold
	// from round to round (a new file costs more for minutes after files
	// near it were removed, and each replay's directories lie elsewhere),
	// so that the least round measures the file system's recent past.
	speed := func(what, goal string, floor, min, med float64, more string) target {
		return target{what, goal, fmt.Sprintf("%.2f × (median over %d rounds; least %.2f ×)%s", med, r.Rounds, min, more), med, med >= floor}
	}
	withFold := func(min, med float64) string {
		return fmt.Sprintf("; with the fold of the staged steps after it: %.2f × (median; least %.2f ×)", med, min)
	}
	concurrent := []target{speed(fmt.Sprintf("real trace %s: replay throughput without syncs", name),
		fmt.Sprintf("≥ %.1f × the directory store without syncs", noSync), noSync, nmin, nmed, withFold(fmin, fmed))}
	if r.Agents > 1 {
		cmin, cmed := r.ratiosAgents(storeCASFull, storeDirFull, r.Agents, perSec)
		concurrent = append(concurrent, speed(fmt.Sprintf("real trace %s: durable replay throughput, %d agents at once", name, r.Agents),
			"≥ 1.0 × the durable directory store with as many agents", 1, cmin, cmed, ""))
		nmin, nmed := r.ratiosAgents(storeCASNone, storeDirNone, r.Agents, perSec)
		fmin, fmed := r.ratiosAgents(storeCASNone, storeDirNone, r.Agents, folded)
		concurrent = append(concurrent, speed(fmt.Sprintf("real trace %s: replay throughput without syncs, %d agents at once", name, r.Agents),
			fmt.Sprintf("≥ %.1f × the directory store without syncs with as many agents", noSync), noSync, nmin, nmed, withFold(fmin, fmed)))
	}
	return append([]target{
		{fmt.Sprintf("real trace %s: on disk after pack, every file of the store counted (index, its log, the reserve)", name), "≥ 5 × smaller than the durable directory store",
			fmt.Sprintf("%.2f × smaller (min over %d rounds; median %.2f ×)", dmin, r.Rounds, dmed), dmin, dmin >= 5},
		speed(fmt.Sprintf("real trace %s: durable replay throughput", name), "≥ 1.0 × the durable directory store", 1, tmin, tmed, ""),
		speed(fmt.Sprintf("real trace %s: replay throughput, durability %s", name, store.DurabilityRecentKeysMayBeLost),
			"≥ 1.0 × the durable directory store", 1, rmin, rmed, ""),
		{fmt.Sprintf("real trace %s: reading a packed blob ≤ 64 KiB", name), "≤ 2 ms p99",
			fmt.Sprintf("%.2f ms p99 (worst round), every read checked: %v", p99, ok), p99, p99 <= 2 && ok},
	}, concurrent...)
}

// section is the report's part for the real trace.
func (r *realReport) section(b *strings.Builder) {
	fmt.Fprintf(b, "## A real agent trace: %s\n\n", filepath.Base(r.Path))
	first := r.Results[0]
	fmt.Fprintf(b, "%d steps, %d tool results; results over %d characters offloaded: %d (%s, %s unique, dedup %.2f ×). "+
		"Every store replays the trace in its own process, %d rounds, the stores taking turns; the CAS stores are then packed "+
		"(`casctl pack --older-than 0s`) and measured again as pack leaves them, still open: every block of every file and directory "+
		"in the store counts, the index with its log and shared memory and the reserve file included (its size follows the index's, "+
		"64 KiB to 1 MiB).\n\n",
		first.Steps, first.Results, r.Threshold, first.Offloaded, mib(first.LogicalBytes), mib(first.UniqueBytes),
		float64(first.LogicalBytes)/float64(max(first.UniqueBytes, 1)), r.Rounds)
	if r.NewFileBefore > 0 {
		fmt.Fprintf(b, "Writing a new 4 KiB file without a sync, in a fresh directory beside the stores', took %s before the rounds and %s "+
			"after them (the mean of %d files).", r.NewFileBefore.Round(100*time.Nanosecond), r.NewFileAfter.Round(100*time.Nanosecond), newFileProbes)
		if strings.HasPrefix(r.FileSystem, ext4NoJournal) {
			b.WriteString(" On an ext4 without a journal a new file costs several times more for minutes after many files near it " +
				"were removed, and both stores pay it alike.")
		}
		b.WriteString("\n\n")
	}
	if r.Agents > 1 {
		fmt.Fprintf(b, "Each round also replays the trace into every store with %d agents writing at once, in one process: "+
			"each agent replays a whole run, then takes the next; results/s is then over the time from the first step to the last "+
			"(rows marked × %d).\n\n", r.Agents, r.Agents)
	}
	b.WriteString("| store | round | on disk (blocks) | after pack | of which index / reserve | files | results/s | step p50 / p99 (ms) | pack | packed read p50 / p99 (ms) |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, x := range r.Results {
		after, idx, pack, read := "–", mib(x.IndexBytes), "–", "–"
		if x.PackedBlocks > 0 {
			after = mib(x.PackedBlocks)
			idx = mib(x.PackedIndex) + " / " + mib(x.PackedReserve)
			pack = fmt.Sprintf("%.2f s", x.PackSeconds)
			read = fmt.Sprintf("%.3f / %.3f (%d reads)", x.PackedReadP50, x.PackedReadP99, x.PackedReads)
		}
		name := x.Store
		if x.Agents > 1 {
			name += fmt.Sprintf(" × %d", x.Agents)
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %d | %.0f | %.2f / %.2f | %s | %s |\n", name, x.Round,
			mib(x.BlockBytes), after, idx, x.Files, x.PerSecond, x.P50, x.P99, pack, read)
	}
	b.WriteString("\n")
	for _, t := range r.targets() {
		met := "met"
		if !t.Met {
			met = "**missed**"
		}
		fmt.Fprintf(b, "- %s: %s (target %s) — %s\n", t.What, t.Measured, t.Target, met)
	}
	b.WriteString("\n")
}

// check returns every way the real-trace replays fail to add up.
func (r *realReport) check() []string {
	var bad []string
	f := r.Results[0]
	for _, x := range r.Results {
		if x.Results != f.Results || x.Offloaded != f.Offloaded || x.LogicalBytes != f.LogicalBytes || x.UniqueBytes != f.UniqueBytes {
			bad = append(bad, fmt.Sprintf("real/%s replayed another trace than real/%s", x.Store, f.Store))
		}
		if (x.Store == storeCASFull || x.Store == storeCASNone || x.Store == storeCASRecent) && (!x.VerifyOK || !x.PackedReadsOK || x.PackedBlocks == 0) {
			bad = append(bad, fmt.Sprintf("real/%s: verify %v, packed reads %v, packed blocks %d", x.Store, x.VerifyOK, x.PackedReadsOK, x.PackedBlocks))
		}
	}
	return bad
}

// replayRounds replays a trace into every store, rounds times, the order of
// the stores turning each round, and returns every replay, round by round.
func replayRounds(ctx context.Context, stores []string, rounds int, progress func(string, ...any), what string, config func(string) replayConfig) ([]replayResult, error) {
	var out []replayResult
	for round := range rounds {
		for i := range stores {
			name := stores[(i+round)%len(stores)]
			progress("replaying %s into %s (round %d of %d)…", what, name, round+1, rounds)
			cfg := config(name)
			var res replayResult
			if err := runChild(ctx, "replay", cfg, &res); err != nil {
				return nil, fmt.Errorf("replay of %s into %s: %w", what, name, err)
			}
			os.RemoveAll(cfg.Dir)
			out = append(out, res)
		}
	}
	return out, nil
}

// medianRounds returns, for each store in order, its replay of median
// throughput over the rounds (the lower middle of an even count).
func medianRounds(all []replayResult, stores []string) []replayResult {
	rs := realReport{Results: all}
	var out []replayResult
	for _, name := range stores {
		of := rs.of(name)
		if len(of) == 0 {
			continue
		}
		slices.SortStableFunc(of, func(a, b replayResult) int { return cmp.Compare(a.PerSecond, b.PerSecond) })
		out = append(out, of[(len(of)-1)/2])
	}
	return out
}

// roundRatios returns, per round, f(a) / f(b), and their minimum and
// median.
func roundRatios(all []replayResult, a, b string, f func(replayResult) float64) (min, median float64) {
	return (&realReport{Results: all}).ratios(a, b, f)
}
