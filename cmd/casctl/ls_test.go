package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/store"
)

// TestListJSONAsWhole: ls --json, which encodes each part as it comes,
// prints byte for byte what encoding the whole listing at once prints, for
// no part, one, and many, with and without a limit.
func TestListJSONAsWhole(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, t.TempDir(), store.WithCreate(), store.WithDurability(store.SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check := func(lo store.ListOptions) {
		t.Helper()
		ps, err := s.List(ctx, lo)
		if err != nil {
			t.Fatal(err)
		}
		whole := make([]partJSON, 0, len(ps))
		for _, p := range ps {
			whole = append(whole, partOf(ctx, s, p))
		}
		var want, got bytes.Buffer
		if err := writeJSON(&want, whole); err != nil {
			t.Fatal(err)
		}
		if err := listJSON(ctx, &got, s, lo); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("ls --json of %d parts (%+v):\n%s\nwant\n%s", len(ps), lo, got.String(), want.String())
		}
	}
	check(store.ListOptions{})
	for i := range 5 {
		part := -1
		if i%2 == 1 {
			part = i
		}
		text := fmt.Sprintf("<part> %d & \"more\"\n", i)
		if _, err := s.Put(ctx, store.StreamPart{Key: hook.Key{Run: "run-a", Step: i, Tool: "t", CallID: "c", Part: part}, Filename: "a<b>.txt"},
			strings.NewReader(text)); err != nil {
			t.Fatal(err)
		}
		check(store.ListOptions{})
	}
	check(store.ListOptions{Limit: 2})
	check(store.ListOptions{Limit: listBounded + 1})
	check(store.ListOptions{Run: "run-a", AllVersions: true})
}

// fillParts records n parts in the index of a new store, without their
// blobs (a listing reads the index alone), their keys some 600 bytes long
// as a tool's call ids may make them, and returns the store's directory.
func fillParts(t *testing.T, n int) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := store.Open(ctx, dir, store.WithCreate(), store.WithDurability(store.SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	ix, err := index.Open(ctx, filepath.Join(dir, store.IndexFile), index.WithDurability(cas.SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for i := 0; i < n; i += 5000 {
		ps := make([]index.NewPart, 0, 5000)
		for j := i; j < min(i+5000, n); j++ {
			call := fmt.Sprintf("call-%d-%s", j, strings.Repeat("x", 600))
			ps = append(ps, index.NewPart{
				Key: fmt.Sprintf("run-%d/%d_read_file_%s.txt", j%100, j, call), Run: fmt.Sprint("run-", j%100),
				Step: j, Tool: "read_file", CallID: call, Part: -1, Kind: catalog.KindText, MIME: "text/plain",
				Chars: 4096, Bytes: 4096, Blob: cas.Blob{Digest: cas.Sum(fmt.Append(nil, "content ", j%5000)), Ext: ".txt"},
			})
		}
		if _, err := ix.Record(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// lsParts is how many parts TestLsRSS lists.
const lsParts = 20_000

// TestLsRSS lists 20,000 parts with ls --json and as a table, each in a
// process of its own: its peak resident set stays within a bound that
// holding the listing whole (some 5 KiB a part) would pass several times.
func TestLsRSS(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no peak resident set size on windows")
	}
	if testing.Short() {
		t.Skip("records 20,000 parts; skipped with -short")
	}
	dir := fillParts(t, lsParts)
	for _, args := range [][]string{{"ls", "--json"}, {"ls"}, {"ls", "--versions", "--limit", "19000", "--json"}} {
		cmd := casctl(t, append([]string{"--store", dir}, args...)...)
		peak := filepath.Join(t.TempDir(), "peak")
		cmd.Env = append(os.Environ(), "CASCTL_TEST_PEAK_RSS="+peak)
		var out countWriter
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("casctl %v: %v: %s", args, err, stderr.String())
		}
		b, _ := os.ReadFile(peak)
		rss, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil || rss <= 0 {
			t.Fatalf("no peak RSS from the child: %q", b)
		}
		t.Logf("casctl %s: %d bytes out in %v, peak RSS %d KiB", strings.Join(args, " "), out.n, time.Since(start).Round(time.Millisecond), rss)
		if out.n < lsParts/2*600 {
			t.Errorf("casctl %v printed %d bytes: not the listing", args, out.n)
		}
		if rss >= 48<<10 {
			t.Errorf("casctl %v: peak RSS %d KiB, want < 49152 KiB", args, rss)
		}
	}
}
