package main

import (
	"bytes"
	"context"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// casctlRun runs casctl in this process and returns its exit code, stdout
// and stderr.
func casctlRun(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestRootHelpIntro: casctl --help gets to its commands after a short
// intro, which points at casctl help stores for S3 and PostgreSQL; that
// topic holds the details.
func TestRootHelpIntro(t *testing.T) {
	code, out, _ := casctlRun("--help")
	if code != 0 {
		t.Fatalf("casctl --help: exit %d", code)
	}
	intro, _, ok := strings.Cut(out, "Available Commands:")
	if !ok {
		t.Fatalf("casctl --help lists no commands:\n%s", out)
	}
	if n := strings.Count(intro, "\n"); n > 14 {
		t.Errorf("casctl --help: %d lines before the commands, want at most 14:\n%s", n, intro)
	}
	if !strings.Contains(intro, "casctl help stores") {
		t.Errorf("casctl --help does not point at casctl help stores:\n%s", intro)
	}
	code, out, _ = casctlRun("help", "stores")
	for _, want := range []string{"s3://BUCKET/PREFIX", "--cache DIR", "AWS_ACCESS_KEY_ID", "--index postgres://", "$CASCTL_INDEX", "PGPASSWORD", "casctl init --index URL"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("casctl help stores: exit %d, no %q:\n%s", code, want, out)
		}
	}
}

// TestStoreAccessComplete: every command that opens a store says, in
// storeAccess, whether it writes to it; --help's lists name them all, pack
// too.
func TestStoreAccessComplete(t *testing.T) {
	root := newRootCommand(&globals{})
	declared := map[string]bool{}
	for _, a := range storeAccess {
		declared[a.command] = true
	}
	noStore := map[string]bool{"completion": true, "help": true, "mcp": true, "stores": true}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			name := commandName(sub)
			if !noStore[name] && !strings.HasPrefix(name, "completion ") {
				if !declared[name] {
					t.Errorf("storeAccess does not say whether casctl %s writes to the store", name)
				}
				delete(declared, name)
			}
			walk(sub)
		}
	}
	walk(root)
	for name := range declared {
		t.Errorf("storeAccess names %q, which is no command", name)
	}
	_, out, _ := casctlRun("--help")
	out = strings.Join(strings.Fields(out), " ")
	for _, a := range storeAccess {
		if !strings.Contains(out, a.command) {
			t.Errorf("casctl --help does not say what %s does to the store", a.command)
		}
	}
	if want := "init, put, gc, pack, prune, retention set, retention clear, repair, vacuum, copy, demo and mcp proxy write to it"; !strings.Contains(out, want) {
		t.Errorf("casctl --help: no %q in\n%s", want, out)
	}
	if want := "get, show, ls, grep, stats, retention show, verify and mcp serve only read the store"; !strings.Contains(out, want) {
		t.Errorf("casctl --help: no %q in\n%s", want, out)
	}
}

// TestHelpUnknownTopic: help for a command casctl does not have is a
// usage error, with the command meant.
func TestHelpUnknownTopic(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "lss"}, `casctl: help: no command or topic "lss"; did you mean ls?`},
		{[]string{"help", "mcp", "serv"}, `casctl: help: no command or topic "mcp serv"; did you mean mcp serve?`},
		{[]string{"help", "zzzzzz"}, `casctl: help: no command or topic "zzzzzz"; casctl --help lists them`},
	} {
		code, out, errs := casctlRun(tc.args...)
		if code != exitUsage || !strings.HasPrefix(errs, tc.want+"\n") || out != "" {
			t.Errorf("casctl %v: exit %d, stdout %q, stderr %q; want exit 2, %q", tc.args, code, out, errs, tc.want)
		}
	}
	for _, args := range [][]string{{"help"}, {"help", "get"}, {"help", "mcp", "serve"}, {"help", "stores"}} {
		if code, out, errs := casctlRun(args...); code != 0 || !strings.Contains(out, "casctl") {
			t.Errorf("casctl %v: exit %d, %q, %q", args, code, out, errs)
		}
	}
}

// TestRevisionNote: a build that names no revision (go run, a build with
// -buildvcs=false) says why; one that does says nothing more.
func TestRevisionNote(t *testing.T) {
	goRun := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}
	got := versionOf(goRun) + revisionNote(goRun)
	if want := "(devel), go1.26.0 (no revision recorded: go run and -buildvcs=false record none; go build does)"; got != want {
		t.Errorf("version of go run = %q, want %q", got, want)
	}
	built := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0239f3c486c2d155"}, {Key: "vcs.modified", Value: "true"}}}
	if got := versionOf(built) + revisionNote(built); got != "(devel), revision 0239f3c486c2 with local changes, go1.26.0" {
		t.Errorf("version of a stamped build = %q", got)
	}
	release := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}}
	if note := revisionNote(release); note != "" {
		t.Errorf("revisionNote of a release = %q, want none", note)
	}
}

// TestCount: one helper says every count, singular for one.
func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 other parts"}, {1, "1 other part"}, {2, "2 other parts"}} {
		if got := count(tc.n, "other part"); got != tc.want {
			t.Errorf("count(%d, other part) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
