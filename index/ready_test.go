package index

import (
	"context"
	"errors"
	"testing"
)

// RecordWhenReady runs the statements, then ready, then commits: while
// ready runs, another connection sees none of the rows; an error from ready
// rolls everything back and is returned, and the key is then still free.
func TestRecordWhenReady(t *testing.T) { forEachBackend(t, testRecordWhenReady) }

func testRecordWhenReady(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	other, err := Open(ctx, x.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	visible := func() int {
		t.Helper()
		ps, err := other.List(ctx, ListOptions{AllVersions: true})
		if err != nil {
			t.Fatal(err)
		}
		return len(ps)
	}

	p := newPart("run", 1, "search", "c1", "alpha")
	failed := errors.New("the blob could not be written")
	calls := 0
	_, err = x.RecordWhenReady(ctx, []NewPart{p}, func() error {
		calls++
		if n := visible(); n != 0 {
			t.Errorf("before ready's answer, another connection sees %d parts", n)
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("RecordWhenReady with a failing ready = %v, want %v", err, failed)
	}
	if calls != 1 {
		t.Errorf("ready called %d times, want 1", calls)
	}
	if n := visible(); n != 0 {
		t.Fatalf("after a failed ready, %d parts recorded, want none", n)
	}
	if _, err := x.Resolve(ctx, mustParse(t, p.Key), ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("Resolve(%s) after a failed ready = %v, want ErrNotFound", p.Key, err)
	}

	calls = 0
	rec, err := x.RecordWhenReady(ctx, []NewPart{p, newPart("run", 2, "search", "c2", "beta")}, func() error {
		calls++
		if n := visible(); n != 0 {
			t.Errorf("while ready runs, another connection sees %d parts", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || visible() != 2 {
		t.Errorf("ready called %d times, %d parts visible after; want 1 and 2", calls, visible())
	}
	if rec[0].Key != p.Key || rec[0].Version != 1 {
		t.Errorf("recorded %+v, want %s version 1 (the failed try left no version)", rec[0], p.Key)
	}

	// No ready: Record.
	if _, err := x.RecordWhenReady(ctx, []NewPart{newPart("run", 3, "search", "c3", "gamma")}, nil); err != nil {
		t.Fatal(err)
	}
	if n := visible(); n != 3 {
		t.Errorf("%d parts, want 3", n)
	}
}
