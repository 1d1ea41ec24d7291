package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/store"
)

// repeatReader yields n copies of a byte without holding them.
type repeatReader struct {
	b    byte
	left int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.left))
	for i := range p[:n] {
		p[i] = r.b
	}
	r.left -= int64(n)
	return n, nil
}

// putParts stores each reader as a part of run "big", step i, and returns
// the store's directory.
func putParts(t *testing.T, srcs ...io.Reader) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := store.Open(ctx, dir, store.WithCreate(), store.WithDurability(store.SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, r := range srcs {
		if _, err := s.Put(ctx, store.StreamPart{Key: hook.Key{Run: "big", Step: i, Tool: "t", CallID: "c", Part: -1}}, r); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// casctl returns the command running casctl, as the scripts do.
func casctl(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("casctl")
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command(bin, args...)
}

// countWriter counts bytes.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// TestGetLinesRSS runs get --limit 1 on a 50 MiB text of line breaks and on
// a 16 MiB single line, each in its own process: its peak resident set
// stays far below the blob's size.
func TestGetLinesRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("stores 66 MiB; skipped with -short")
	}
	dir := putParts(t, &repeatReader{'\n', 50 << 20}, &repeatReader{'a', 16 << 20})
	for _, tc := range []struct {
		key  string
		want int64
	}{
		{"big/0_t_c.txt", 3},          // "1\t\n"
		{"big/1_t_c.txt", 16<<20 + 3}, // the whole line, streamed
	} {
		cmd := casctl(t, "--store", dir, "get", tc.key, "--limit", "1")
		peak := t.TempDir() + "/peak"
		cmd.Env = append(os.Environ(), "CASCTL_TEST_PEAK_RSS="+peak)
		var out countWriter
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("get %s: %v: %s", tc.key, err, stderr.String())
		}
		b, _ := os.ReadFile(peak)
		rss, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil || rss <= 0 {
			t.Fatalf("no peak RSS from the child: %q", b)
		}
		t.Logf("get %s --limit 1: %d bytes out in %v, peak RSS %d KiB", tc.key, out.n, time.Since(start).Round(time.Millisecond), rss)
		if out.n != tc.want {
			t.Errorf("get %s --limit 1 wrote %d bytes, want %d", tc.key, out.n, tc.want)
		}
		if rss >= 64<<10 {
			t.Errorf("get %s: peak RSS %d KiB, want < 65536 KiB", tc.key, rss)
		}
	}
}

// TestGetGrepInterrupt: get --grep with a costly pattern over long lines
// stops at once on SIGINT, saying it was interrupted.
func TestGetGrepInterrupt(t *testing.T) {
	line := strings.Repeat("a", 256<<10) + "\n"
	dir := putParts(t, strings.NewReader(strings.Repeat(line, 200)))
	cmd := casctl(t, "--store", dir, "get", "big/0_t_c.txt", "--grep", "a{400}b")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Wait until it is matching: the blob is open and 100 ms of CPU time
	// used. CPU time alone is not enough: a child built with -race can
	// spend that long starting, before main has installed its handler.
	blobs, err := filepath.EvalSymlinks(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !opened(cmd.Process.Pid, blobs) || cpuTicks(cmd.Process.Pid) < 10 {
		if time.Now().After(deadline) {
			t.Fatal("get never started matching")
		}
		time.Sleep(5 * time.Millisecond)
	}
	sent := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Logf("get --grep stopped %v after SIGINT: %v: %s", time.Since(sent).Round(time.Millisecond), err, strings.TrimSpace(stderr.String()))
		if err == nil || !strings.Contains(stderr.String(), "interrupted") {
			t.Errorf("get --grep after SIGINT: %v, %q; want a failure saying it was interrupted", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("get --grep still running 20 s after SIGINT")
	}
}

// opened reports whether a process has a file under dir open.
func opened(pid int, dir string) bool {
	fds := "/proc/" + strconv.Itoa(pid) + "/fd"
	entries, err := os.ReadDir(fds)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// cpuTicks returns the user and system clock ticks a process has used.
func cpuTicks(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces: fields count from the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s
}

// TestVerifyWarnsRecentOrphans: blobs no row uses, fresh from the disk, get
// a warning from verify: rows may have been lost.
func TestVerifyWarnsRecentOrphans(t *testing.T) {
	dir := putParts(t, strings.NewReader("kept"))
	c, err := cas.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.PutBytes(context.Background(), []byte(strconv.Itoa(i)+" without a row"), ".txt"); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--store", dir, "verify"}, strings.NewReader(""), &stdout, &stderr)
	if code != exitOK || !strings.Contains(stderr.String(), "warning: 3 orphans are younger than gc's grace period") || !strings.Contains(stderr.String(), "index.db-wal") {
		t.Errorf("verify: exit %d, stdout %q, stderr %q; want ok with a warning about recent orphans", code, stdout.String(), stderr.String())
	}
}

// TestReadOnlyCommands runs every reading command (mcp serve too, which
// ends when its input does) on a store this process
// cannot write (a read-only bind mount as root, no write permission
// otherwise): each works; gc and prune fail saying they need write access.
func TestReadOnlyCommands(t *testing.T) {
	dir := putParts(t, strings.NewReader("first line\nsecond line\n"))
	view := dir
	if os.Geteuid() == 0 {
		view = t.TempDir()
		if out, err := exec.Command("mount", "--bind", dir, view).CombinedOutput(); err != nil {
			t.Skipf("root, and no bind mount here: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", "-l", view).Run() })
		if out, err := exec.Command("mount", "-o", "remount,bind,ro", view).CombinedOutput(); err != nil {
			t.Skipf("cannot remount read-only: %v: %s", err, out)
		}
	} else {
		for _, p := range []string{dir, dir + "/index.db"} {
			os.Chmod(p, 0o555)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755); os.Chmod(dir+"/index.db", 0o644) })
	}
	for _, args := range [][]string{
		{"ls"}, {"get", "big/0_t_c.txt"}, {"get", "big/0_t_c.txt", "--grep", "second"}, {"show", "big/0_t_c.txt"},
		{"stats"}, {"verify"}, {"mcp", "serve"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append([]string{"--store", view}, args...), strings.NewReader(""), &stdout, &stderr); code != exitOK {
			t.Errorf("%v on a read-only store: exit %d: %s", args, code, stderr.String())
		}
	}
	for _, args := range [][]string{{"gc"}, {"prune", "--run", "big"}} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"--store", view}, args...), strings.NewReader(""), &stdout, &stderr)
		if code != exitFailure || !strings.Contains(stderr.String(), "writes to the store") || !strings.Contains(stderr.String(), "work on a read-only store") {
			t.Errorf("%v on a read-only store: exit %d, %q; want a failure saying it needs write access", args, code, stderr.String())
		}
	}
}

// TestFullDiskPruneGC fills a small tmpfs to its last byte: casctl prune
// and gc still work (releasing the store's reserve, at its floor for this
// small index), free the space, and make the reserve again.
// It needs root to mount the tmpfs.
func TestFullDiskPruneGC(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	ctx := context.Background()
	dir := mnt + "/store"
	s, err := store.Open(ctx, dir, store.WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	junk := bytes.Repeat([]byte("junk "), 50_000)
	for i := 0; ; i++ {
		copy(junk, strconv.Itoa(i)+" ")
		if _, err := s.Put(ctx, store.StreamPart{Key: hook.Key{Run: "junk", Step: i, Tool: "t", CallID: "c", Part: -1}}, bytes.NewReader(junk)); err != nil {
			break
		}
	}
	s.Close()
	f, _ := os.Create(mnt + "/filler")
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	f.Close()
	for _, args := range [][]string{{"prune", "--run", "junk"}, {"gc", "--grace", "0s"}} {
		var stdout, stderr bytes.Buffer
		if code := run(ctx, append([]string{"--store", dir}, args...), strings.NewReader(""), &stdout, &stderr); code != exitOK {
			t.Fatalf("%v on a full disk: exit %d: %s", args, code, stderr.String())
		}
		t.Logf("%v on a full disk: %s", args, strings.TrimSpace(stdout.String()))
	}
	// The reserve gc released came back at its size for this small index.
	if fi, err := os.Stat(dir + "/" + store.ReserveFile); err != nil || fi.Size() != store.MinReserve {
		t.Errorf("the reserve after gc on a full disk: %v, %v; want %d bytes", fi, err, store.MinReserve)
	}
}

// TestGCLockTimeout: while another process holds the store's lock, casctl
// gc --lock-timeout gives up at its deadline, exit 1, naming that
// process's pid.
func TestGCLockTimeout(t *testing.T) {
	dir := putParts(t, strings.NewReader("x"))
	// This test's process holds gc.intent, as a running gc does; casctl
	// runs in a process of its own.
	l := flock.New(dir + "/" + store.IntentFile)
	if err := l.Lock(); err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	cmd := casctl(t, "--store", dir, "gc", "--lock-timeout", "300ms")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	want := "pid " + strconv.Itoa(os.Getpid())
	t.Logf("casctl gc: %s", strings.TrimSpace(stderr.String()))
	if cmd.ProcessState.ExitCode() != exitFailure || !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "gave up after") {
		t.Errorf("gc against a held lock: %v, %q; want exit 1 naming %s", err, stderr.String(), want)
	}
}
