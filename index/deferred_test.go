package index

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// Parts recorded with RecordDeferred read back at once through the same
// Index, keys and versions settled as Record settles them; another
// connection sees them once their transaction commits, which it does
// within DeferredCommitAfter with nobody asking; Close commits what waits.
func TestRecordDeferred(t *testing.T) {
	ctx := context.Background()
	path := newIndexPath(t)
	x, err := Open(ctx, path, WithDurability(cas.SyncNone), WithDeferredCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	var committed []error
	var mu sync.Mutex
	note := func(err error) { mu.Lock(); committed = append(committed, err); mu.Unlock() }
	a := newPart("run", 1, "search", "c1", "alpha")
	recs, err := x.RecordDeferred(ctx, []NewPart{a}, note)
	if err != nil {
		t.Fatal(err)
	}
	// The same call id's key again is a new version; another call's use
	// of the key gets a suffix, as Record gives them.
	again := a
	again.Blob = cas.Blob{Digest: cas.Sum([]byte("alpha 2")), Ext: ".txt"}
	other2 := a
	other2.CallID = "c2"
	recs2, err := x.RecordDeferred(ctx, []NewPart{again, other2}, note)
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Version != 1 || recs2[0].Version != 2 || recs2[1].Key != "run/1_search_c1~2.txt" {
		t.Errorf("records = %+v, %+v", recs, recs2)
	}
	// Read through the same Index: there at once.
	p, err := x.Resolve(ctx, mustParse(t, a.Key), "")
	if err != nil || p.Version != 2 {
		t.Fatalf("Resolve through the writing index = %+v, %v", p, err)
	}
	st, err := x.Stats(ctx, "")
	if err != nil || st.Parts != 3 {
		t.Fatalf("Stats through the writing index: %d parts, %v", st.Parts, err)
	}
	mu.Lock()
	if len(committed) != 2 || committed[0] != nil || committed[1] != nil {
		t.Errorf("after a read, committed = %v, want two nils", committed)
	}
	mu.Unlock()

	// Nobody reads: the commit comes by itself.
	b := newPart("run", 2, "search", "c1", "beta")
	start := time.Now()
	if _, err := x.RecordDeferred(ctx, []NewPart{b}, note); err != nil {
		t.Fatal(err)
	}
	deadline := start.Add(10 * time.Second) // generous, for a loaded machine
	for {
		if _, err := other.Resolve(ctx, mustParse(t, b.Key), ""); err == nil {
			break
		} else if !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("another connection still does not see %s after %v", b.Key, time.Since(start))
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("seen by another connection after %v (commit due after %v)", time.Since(start), DeferredCommitAfter)

	// Close commits what waits.
	c := newPart("run", 3, "search", "c1", "gamma")
	if _, err := x.RecordDeferred(ctx, []NewPart{c}, note); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Resolve(ctx, mustParse(t, c.Key), ""); err != nil {
		t.Fatalf("after Close, %s: %v", c.Key, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(committed) != 4 {
		t.Errorf("committed called %d times, want 4", len(committed))
	}
}

// Many writers at once, past DeferredCommitRows: every part is there once
// and only once, and every committed call comes.
func TestRecordDeferredConcurrent(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t, WithDurability(cas.SyncNone), WithDeferredCommit())
	const writers, each = 4, 200
	var (
		wg        sync.WaitGroup
		committed sync.WaitGroup
	)
	committed.Add(writers * each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				p := newPart(fmt.Sprintf("run-%d", w), i, "t", "c", fmt.Sprintf("content %d %d", w, i))
				if _, err := x.RecordDeferred(ctx, []NewPart{p}, func(err error) {
					if err != nil {
						t.Errorf("lost: %v", err)
					}
					committed.Done()
				}); err != nil {
					t.Error(err)
					committed.Done()
				}
			}
		})
	}
	wg.Wait()
	if err := x.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	committed.Wait()
	st, err := x.Stats(ctx, "")
	if err != nil || st.Parts != writers*each {
		t.Fatalf("%d parts (%v), want %d", st.Parts, err, writers*each)
	}
}
