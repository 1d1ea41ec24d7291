package store

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
)

// TestGCSweepKeepsBlobStoredAgain: a file no row names when gc marks, and
// a writer stores the same content, committing a row, after the mark and
// before the sweep. The last look at the rows under gc.lock sees the new
// row, so the file stays and the new key reads back; the other garbage
// goes.
func TestGCSweepKeepsBlobStoredAgain(t *testing.T) {
	ctx := context.Background()
	var s *Store
	var again []hook.Stored
	s = MustOpen(t, withFaults(func(p string) error {
		if p != "gc:marked" || again != nil {
			return nil
		}
		var err error
		again, err = s.Write(ctx, []hook.Item{item("again", 1, "orphan 3")})
		return err
	}))
	var items []hook.Item
	for i := range 20 {
		items = append(items, item("junk", i, fmt.Sprint("content ", i)))
	}
	junk := mustWrite(t, s, items...)
	if _, err := s.Prune(ctx, PruneOptions{Run: "junk"}); err != nil {
		t.Fatal(err)
	}
	var orphans []string
	for i := range 5 {
		b, err := localOf(s).blobs.PutBytes(ctx, []byte(fmt.Sprint("orphan ", i)), ".txt")
		if err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, localOf(s).blobs.Path(b.Blob))
	}
	res, err := s.GC(ctx, GCOptions{Grace: 0})
	if err != nil {
		t.Fatal(err)
	}
	if again == nil {
		t.Fatal("the writer never ran between the mark and the sweep")
	}
	if res.RemovedBlobs != 24 {
		t.Errorf("gc removed %d blobs, want 24: all but the one stored again", res.RemovedBlobs)
	}
	if c, err := s.Read(ctx, "again", again[0].Key); err != nil || string(c.Data) != "orphan 3" {
		t.Errorf("the key stored again before the sweep: %v", err)
	}
	for i, p := range orphans {
		_, err := os.Stat(p)
		if i == 3 && err != nil {
			t.Errorf("blob stored again was unlinked: %v", err)
		}
		if i != 3 && !os.IsNotExist(err) {
			t.Errorf("orphan %s kept: %v", p, err)
		}
	}
	for _, st := range junk {
		if _, err := os.Stat(st.Path); !os.IsNotExist(err) {
			t.Errorf("garbage %s kept: %v", st.Key, err)
		}
	}
	v, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || !v.OK {
		t.Errorf("verify after gc: %+v, %v", v, err)
	}
}

// TestGCSweepsInBatches removes more garbage than one delete, one look and
// one batch of unlinks take, blobs with rows and files no row names, and
// leaves the blobs in use.
func TestGCSweepsInBatches(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	n := 3*sweepRows + 7
	var items []hook.Item
	for i := range n {
		items = append(items, item("junk", i, fmt.Sprint("garbage ", i)))
	}
	junk := mustWrite(t, s, items...)
	keep := mustWrite(t, s, item("keep", 1, "kept"), item("keep", 2, "garbage 3"))
	if _, err := s.Prune(ctx, PruneOptions{Run: "junk"}); err != nil {
		t.Fatal(err)
	}
	// Files no row names.
	var orphans []string
	for i := range sweepRows + 3 {
		b, err := localOf(s).blobs.PutBytes(ctx, []byte(fmt.Sprint("orphan ", i)), ".txt")
		if err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, localOf(s).blobs.Path(b.Blob))
	}
	res, err := s.GC(ctx, GCOptions{Grace: 0})
	if err != nil {
		t.Fatal(err)
	}
	if want := n - 1 + len(orphans); res.RemovedBlobs != want {
		t.Errorf("gc removed %d blobs, want %d", res.RemovedBlobs, want)
	}
	for i := 1; i < len(res.Removed); i++ {
		if res.Removed[i-1].FileName() >= res.Removed[i].FileName() {
			t.Fatalf("removed blobs not in order of their names at %d", i)
		}
	}
	for _, st := range junk {
		_, err := os.Stat(st.Path)
		if st.Path == keep[1].Path {
			if err != nil {
				t.Errorf("blob in use removed: %v", err)
			}
		} else if !os.IsNotExist(err) {
			t.Errorf("garbage %s kept: %v", st.Key, err)
		}
	}
	for _, p := range orphans {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("orphan %s kept: %v", p, err)
		}
	}
	for _, st := range keep {
		if _, err := s.Read(ctx, "keep", st.Key); err != nil {
			t.Errorf("%s: %v", st.Key, err)
		}
	}
	if st, err := s.Stats(ctx, ""); err != nil || st.Blobs != 2 {
		t.Errorf("stats after gc: %+v, %v; want 2 blobs", st, err)
	}
}

// TestSweepGap: between two holds of gc.lock gc lets writers in for a
// quarter of the last hold, two polls at least, and at most sweepMaxGap, so
// that slow syncs that stretch a hold do not leave writers a sliver.
func TestSweepGap(t *testing.T) {
	for _, tc := range []struct {
		hold, want time.Duration
	}{
		{0, 2 * sharedPoll},
		{time.Millisecond, 2 * sharedPoll},
		{sweepHold, max(2*sharedPoll, sweepHold/4)},
		{40 * time.Millisecond, 10 * time.Millisecond},
		{time.Second, sweepMaxGap},
	} {
		if got := sweepGap(tc.hold); got != tc.want {
			t.Errorf("sweepGap(%v) = %v, want %v", tc.hold, got, tc.want)
		}
	}
	// The gap left is counted from the end of the last hold.
	end := time.Unix(1_000_000, 0)
	w := &sweeper{held: end.Add(-40 * time.Millisecond), released: end, hold: 40 * time.Millisecond}
	for _, tc := range []struct {
		since, want time.Duration
	}{
		{0, 10 * time.Millisecond},
		{4 * time.Millisecond, 6 * time.Millisecond},
		{10 * time.Millisecond, 0},
		{time.Second, 0},
	} {
		if got := w.gapLeft(end.Add(tc.since)); got != tc.want {
			t.Errorf("gap left %v after a 40ms hold = %v, want %v", tc.since, got, tc.want)
		}
	}
	if got := (&sweeper{}).gapLeft(end); got != 0 {
		t.Errorf("gap before the first hold = %v, want none", got)
	}
}

// TestNextBatch: the sweep's batches are sized for holds of sweepHold,
// from how long the last one took: scaled by the time, but by half to
// twice the last batch at most, within sweepMinRows and sweepMaxRows.
func TestNextBatch(t *testing.T) {
	for _, tc := range []struct {
		n    int
		took time.Duration
		want int
	}{
		{250, sweepHold, 250},
		{250, sweepHold / 2, 500},
		{250, sweepHold * 3 / 4, 333},
		{300, sweepHold * 3 / 2, 200},
		{250, 10 * sweepHold, 125},
		{250, sweepHold / 10, 500},
		{250, 0, 500},
		{sweepMaxRows, sweepHold / 2, sweepMaxRows},
		{sweepMinRows, 10 * sweepHold, sweepMinRows},
	} {
		if got := nextBatch(tc.n, tc.took); got != tc.want {
			t.Errorf("nextBatch(%d, %v) = %d, want %d", tc.n, tc.took, got, tc.want)
		}
	}
}
