package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/store"
)

// casctl copy run again onto a destination that lost a blob, and holds
// another damaged, copies both again from the source and says so; the
// destination then verifies clean.
func TestCopyRepairsDestination(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	casctl := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, args, strings.NewReader(""), &out, &errOut)
		if code != 0 {
			t.Logf("casctl %s: %s", strings.Join(args, " "), errOut.String())
		}
		return code, out.String()
	}
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	s, err := store.Open(ctx, src, store.WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	var items []hook.Item
	for i := range 3 {
		items = append(items, hook.Item{Key: hook.Key{Run: "r", Step: i, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"},
			Part: hook.Text(fmt.Sprint("result number ", i))})
	}
	st, err := s.Write(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if code, out := casctl("copy", "--from", src, "--to", dst, "--init"); code != 0 {
		t.Fatalf("copy: exit %d, %q", code, out)
	}
	rel := func(p string) string { return strings.TrimPrefix(p, src) }
	if err := os.Remove(dst + rel(st[0].Path)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst+rel(st[1].Path), []byte("result NUMBER 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _ := casctl("--store", dst, "verify"); code == 0 {
		t.Fatal("verify of the damaged destination passed")
	}
	code, out := casctl("copy", "--from", src, "--to", dst, "--json")
	if code != 0 {
		t.Fatalf("copy onto the damaged destination: exit %d, %q", code, out)
	}
	var res struct {
		Repaired int64 `json:"blobs_repaired"`
		Copied   int64 `json:"parts_copied"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Repaired != 2 || res.Copied != 0 {
		t.Errorf("copy --json = %s (%v), want 2 blobs repaired, no part copied", out, err)
	}
	if code, out := casctl("--store", dst, "verify"); code != 0 {
		t.Errorf("verify of the repaired destination: exit %d, %q", code, out)
	}
	// Told in words too, when there is something to tell.
	os.Remove(dst + rel(st[2].Path))
	if code, out := casctl("copy", "--from", src, "--to", dst); code != 0 || !strings.Contains(out, "repaired: 1 blob that ") {
		t.Errorf("copy: exit %d, %q; want the repair told", code, out)
	}
}
