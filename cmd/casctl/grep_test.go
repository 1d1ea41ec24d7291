package main

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// grep collects garbage less often while it runs (see grepGCPercent), and
// leaves the collector as it found it: a program that runs casctl's
// commands in-process keeps its own setting.
func TestGrepLeavesTheCollectorAsItWas(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"--store", dir, "init"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("init: exit %d: %s", code, errb.String())
	}
	if code := run(ctx, []string{"--store", dir, "put", "--tool", "bash", "--run", "r", "-"}, strings.NewReader("a needle here\n"), &out, &errb); code != 0 {
		t.Fatalf("put: exit %d: %s", code, errb.String())
	}
	defer debug.SetGCPercent(debug.SetGCPercent(77))
	out.Reset()
	if code := run(ctx, []string{"--store", dir, "grep", "needle"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("grep: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), ":1:a needle here") {
		t.Errorf("grep printed %q, want the line", out.String())
	}
	if got := debug.SetGCPercent(77); got != 77 {
		t.Errorf("after grep the collector's target is %d %%, want the 77 %% it had", got)
	}
}
