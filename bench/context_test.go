package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContextBench runs -context on the real trace with a small window, so
// that every configuration has work, and checks the report: the JSON rows,
// what offloading saves, and every offloaded part read back.
func TestContextBench(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the real trace six times")
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := []string{"-context", "-json", "-trace", filepath.Join("traces", "mini-swe-agent-deepseek.jsonl.gz"), "-context-window", "8000", "-out", out, "-dir", t.TempDir()}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rows []struct {
		Configuration string `json:"configuration"`
		TokensSent    int64  `json:"tokens_sent"`
		MaxContext    int    `json:"max_context"`
		Offloaded     *int   `json:"offloaded"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rows); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6 configurations", len(rows))
	}
	nothing := rows[0]
	if nothing.Offloaded == nil || *nothing.Offloaded != 0 || nothing.TokensSent == 0 {
		t.Errorf("nothing offloaded: %+v", nothing)
	}
	for _, r := range rows[1:] {
		if r.Offloaded == nil || r.TokensSent >= nothing.TokensSent {
			t.Errorf("%s sends %d tokens, nothing offloaded %d: want fewer", r.Configuration, r.TokensSent, nothing.TokensSent)
		}
	}
	// The floor sends least: every result is a short pointer from the
	// call after it on, and every one of them is offloaded.
	for _, r := range rows[:5] {
		if floor := rows[5]; floor.TokensSent >= r.TokensSent || *floor.Offloaded <= *r.Offloaded {
			t.Errorf("the floor sends %d tokens and offloads %d, %s %d and %d", floor.TokensSent, *floor.Offloaded, r.Configuration, r.TokensSent, *r.Offloaded)
		}
	}
	// A trigger keeps the largest context near its window.
	if trig := rows[3]; trig.MaxContext >= nothing.MaxContext {
		t.Errorf("with the trigger the largest context is %d, without %d", trig.MaxContext, nothing.MaxContext)
	}
	var rep contextReport
	b, err := os.ReadFile(filepath.Join(out, "context.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, c := range rep.Configs {
		if c.Lost != 0 {
			t.Errorf("%s: %d offloaded parts did not read back", c.Name, c.Lost)
		}
		read += c.ReadBack
	}
	if read == 0 || rep.Configs[3].Compactions == 0 || len(rep.Targets) != 3 {
		t.Errorf("%d parts read back, %d compactions, %d targets", read, rep.Configs[3].Compactions, len(rep.Targets))
	}
	for _, w := range []string{"0", "4096,", "4k", "4096,-1"} {
		err := run(context.Background(), []string{"-context", "-context-window", w, "-dir", t.TempDir()}, &stdout, &stderr)
		if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "-context-window") {
			t.Errorf("-context-window %s: %v, want a usage error naming the flag", w, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "CONTEXT.md"))
	if !strings.Contains(string(md), "context.png") {
		t.Error("CONTEXT.md does not show the chart")
	}
	if fi, err := os.Stat(filepath.Join(out, "context.png")); err != nil || fi.Size() == 0 {
		t.Errorf("context.png: %v", err)
	}
}
