package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/index"
)

// createCosts times new files in both directories, which keep them, and
// fails on a directory it cannot write in.
func TestCreateCosts(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	ta, tb, err := createCosts(2, 5, 4<<10, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if ta <= 0 || tb <= 0 {
		t.Errorf("createCosts = %v, %v; want two positive times", ta, tb)
	}
	for _, dir := range []string{a, b} {
		if ents, err := os.ReadDir(dir); err != nil || len(ents) != 10 {
			t.Errorf("%s holds %d entries, %v; want the 10 files made", dir, len(ents), err)
		}
	}
	if _, _, err := createCosts(1, 3, 10, a, filepath.Join(b, "missing")); err == nil {
		t.Error("createCosts into a missing directory succeeded")
	}
}

// indexFloor runs the directory step once for every turn of both measures,
// each with a step number of its own, records every part it timed beside
// a step (a last batch short of floorBatch too), and says both measures.
func TestIndexFloor(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const rounds, n = 2, 30 // 60 floor turns a measure: not a multiple of floorBatch
	steps := map[int]bool{}
	text, err := indexFloor(ctx, dir, rounds, n, func(i int) error {
		if steps[i] {
			t.Errorf("step %d taken twice", i)
		}
		steps[i] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2*2*rounds*n {
		t.Errorf("%d directory steps, want %d", len(steps), 2*2*rounds*n)
	}
	for _, want := range []string{"each part in a transaction of its own, ", fmt.Sprintf("; %d parts to a transaction, ", floorBatch)} {
		if !strings.Contains(text, want) {
			t.Errorf("indexFloor said %q, want it to hold %q", text, want)
		}
	}
	x, err := index.Open(ctx, filepath.Join(dir, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	st, err := x.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.Parts != 2*rounds*n {
		t.Errorf("the index holds %d parts, want %d", st.Parts, 2*rounds*n)
	}

	// A failing step fails the floor.
	boom := errors.New("boom")
	if _, err := indexFloor(ctx, t.TempDir(), 1, 3, func(int) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("indexFloor with a failing step = %v, want %v", err, boom)
	}
}

// The verify table gives each op's time and CPU time and the budget
// BLAKE3's time leaves, and says which ops did not run.
func TestVerifyMarkdown(t *testing.T) {
	rep := scaleReport{Sizes: []scaleSize{
		{Parts: 100000, Ops: []scaleOp{
			{Op: "verify", Millis: 1390, CPUMillis: 2410},
			{Op: "index-check", Millis: 470.4, CPUMillis: 477.9},
			{Op: "blake3", Millis: 544, CPUMillis: 567.7},
		}},
	}}
	got := verifyMarkdown(rep)
	want := "| 100000 | 1.39 s, CPU 2.41 s | 470.4 ms, CPU 477.9 ms | not run | 544.0 ms, CPU 567.7 ms | 680.0 ms |\n"
	if !strings.HasSuffix(got, want) {
		t.Errorf("verifyMarkdown ends\n%q\nwant\n%q", got[strings.LastIndex(got[:len(got)-1], "\n")+1:], want)
	}
}

// warmDirs makes its files in every directory, and fails on a directory
// it cannot write in.
func TestWarmDirs(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := warmDirs(4, 100, a, b); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{a, b} {
		if ents, _ := os.ReadDir(dir); len(ents) != 4 {
			t.Errorf("%s holds %d files, want 4", dir, len(ents))
		}
	}
	if err := warmDirs(3, 10, a, filepath.Join(b, "missing")); err == nil {
		t.Error("warmDirs into a missing directory succeeded")
	}
}

// visibilityLag writes through one store and finds each write through
// another on the same directory, one that may write and one opened
// read-only, and says how long that took.
func TestVisibilityLag(t *testing.T) {
	text, err := visibilityLag(context.Background(), t.TempDir(), 8)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text, "another store saw each write ") || !strings.Contains(text, "; one opened read-only saw each write ") ||
		!strings.HasSuffix(text, "(8 writes each)") {
		t.Errorf("visibilityLag says %q", text)
	}
}
