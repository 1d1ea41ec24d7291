package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
)

// Without syncs, a write returns once its rows are queued, not committed
// (see writeDeferred): this process reads them at once, through every
// read (Read, Resolve, Stats, List). Another process that may write sees
// each once it is staged, within index.DeferredCommitAfter of its write,
// give or take the machine's load; a process that opened the store
// read-only sees each once the writer folds it, within
// index.StagedFoldAfter of its last write, or index.StagedFoldAge while it
// writes on. Flush commits what waits, and Close folds it.
func TestDeferredRowsVisible(t *testing.T) {
	for _, mode := range []string{"rw", "ro"} {
		t.Run(mode, func(t *testing.T) { testDeferredRowsVisible(t, mode) })
	}
}

func testDeferredRowsVisible(t *testing.T, mode string) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, WithCreate(), WithDurability(cas.SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The first steps are read back at once, which commits them; the
	// rest are not read here, and wait for the commit due after them.
	const steps, readBack = 50, 10
	watcher := childCmd("watcher", dir, strconv.Itoa(steps), mode)
	out, err := watcher.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	watcher.Stderr = os.Stderr
	if err := watcher.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watcher.Process.Kill(); watcher.Wait() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "watching" {
		t.Fatalf("watcher did not start: %q %v", lines.Text(), lines.Err())
	}

	returned := map[string]time.Time{}
	for i := range steps {
		it := item("r", i, fmt.Sprintf("step %d %s", i, strings.Repeat("x", 3000)))
		st, err := s.Write(ctx, []hook.Item{it})
		if err != nil {
			t.Fatal(err)
		}
		returned[st[0].Key] = time.Now()
		if i >= readBack {
			time.Sleep(time.Duration(i%7) * time.Millisecond)
			continue
		}
		// This process: at once, by every way of reading.
		if c, err := s.Read(ctx, "", st[0].Key); err != nil || string(c.Data) != it.Part.Text {
			t.Fatalf("Read(%s) right after its write: %v", st[0].Key, err)
		}
		if _, err := s.Resolve(ctx, "r", st[0].Key); err != nil {
			t.Fatalf("Resolve(%s) right after its write: %v", st[0].Key, err)
		}
		if stats, err := s.Stats(ctx, ""); err != nil || stats.Parts != int64(i+1) {
			t.Fatalf("Stats right after write %d: %d parts, %v", i+1, stats.Parts, err)
		}
	}
	// Another process: each within the bound, which only a loaded machine
	// stretches; the deadline is the watcher's, 30 s.
	var lags []time.Duration
	seen := 0
	for lines.Scan() {
		key, ns, ok := strings.Cut(lines.Text(), " ")
		n, err := strconv.ParseInt(ns, 10, 64)
		if !ok || err != nil {
			t.Fatalf("watcher said %q", lines.Text())
		}
		at, ok := returned[key]
		if !ok {
			t.Fatalf("watcher saw %s, which no write returned", key)
		}
		if step, _ := strconv.Atoi(strings.TrimPrefix(strings.Split(key, "_")[0], "r/")); step >= readBack {
			lags = append(lags, time.Unix(0, n).Sub(at))
		}
		seen++
	}
	if err := watcher.Wait(); err != nil {
		t.Fatalf("watcher: %v", err)
	}
	if seen != steps || len(lags) != steps-readBack {
		t.Fatalf("watcher saw %d keys (%d unread here), want %d (%d)", seen, len(lags), steps, steps-readBack)
	}
	slices.Sort(lags)
	t.Logf("another process (%s) saw each write after: median %v, max %v (commits due every %v, folds %v after the last write or every %v)",
		mode, lags[len(lags)/2], lags[len(lags)-1], index.DeferredCommitAfter, index.StagedFoldAfter, index.StagedFoldAge)

	// Flush commits at once: a store that may write reads it at once.
	st, err := s.Write(ctx, []hook.Item{item("r", steps, "flushed")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if mode == "rw" {
		other, err := Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, err := other.Read(ctx, "", st[0].Key); err != nil {
			t.Fatalf("another store reads %s after Flush: %v", st[0].Key, err)
		}
		return
	}
	// Close folds: a store opened read-only reads it then.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, dir, ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Read(ctx, "", st[0].Key); err != nil {
		t.Fatalf("a read-only store reads %s after the writer closed: %v", st[0].Key, err)
	}
}

// watchKeys is a child that prints "watching", then, as each part of the
// store at dir first shows up, its key and when it saw it (unix nanos),
// until it has seen want of them or 30 s have passed; with readOnly, on a
// store opened read-only.
func watchKeys(dir, wantArg string, readOnly bool) error {
	ctx := context.Background()
	want, err := strconv.Atoi(wantArg)
	if err != nil {
		return err
	}
	var opts []Option
	if readOnly {
		opts = append(opts, ReadOnly())
	}
	s, err := Open(ctx, dir, opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, "watching")
	w.Flush()
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("saw %d of %d keys in 30 s", len(seen), want)
		}
		ps, err := s.List(ctx, ListOptions{})
		if err != nil {
			return err
		}
		now := time.Now().UnixNano()
		for _, p := range ps {
			if !seen[p.Key] {
				seen[p.Key] = true
				fmt.Fprintf(w, "%s %d\n", p.Key, now)
			}
		}
		w.Flush()
		time.Sleep(500 * time.Microsecond)
	}
	return w.Flush()
}
