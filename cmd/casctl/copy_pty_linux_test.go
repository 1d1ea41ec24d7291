package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/store"
)

// lockedBuffer is a buffer one goroutine writes while another reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCopyProgressPty: copy shows its progress on a terminal, and prints
// the same result as in a pipe.
func TestCopyProgressPty(t *testing.T) {
	var screen lockedBuffer
	_, tty := openPTYTo(t, &screen)
	dir := t.TempDir()
	ctx := context.Background()
	casctl := func(stderr io.Writer, args ...string) (int, string) {
		var out bytes.Buffer
		if stderr == nil {
			stderr = io.Discard
		}
		code := run(ctx, args, strings.NewReader(""), &out, stderr)
		return code, out.String()
	}
	// Enough parts that copying them, durably, outlasts the bar's first
	// 100 ms, which it keeps quiet so that a quick copy does not flicker.
	src := filepath.Join(dir, "src")
	s, err := store.Open(ctx, src, store.WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	const n = 600
	items := make([]hook.Item, n)
	for i := range items {
		items[i] = hook.Item{Key: hook.Key{Run: "r", Step: i, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"},
			Part: hook.Text(strings.Repeat(fmt.Sprint("line ", i, "\n"), 100))}
	}
	if _, err := s.Write(ctx, items); err != nil {
		t.Fatal(err)
	}
	s.Close()
	code, out := casctl(tty, "copy", "--from", src, "--to", filepath.Join(dir, "dst"), "--init")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("copied %d parts", n)) {
		t.Fatalf("copy on a terminal: exit %d, %q", code, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(screen.String(), "copy: copy parts") {
		if time.Now().After(deadline) {
			t.Fatalf("no progress on the terminal: %q", screen.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var pipe bytes.Buffer
	if code, _ := casctl(&pipe, "copy", "--from", src, "--to", filepath.Join(dir, "dst2"), "--init"); code != 0 || pipe.Len() > 0 {
		t.Errorf("copy in a pipe: exit %d, stderr %q", code, pipe.String())
	}
}
