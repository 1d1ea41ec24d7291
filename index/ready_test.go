package index

import (
	"context"
	"errors"
	"testing"
)

// recordWhenReady runs the statements, then ready, then commits: while
// ready runs, another connection sees none of the rows; an error from ready
// rolls everything back and is returned, and the key is then still free.
func TestRecordWhenReady(t *testing.T) { forEachBackend(t, testRecordWhenReady) }

func testRecordWhenReady(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	visible := visibleElsewhere(t, x)

	p := newPart("run", 1, "search", "c1", "alpha")
	failed := errors.New("the blob could not be written")
	calls := 0
	_, err := x.recordWhenReady(ctx, []NewPart{p}, func() error {
		calls++
		if n := visible(); n != 0 {
			t.Errorf("before ready's answer, another connection sees %d parts", n)
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("recordWhenReady with a failing ready = %v, want %v", err, failed)
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
	rec, err := x.recordWhenReady(ctx, []NewPart{p, newPart("run", 2, "search", "c2", "beta")}, func() error {
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
	if _, err := x.recordWhenReady(ctx, []NewPart{newPart("run", 3, "search", "c3", "gamma")}, nil); err != nil {
		t.Fatal(err)
	}
	if n := visible(); n != 3 {
		t.Errorf("%d parts, want 3", n)
	}
}

// recordGathering records what gather returns in the same transaction, in
// order, until it returns none; a gathered part that cannot be recorded,
// or gather's error, rolls back every part, those before it too.
func TestRecordGathering(t *testing.T) { forEachBackend(t, testRecordGathering) }

func testRecordGathering(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	visible := visibleElsewhere(t, x)
	first := newPart("run", 1, "search", "c1", "alpha")
	more := [][]NewPart{
		{newPart("run", 2, "search", "c2", "beta"), newPart("other", 1, "fetch", "c1", "gamma")},
		{newPart("run", 3, "search", "c3", "alpha")},
	}
	calls := 0
	rec, err := x.recordGathering(ctx, []NewPart{first}, func() ([]NewPart, error) {
		if n := visible(); n != 0 {
			t.Errorf("while gathering, another connection sees %d parts", n)
		}
		calls++
		if calls > len(more) {
			return nil, nil
		}
		return more[calls-1], nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls != len(more)+1 {
		t.Errorf("gather called %d times, want %d", calls, len(more)+1)
	}
	want := []string{first.Key, more[0][0].Key, more[0][1].Key, more[1][0].Key}
	if len(rec) != len(want) {
		t.Fatalf("%d parts recorded, want %d", len(rec), len(want))
	}
	for i, r := range rec {
		if r.Key != want[i] || r.Version != 1 {
			t.Errorf("recorded[%d] = %s version %d, want %s version 1", i, r.Key, r.Version, want[i])
		}
	}
	// The last gathered part has the first's content, recorded in the same
	// transaction: it is the same content as the first's key.
	if rec[3].SameAs != first.Key {
		t.Errorf("recorded[3] is the same content as %q, want %q", rec[3].SameAs, first.Key)
	}
	if n := visible(); n != len(want) {
		t.Errorf("after the commit, another connection sees %d parts, want %d", n, len(want))
	}

	// A bad part gathered, and gather's own error: nothing is recorded.
	bad := newPart("run", 4, "search", "c4", "delta")
	bad.Key = ""
	failed := errors.New("a blob of a gathered write failed")
	for _, tc := range []struct {
		name   string
		gather func() ([]NewPart, error)
		want   error
	}{
		{"bad part", func() ([]NewPart, error) { return []NewPart{bad}, nil }, ErrInvalidPart},
		{"gather fails", func() ([]NewPart, error) { return nil, failed }, failed},
	} {
		_, err := x.recordGathering(ctx, []NewPart{newPart("run", 5, "search", "c5", "epsilon")}, tc.gather, nil)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: RecordGathering = %v, want %v", tc.name, err, tc.want)
		}
		if n := visible(); n != len(want) {
			t.Errorf("%s: %d parts recorded, want %d", tc.name, n, len(want))
		}
	}
}

// visibleElsewhere returns how many parts another connection to x's
// database sees.
func visibleElsewhere(t *testing.T, x *Index) func() int {
	t.Helper()
	ctx := context.Background()
	other, err := Open(ctx, x.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return func() int {
		t.Helper()
		ps, err := other.List(ctx, ListOptions{AllVersions: true})
		if err != nil {
			t.Fatal(err)
		}
		return len(ps)
	}
}
