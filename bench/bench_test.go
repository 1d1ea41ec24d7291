package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/internal/pgtest"
	"github.com/toolcas/toolcas/internal/versitygw"
)

func TestMain(m *testing.M) {
	// The bench runs each store in a child process: this test binary, in
	// the child's role.
	if role := os.Getenv(childEnv); role != "" {
		if strings.HasPrefix(role, "mcp-") {
			os.Exit(mcpChild(role))
		}
		os.Exit(child(context.Background(), role, os.Getenv(configEnv), os.Stdout, os.Stderr))
	}
	if err := platformErr(); err != nil {
		fmt.Println("skipping the bench's tests:", err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestMCPBench runs a small MCP benchmark: the proxy offloads the big
// result and not the small one (benchMCP checks every call), and the
// report has a row per tool and round.
func TestMCPBench(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-mcp", "-mcp-calls", "5", "-mcp-rounds", "2", "-out", out, "-dir", t.TempDir()}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "MCP.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| small  | 1 ", "| small  | all ", "| big    | 2 ", "Goal: at most 1 ms added at p50"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("MCP.md lacks %q:\n%s", want, b)
		}
	}
}

// TestQuickReportAddsUp runs the bench as `go run ./bench -quick -json`
// would and checks that what it reports is consistent.
func TestQuickReportAddsUp(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a trace into six stores; skipped with -short")
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-quick", "-json", "-out", out, "-dir", t.TempDir()}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Checks) > 0 {
		t.Errorf("the report's own checks failed: %q", rep.Checks)
	}
	if len(rep.Repeat) != 6 || len(rep.NoRepeat) != 4 || len(rep.Targets) < 10 {
		t.Fatalf("%d stores, %d no-repeat stores, %d targets", len(rep.Repeat), len(rep.NoRepeat), len(rep.Targets))
	}
	// Checked here again, independently of check().
	base := rep.Repeat[0]
	for _, r := range rep.Repeat {
		if r.Offloaded == 0 || r.LogicalBytes == 0 {
			t.Fatalf("%s offloaded nothing", r.Store)
		}
		if r.Results != base.Results || r.LogicalBytes != base.LogicalBytes {
			t.Errorf("%s replayed %d results, %d bytes; %s %d, %d", r.Store, r.Results, r.LogicalBytes, base.Store, base.Results, base.LogicalBytes)
		}
		if got := float64(r.LogicalBytes) / float64(r.StoredBytes); math.Abs(got-r.DedupRatio) > 1e-9 {
			t.Errorf("%s: ratio %v, logical/stored %v", r.Store, r.DedupRatio, got)
		}
		var sum int64
		for _, tool := range r.ByTool {
			sum += tool.Logical
		}
		if sum != r.LogicalBytes {
			t.Errorf("%s: tools sum to %d bytes, total %d", r.Store, sum, r.LogicalBytes)
		}
		switch r.Store {
		case storeDirFull, storeDirNone, storeFloorFull, storeFloorNone:
			if r.StoredBytes != r.LogicalBytes {
				t.Errorf("baseline %s stores %d bytes for %d logical", r.Store, r.StoredBytes, r.LogicalBytes)
			}
		default:
			if r.StoredBytes != r.UniqueBytes || r.StoredBytes >= r.LogicalBytes {
				t.Errorf("%s stores %d bytes for %d unique, %d logical", r.Store, r.StoredBytes, r.UniqueBytes, r.LogicalBytes)
			}
		}
		if !(r.P50 <= r.P90 && r.P90 <= r.P99) || r.PeakRSSKiB <= 0 || r.PerSecond <= 0 {
			t.Errorf("%s: p50 %v p90 %v p99 %v, RSS %d, %v/s", r.Store, r.P50, r.P90, r.P99, r.PeakRSSKiB, r.PerSecond)
		}
	}
	for _, f := range []string{"REPORT.md", "results.json", "bytes.png", "latency.png"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"-runs", "-1"}, {"-steps", "-3"}, {"extra"}, {"-bogus"}, {"-mcp", "-mcp-calls", "0"}} {
		err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{})
		var ue usageError
		if err == nil || !asUsage(err, &ue) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
}

func asUsage(err error, ue *usageError) bool {
	u, ok := err.(usageError)
	if ok {
		*ue = u
	}
	return ok
}

// TestScaleSection runs the scale section at its smallest size: every
// command ran and found what the store holds, the writer put all through
// gc, and the report has the row; -quick and sizes under 10,000 are
// refused.
func TestScaleSection(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a store of 10,000 parts; skipped with -short")
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-scale", "-scale-sizes", "10000", "-out", out, "-dir", t.TempDir()}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep scaleReport
	b, err := os.ReadFile(filepath.Join(out, "scale.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Sizes) != 1 {
		t.Fatalf("%d sizes, want 1", len(rep.Sizes))
	}
	got := map[string]scaleOp{}
	for _, o := range rep.Sizes[0].Ops {
		got[o.Op] = o
	}
	for op, want := range map[string]string{
		"stats":  "10000 parts, 5001 blobs, 10 runs",
		"ls-50":  "50 parts",
		"ls-run": "1000 parts",
		"show":   "10 of 999 parts sharing the blob",
		"prune":  "1000 parts of 1 runs",
		"gc":     "removed 500 blobs",
	} {
		if !strings.Contains(got[op].Detail, want) || got[op].PeakKiB <= 0 {
			t.Errorf("%s = %+v, want %q", op, got[op], want)
		}
	}
	if w := rep.Sizes[0].Writer; w.Count < 1 || w.MaxMilli <= 0 {
		t.Errorf("writer during gc = %+v", w)
	}
	if v, h := got["verify"], got["blake3"]; v.Bytes == 0 || v.Bytes != h.Bytes {
		t.Errorf("verify checked %d bytes, BLAKE3 alone %d: want the same bytes", v.Bytes, h.Bytes)
	}
	md, err := os.ReadFile(filepath.Join(out, "SCALE.md"))
	if err != nil || !strings.Contains(string(md), "| 10000 |") {
		t.Errorf("SCALE.md lacks the row: %v\n%s", err, md)
	}
	for _, args := range [][]string{{"-scale", "-quick"}, {"-scale", "-scale-sizes", "500"}} {
		if err := run(context.Background(), append(args, "-out", t.TempDir()), &stdout, &stderr); err == nil {
			t.Errorf("bench %v = nil, want a usage error", args)
		}
	}
}

// TestRemoteSection runs the remote section at its smallest: every store
// replayed the same parts and verify found them whole, the copies moved
// every part and then nothing; -remote -quick is refused.
func TestRemoteSection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and versitygw; skipped with -short")
	}
	if _, err := pgtest.FindBin(); err != nil && os.Getenv(pgtest.RequireEnv) != "1" {
		t.Skipf("PostgreSQL: %v", err)
	}
	if _, err := versitygw.Binary(); err != nil && !versitygw.Required() {
		t.Skipf("versitygw: %v", err)
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-remote", "-runs", "1", "-steps", "12", "-rounds", "1", "-out", out, "-dir", t.TempDir()}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep remoteReport
	b, err := os.ReadFile(filepath.Join(out, "remote.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Median) != 3 {
		t.Fatalf("%d stores replayed, want 3", len(rep.Median))
	}
	for _, r := range rep.Median {
		if r.Parts == 0 || r.Parts != rep.Median[0].Parts || !r.VerifyOK || r.PerSecond <= 0 || r.P99 <= 0 {
			t.Errorf("%s: %d parts (want %d), verify %v, %.0f results/s, p99 %.2f ms", r.Store, r.Parts, rep.Median[0].Parts, r.VerifyOK, r.PerSecond, r.P99)
		}
	}
	if len(rep.Copies) != 2 {
		t.Fatalf("%d copies, want 2", len(rep.Copies))
	}
	for _, c := range rep.Copies {
		if c.Parts != int64(rep.Median[0].Parts) || c.AgainParts != 0 || c.Seconds <= 0 {
			t.Errorf("copy %s: %+v, want %d parts copied, then none", c.What, c, rep.Median[0].Parts)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "REMOTE.md"))
	if err != nil || !strings.Contains(string(md), "| cas-s3-postgres |") || !strings.Contains(string(md), "Load average") {
		t.Errorf("REMOTE.md lacks the table: %v\n%s", err, md)
	}
	if err := run(context.Background(), []string{"-remote", "-quick", "-out", t.TempDir()}, &stdout, &stderr); err == nil {
		t.Error("bench -remote -quick = nil, want a usage error")
	}
}
