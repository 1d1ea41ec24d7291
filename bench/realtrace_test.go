package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/internal/trace"
	"github.com/toolcas/toolcas/store"
)

func steps(t *testing.T, path string) []trace.Step {
	t.Helper()
	rt, err := loadRealTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []trace.Step
	for {
		st, ok, err := rt.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, st)
	}
}

func TestRealTraceShapes(t *testing.T) {
	rows := steps(t, "testdata/traces/rows.jsonl")
	if len(rows) != 3 || len(rows[0].Results) != 2 || rows[0].Run != "user:42/chat:7" || rows[0].Number != 1 ||
		rows[0].Results[1].Tool != "grep" || rows[0].Results[1].CallID != "call_00_b" || rows[2].Run != "session-2" {
		t.Errorf("JSON lines read as %+v", rows)
	}
	chat := steps(t, "testdata/traces/chat.json")
	if len(chat) != 2 || chat[0].Run != "chat" || chat[0].Number != 1 || len(chat[0].Results) != 2 ||
		chat[0].Results[0].Tool != "read_file" || chat[0].Results[1].Parts[0].Text != "a.go:1: match" ||
		chat[1].Number != 2 || chat[1].Results[0].Tool != "bash" {
		t.Errorf("chat messages read as %+v", chat)
	}
	traj := steps(t, "testdata/traces/task.traj.json")
	if len(traj) != 1 || traj[0].Run != "task" || traj[0].Results[0].Parts[0].Text != "<returncode>0</returncode>" {
		t.Errorf("trajectory read as %+v", traj)
	}
	// A directory reads every file in name order; gzip is undone.
	dir := t.TempDir()
	b, _ := os.ReadFile("testdata/traces/chat.json")
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(b)
	w.Close()
	os.WriteFile(filepath.Join(dir, "b.json.gz"), z.Bytes(), 0o644)
	c, _ := os.ReadFile("testdata/traces/rows.jsonl")
	os.WriteFile(filepath.Join(dir, "a.jsonl"), c, 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a trace"), 0o644)
	all := steps(t, dir)
	if len(all) != 5 || all[0].Run != "user:42/chat:7" || all[3].Run != "b" {
		t.Errorf("directory read as %d steps: %+v", len(all), all)
	}
}

func TestRealTraceBadInput(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"garbage.jsonl": "{\"run\": \"a\", \"step\": 1, \"text\": \"x\"}\nnot json\n",
		"other.jsonl":   `{"hello": "world"}`,
		"empty.jsonl":   "",
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		_, err := loadRealTrace(p)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("loadRealTrace(%s) = %v, want an error naming the file", name, err)
		}
	}
	if _, err := loadRealTrace(filepath.Join(dir, "missing.jsonl")); err == nil {
		t.Error("a missing trace loaded")
	}
}

// TestQuickRealTrace replays a small real-shaped trace into every store,
// packs the CAS stores and checks the report's figures.
func TestQuickRealTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a trace into four stores; skipped with -short")
	}
	var stdout, stderr bytes.Buffer
	args := []string{"-quick", "-json", "-synthetic=false", "-threshold", "5", "-trace", "testdata/traces", "-out", t.TempDir(), "-dir", t.TempDir()}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Real == nil || len(rep.Real.Results) != len(realStores) || len(rep.Repeat) != 0 || len(rep.Checks) != 0 {
		t.Fatalf("report: real %+v, %d synthetic, checks %q", rep.Real, len(rep.Repeat), rep.Checks)
	}
	for _, r := range rep.Real.Results {
		// Texts over 5 characters: every one of the 8 but "short" and "ok".
		if r.Results != 8 || r.Offloaded != 6 {
			t.Errorf("%s: %d results, %d offloaded; want 8, 6", r.Store, r.Results, r.Offloaded)
		}
		// No walk of the store between steps: the curve's one point is
		// taken after the replay.
		if len(r.Curve) != 1 || r.Curve[0].Step != r.Steps {
			t.Errorf("%s: curve %+v, want one point, after step %d", r.Store, r.Curve, r.Steps)
		}
		cas := r.Store == storeCASFull || r.Store == storeCASNone || r.Store == storeCASRecent
		if cas != (r.PackedBlocks > 0) || cas != (r.PackedReads == 6) || cas != r.PackedReadsOK {
			t.Errorf("%s: packed %d blocks, %d reads, ok %v", r.Store, r.PackedBlocks, r.PackedReads, r.PackedReadsOK)
		}
		// A tiny index keeps the smallest reserve, counted in the blocks.
		if cas && (r.PackedReserve != store.MinReserve || r.PackedBlocks < r.PackedReserve+r.PackedData) {
			t.Errorf("%s: packed %d blocks, of which reserve %d, data %d; want a reserve of %d counted in", r.Store,
				r.PackedBlocks, r.PackedReserve, r.PackedData, store.MinReserve)
		}
	}
	if len(rep.Targets) != 5 {
		t.Errorf("%d targets for the real trace, want 5", len(rep.Targets))
	}
	if rep.Real.NewFileBefore <= 0 || rep.Real.NewFileAfter <= 0 {
		t.Errorf("a new file cost %v before the rounds and %v after, want both measured", rep.Real.NewFileBefore, rep.Real.NewFileAfter)
	}
	// The size on disk compares every block of each store's directory.
	var dir, cas, dirNone, casNone float64
	for _, r := range rep.Real.Results {
		switch r.Store {
		case storeDirFull:
			dir = float64(r.BlockBytes)
		case storeCASFull:
			cas = float64(r.PackedBlocks)
		case storeDirNone:
			dirNone = r.PerSecond
		case storeCASNone:
			casNone = r.PerSecond
		}
	}
	// Without syncs, the CAS store's speed against the directory store's,
	// both without syncs.
	if got := rep.Targets[len(rep.Targets)-1]; !strings.Contains(got.What, "without syncs") || got.Value != casNone/dirNone {
		t.Errorf("the last target = %+v, want the speed without syncs: %.0f / %.0f = %.4f", got, casNone, dirNone, casNone/dirNone)
	}
	if got := rep.Targets[0]; !strings.Contains(got.What, "on disk") || got.Value != dir/cas {
		t.Errorf("the first target = %+v, want the size on disk: %.0f / %.0f blocks = %.4f", got, dir, cas, dir/cas)
	}
}

// TestQuickWritesElsewhere: a quick run without -out leaves the committed
// report alone and says where its report went.
func TestQuickWritesElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a trace into four stores; skipped with -short")
	}
	before, _ := os.ReadFile(filepath.Join("results", "REPORT.md"))
	var stdout, stderr bytes.Buffer
	args := []string{"-quick", "-synthetic=false", "-trace", "testdata/traces/chat.json", "-threshold", "5", "-dir", t.TempDir()}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	_, where, ok := strings.Cut(stderr.String(), "writing the report to ")
	where = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(where), "…"))
	if !ok || !strings.HasPrefix(where, os.TempDir()) {
		t.Fatalf("quick run wrote its report to %q, want a temp dir\n%s", where, stderr.String())
	}
	defer os.RemoveAll(where)
	if _, err := os.Stat(filepath.Join(where, "REPORT.md")); err != nil {
		t.Error(err)
	}
	after, _ := os.ReadFile(filepath.Join("results", "REPORT.md"))
	if !bytes.Equal(before, after) {
		t.Error("a quick run changed the committed report")
	}
}

// TestQuickRealTraceAgents: replayed by several agents at once, every
// store records the same results as replayed by one.
func TestQuickRealTraceAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a trace into every store twice; skipped with -short")
	}
	var stdout, stderr bytes.Buffer
	args := []string{"-quick", "-json", "-synthetic=false", "-threshold", "5", "-agents", "3", "-trace", "testdata/traces", "-out", t.TempDir(), "-dir", t.TempDir()}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Real == nil || rep.Real.Agents != 3 {
		t.Fatalf("report: real %+v, want agents 3", rep.Real)
	}
	for _, store := range realStores {
		one, three := rep.Real.ofAgents(store, 1), rep.Real.ofAgents(store, 3)
		if len(one) == 0 || len(three) == 0 {
			t.Errorf("%s: %d one-agent and %d three-agent replays, want both", store, len(one), len(three))
			continue
		}
		a, b := one[0], three[0]
		if a.Results != b.Results || a.Offloaded != b.Offloaded || a.LogicalBytes != b.LogicalBytes || a.UniqueBytes != b.UniqueBytes || len(b.Latencies) != a.Steps {
			t.Errorf("%s: one agent %d results, %d offloaded, %d/%d bytes; three agents %d, %d, %d/%d, %d latencies for %d steps",
				store, a.Results, a.Offloaded, a.LogicalBytes, a.UniqueBytes, b.Results, b.Offloaded, b.LogicalBytes, b.UniqueBytes, len(b.Latencies), a.Steps)
		}
	}
}

// TestNewFileCost makes its files in a directory of its own, its parents
// made and what an earlier probe left there removed, and leaves them; a
// directory that cannot be made is an error.
func TestNewFileCost(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work", "probe")
	for _, n := range []int{8, 3} {
		took, err := newFileCost(dir, n)
		if err != nil || took <= 0 {
			t.Fatalf("newFileCost(%d) = %v, %v; want a time", n, took, err)
		}
		if des, err := os.ReadDir(dir); err != nil || len(des) != n {
			t.Errorf("the probe of %d files left %d (%v)", n, len(des), err)
		}
	}
	if _, err := newFileCost(filepath.Join(dir, "f0", "sub"), 8); err == nil {
		t.Error("newFileCost under a file succeeded")
	}
}

// TestNewFileCostInReport: the report gives the probe's times, and names
// the ext4 cost only where the stores are on an ext4 without a journal.
func TestNewFileCostInReport(t *testing.T) {
	for _, c := range []struct {
		fs   string
		ext4 bool
	}{{"ext4 without a journal (/)", true}, {"ext4 (/)", false}, {"tmpfs (/dev/shm)", false}} {
		r := &realReport{Path: "t.jsonl", Rounds: 1, FileSystem: c.fs, NewFileBefore: 6800 * time.Nanosecond,
			NewFileAfter: 105 * time.Microsecond, Results: []replayResult{{Store: storeDirNone, Round: 1}}}
		var b strings.Builder
		r.section(&b)
		if !strings.Contains(b.String(), "took 6.8µs before the rounds and 105µs after them") {
			t.Errorf("%s: the report does not give the probe's times:\n%s", c.fs, b.String())
		}
		if got := strings.Contains(b.String(), "without a journal a new file costs"); got != c.ext4 {
			t.Errorf("%s: the report names the ext4 cost: %v, want %v", c.fs, got, c.ext4)
		}
	}
}

// A real-trace speed is judged by the median of its rounds' ratios, the
// least printed beside it: one slow round of either store neither makes
// nor breaks the goal, and the goal without syncs is 0.8 × on a tmpfs.
func TestRealSpeedByMedian(t *testing.T) {
	report := func(fs string, cas, dir []float64) *realReport {
		r := &realReport{Path: "t.jsonl", Rounds: len(cas), FileSystem: fs}
		for i := range cas {
			r.Results = append(r.Results,
				replayResult{Store: storeCASNone, Round: i + 1, Results: 100, Seconds: 1, PerSecond: cas[i]},
				replayResult{Store: storeDirNone, Round: i + 1, Results: 100, Seconds: 1, PerSecond: dir[i]})
		}
		return r
	}
	noSync := func(r *realReport) target {
		for _, x := range r.targets() {
			if strings.HasSuffix(x.What, "replay throughput without syncs") {
				return x
			}
		}
		t.Fatal("no target for the throughput without syncs")
		return target{}
	}
	for _, c := range []struct {
		fs       string
		cas, dir []float64
		met      bool
		measured string
	}{
		// Ratios 0.5, 1.2, 1.1: a slow first round.
		{ext4NoJournal + " (/)", []float64{50, 120, 110}, []float64{100, 100, 100}, true, "1.10 × (median over 3 rounds; least 0.50 ×)"},
		// Ratios 0.9, 2.0, 0.95.
		{ext4NoJournal + " (/)", []float64{90, 200, 95}, []float64{100, 100, 100}, false, "0.95 × (median over 3 rounds; least 0.90 ×)"},
		{"tmpfs (/dev/shm)", []float64{90, 200, 85}, []float64{100, 100, 100}, true, "0.90 × (median over 3 rounds; least 0.85 ×)"},
		{"tmpfs (/dev/shm)", []float64{70, 200, 75}, []float64{100, 100, 100}, false, "0.75 × (median over 3 rounds; least 0.70 ×)"},
	} {
		got := noSync(report(c.fs, c.cas, c.dir))
		if got.Met != c.met || !strings.HasPrefix(got.Measured, c.measured) {
			t.Errorf("%s, %v against %v: met %v, %q; want met %v, %q…", c.fs, c.cas, c.dir, got.Met, got.Measured, c.met, c.measured)
		}
	}
}
