package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestScaleOpsLeaveTheReport runs the scale section for one step without
// -out: it prints the step as JSON and writes no report where the
// committed one lives.
func TestScaleOpsLeaveTheReport(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a store of 10,000 parts; skipped with -short")
	}
	t.Chdir(t.TempDir())
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-scale", "-scale-sizes", "10000", "-scale-ops", "stats", "-dir", t.TempDir()}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if _, err := os.Stat(filepath.Join("bench", "results")); !os.IsNotExist(err) {
		t.Errorf("bench/results after -scale-ops without -out: %v, want none", err)
	}
	var rep scaleReport
	out := stderr.Bytes()
	if i := bytes.LastIndex(out, []byte("\n{")); i >= 0 {
		out = out[i+1:]
	}
	if err := json.Unmarshal(out, &rep); err != nil || len(rep.Sizes) != 1 || len(rep.Sizes[0].Ops) != 1 || rep.Sizes[0].Ops[0].Op != "stats" {
		t.Errorf("printed %+v (%v), want the stats step of one size\n%s", rep, err, stderr.String())
	}
}
