package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// interrupt sends SIGINT to a started casctl and returns its exit code
// and stderr, failing if it has not stopped 10 s later.
func interrupt(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer) (int, string) {
	t.Helper()
	sent := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%v still running 10 s after SIGINT", cmd.Args[1:])
	}
	t.Logf("%v stopped %v after SIGINT: exit %d: %s", cmd.Args[1:], time.Since(sent).Round(time.Millisecond),
		cmd.ProcessState.ExitCode(), strings.TrimSpace(stderr.String()))
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// TestInterruptGetSlowPipe: a plain get of a 50 MiB part into a pipe read
// slowly stops at Ctrl-C, exit 130, saying it was interrupted.
func TestInterruptGetSlowPipe(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send on Windows")
	}
	dir := putParts(t, &repeatReader{'x', 50 << 20})
	cmd := casctl(t, "--store", dir, "get", "big/0_t_c.txt")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The first bytes have come: get is writing, and reads no faster
	// than this test.
	if _, err := io.ReadFull(out, make([]byte, 4096)); err != nil {
		t.Fatalf("get wrote nothing: %v: %s", err, stderr.String())
	}
	go func() {
		for {
			time.Sleep(5 * time.Millisecond)
			if _, err := out.Read(make([]byte, 4096)); err != nil {
				return
			}
		}
	}()
	code, msg := interrupt(t, cmd, &stderr)
	if code != exitInterrupted || msg != "casctl: get: interrupted\n" {
		t.Errorf("get into a slow pipe, then SIGINT: exit %d, %q; want 130, %q", code, msg, "casctl: get: interrupted\n")
	}
}

// TestInterruptGrepSlowPipe: grep of a 54 MiB part whose every line
// matches, into a pipe read slowly, stops at Ctrl-C, exit 130.
func TestInterruptGrepSlowPipe(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send on Windows")
	}
	dir := putParts(t, strings.NewReader(strings.Repeat("match me\n", 6<<20)))
	cmd := casctl(t, "--store", dir, "grep", "--no-index", "match")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if _, err := io.ReadFull(out, make([]byte, 4096)); err != nil {
		t.Fatalf("grep wrote nothing: %v: %s", err, stderr.String())
	}
	go func() {
		for {
			time.Sleep(5 * time.Millisecond)
			if _, err := out.Read(make([]byte, 4096)); err != nil {
				return
			}
		}
	}()
	code, msg := interrupt(t, cmd, &stderr)
	if code != exitInterrupted || !strings.HasPrefix(msg, "casctl: grep: interrupted after ") {
		t.Errorf("grep into a slow pipe, then SIGINT: exit %d, %q; want 130, interrupted", code, msg)
	}
}

// TestInterruptPutSlowStdin: put of a stdin whose producer has sent 19 MiB
// and goes on stalling stops at Ctrl-C, exit 130, with nothing stored: no
// key, no blob, no temp file.
func TestInterruptPutSlowStdin(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send on Windows")
	}
	dir := putParts(t, strings.NewReader("kept"))
	cmd := casctl(t, "--store", dir, "put", "--tool", "slow", "--run", "r")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Written means read, but for what the pipe holds: put is streaming
	// the content into the store.
	if _, err := io.Copy(in, &repeatReader{'y', 19 << 20}); err != nil {
		t.Fatalf("put stopped reading: %v: %s", err, stderr.String())
	}
	code, msg := interrupt(t, cmd, &stderr)
	if want := "casctl: put: interrupted; nothing stored\n"; code != exitInterrupted || msg != want {
		t.Errorf("put of a slow stdin, then SIGINT: exit %d, %q; want 130, %q", code, msg, want)
	}
	var stdout, errb bytes.Buffer
	if code := run(context.Background(), []string{"--store", dir, "verify", "--json"}, strings.NewReader(""), &stdout, &errb); code != exitOK {
		t.Fatalf("verify after an interrupted put: exit %d: %s", code, errb.String())
	}
	var v verifyJSON
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if v.Checked != 1 || len(v.Orphans) != 0 || len(v.Temp) != 0 {
		t.Errorf("after an interrupted put: %d blobs, orphans %v, temp files %v; want the 1 blob there was, nothing else",
			v.Checked, v.Orphans, v.Temp)
	}
	var left []string
	filepath.WalkDir(filepath.Join(dir, "blobs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".txt") {
			left = append(left, path)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("an interrupted put left %v", left)
	}
	stdout.Reset()
	run(context.Background(), []string{"--store", dir, "ls", "--run", "r"}, strings.NewReader(""), &stdout, &errb)
	if strings.Contains(stdout.String(), "slow") {
		t.Errorf("an interrupted put stored a key:\n%s", stdout.String())
	}
}

// TestInterruptEveryCommand runs every command with its context cancelled,
// as Ctrl-C leaves it: each stops, exit 130, saying it was interrupted.
func TestInterruptEveryCommand(t *testing.T) {
	dir := putParts(t, strings.NewReader("first line\nsecond line\n"))
	other := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{
		{"init"},
		{"put", "--tool", "t", "-"},
		{"get", "big/0_t_c.txt"},
		{"get", "big/0_t_c.txt", "--grep", "line"},
		{"get", "big/0_t_c.txt", "--output", filepath.Join(other, "out.txt")},
		{"show", "big/0_t_c.txt"},
		{"ls"},
		{"grep", "line"},
		{"stats"},
		{"gc"},
		{"gc", "--dry-run"},
		{"pack", "--older-than", "0s"},
		{"prune", "--run", "big"},
		{"verify"},
		{"repair"},
		{"vacuum"},
		{"copy", "--from", dir, "--to", filepath.Join(other, "copy"), "--init"},
		{"demo", "--runs", "1", "--steps", "2"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"--store", dir}, args...), strings.NewReader("content\n"), &stdout, &stderr)
		want := "casctl: " + args[0] + ": interrupted"
		if code != exitInterrupted || !strings.HasPrefix(stderr.String(), want) {
			t.Errorf("%v, interrupted: exit %d, %q; want 130, %q", args, code, stderr.String(), want)
		}
	}
	if _, err := os.Stat(filepath.Join(other, "out.txt")); err == nil {
		t.Error("an interrupted get --output wrote its file")
	}
}
