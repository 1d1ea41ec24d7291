package main

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// readmeTestLog is the test.log the README's put example stores: it holds
// what the get and grep examples look for.
const readmeTestLog = "collected 12 items\n" +
	"tests/test_client.py::test_connect FAIL\n" +
	"E   ConnectionError: Connection refused by 127.0.0.1:5432\n" +
	"tests/test_client.py::test_read FAIL\n" +
	"E   Error: read timeout after 30s\n" +
	"a needle in the haystack\n" +
	"10 passed, 2 failed\n"

// readmeCommands returns the commands of the README's command table, in
// its order: every code span of its example column that runs casctl.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n| command | example |\n| --- | --- |\n")
	if !ok {
		t.Fatal("README.md has no command table (| command | example |)")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	span := regexp.MustCompile("`([^`]+)`")
	var cmds []string
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(row, " | ")
		for _, m := range span.FindAllStringSubmatch(cells[len(cells)-1], -1) {
			if strings.Contains(m[1], "casctl ") {
				cmds = append(cmds, m[1])
			}
		}
	}
	return cmds
}

// TestReadmeExamples runs every command of the README's command table, in
// its order, as a shell runs it, in a directory where casctl demo made its
// store and with the files the examples name (test.log, shot.png): each
// must exit 0. The few paths outside the test's directory, and the digest
// prefix of test.log's blob, are replaced by their counterparts here.
func TestReadmeExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs casctl demo and every example")
	}
	bash, err := exec.LookPath("bash")
	if err != nil || runtime.GOOS == "windows" {
		t.Skip("no bash to run the examples")
	}
	cmds := readmeCommands(t)
	if len(cmds) < 25 {
		t.Fatalf("the README's command table has %d casctl commands: %q", len(cmds), cmds)
	}
	dir := t.TempDir()
	run := func(line string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, bash, "-c", line)
		c.Dir = dir
		c.Env = append(os.Environ(), "CASCTL_STORE=", "HOME="+filepath.Join(dir, "home"))
		return c.CombinedOutput()
	}
	if out, err := run("casctl demo"); err != nil {
		t.Fatalf("casctl demo: %v\n%s", err, out)
	}
	var shot bytes.Buffer
	if err := png.Encode(&shot, image.NewGray(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"test.log": []byte(readmeTestLog), "shot.png": shot.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"home", "shared", "completions"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	replace := map[string]string{
		"3fa9c1d2":                      cas.Sum([]byte(readmeTestLog)).String()[len("blake3:"):][:8],
		"/mnt/shared/tool_results":      filepath.Join(dir, "shared", "tool_results"),
		"/etc/bash_completion.d/casctl": filepath.Join(dir, "completions", "casctl"),
	}
	used := map[string]bool{}
	for _, cmd := range cmds {
		line := cmd
		for from, to := range replace {
			if strings.Contains(line, from) {
				line = strings.ReplaceAll(line, from, to)
				used[from] = true
			}
		}
		out, err := run(line)
		if err != nil {
			t.Errorf("README example %q: %v\n%s", cmd, err, out)
		}
	}
	for from := range replace {
		if !used[from] {
			t.Errorf("no README example names %q any more", from)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "completions", "casctl")); err != nil || fi.Size() == 0 {
		t.Errorf("the completion example wrote no script: %v", err)
	}
}
