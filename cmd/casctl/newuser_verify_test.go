package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/store"
)

// TestVerifySharedBlobLines corrupts a blob 48 keys share: verify's report
// for people names one key and counts the rest, with the command that
// lists them, in lines of at most 200 characters; --json lists every key.
func TestVerifySharedBlobLines(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := store.Open(ctx, dir, store.WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	items := make([]hook.Item, 48)
	for i := range items {
		items[i] = hook.Item{Key: hook.Key{Run: "shared-by-many-keys-of-a-long-run-name", Step: i, Tool: "a_tool_with_a_long_name", CallID: "call-with-a-long-id", Part: -1, Ext: ".txt"},
			Part: hook.Text("the same output, 48 times\n")}
	}
	st, err := s.Write(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := st[0].Path
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, []byte("the same output, 48 timez\n"), 0o444); err != nil {
		t.Fatal(err)
	}

	code, out, _ := casctlRun("--store", dir, "verify")
	if code != exitFailure {
		t.Fatalf("verify of a corrupt store: exit %d, want 1:\n%s", code, out)
	}
	var showCmd string
	for _, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > 200 {
			t.Errorf("verify: a line of %d characters: %q", n, line)
		}
		if _, cmd, ok := strings.Cut(line, " … and 47 more keys: "); ok {
			showCmd = cmd
		}
		if strings.Count(line, "shared-by-many-keys") > 1 {
			t.Errorf("verify: a line with more than one key: %q", line)
		}
	}
	if showCmd == "" {
		t.Fatalf("verify does not count the other 47 keys:\n%s", out)
	}
	// The command it gives lists them all.
	args := strings.Fields(showCmd)
	if args[0] != "casctl" {
		t.Fatalf("verify suggests %q", showCmd)
	}
	code, shown, errs := casctlRun(append(args[1:], "--json")...)
	if code != 0 || strings.Count(shown, "shared-by-many-keys") < 48 {
		t.Errorf("%s --json: exit %d, %s, %d keys:\n%s", showCmd, code, errs, strings.Count(shown, "shared-by-many-keys"), shown)
	}
	code, js, _ := casctlRun("--store", dir, "verify", "--json")
	if code != exitFailure || strings.Count(js, "shared-by-many-keys") != 48 {
		t.Errorf("verify --json: exit %d, %d keys, want all 48", code, strings.Count(js, "shared-by-many-keys"))
	}
	code, verbose, _ := casctlRun("--store", dir, "verify", "--verbose")
	if code != exitFailure || strings.Count(verbose, "\tkey shared-by-many-keys") != 48 {
		t.Errorf("verify --verbose: exit %d, %d key lines, want 48:\n%s", code, strings.Count(verbose, "\tkey "), verbose)
	}
}
