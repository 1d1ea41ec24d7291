package store

import (
	"context"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// PlanGC says what gc would remove and why, and what it keeps as young;
// GC then removes what the plan named, and nothing else.
func TestGCPlanSaysWhatGoesAndWhy(t *testing.T) {
	ctx := context.Background()
	// The store's clock starts three hours back: what is written then is
	// old, its row and its file both (a file's time is the system's, so it
	// is set back to match).
	now := time.Now()
	c := &clock{now.Add(-3 * time.Hour)}
	s := MustOpen(t, WithClock(c.now))
	keep := mustWrite(t, s, item("keep", 1, "kept: a part uses it"))[0]
	pruned := mustWrite(t, s, item("old", 1, "pruned, and old"))[0]
	orphan, err := localOf(s).blobs.PutBytes(ctx, []byte("no row names it"), ".txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{keep.Path, pruned.Path, s.Path(orphan.Blob)} {
		if err := os.Chtimes(p, c.t, c.t); err != nil {
			t.Fatal(err)
		}
	}
	c.t = now
	young := mustWrite(t, s, item("young", 1, "pruned, but young"))[0]
	for _, run := range []string{"old", "young"} {
		if _, err := s.Prune(ctx, PruneOptions{Run: run}); err != nil {
			t.Fatal(err)
		}
	}

	plan, err := s.PlanGC(ctx, GCOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	reasons := func(bs []GCBlob) map[cas.Digest]GCReason {
		m := map[cas.Digest]GCReason{}
		for _, b := range bs {
			m[b.Blob.Digest] = b.Reason
		}
		return m
	}
	wantRemove := map[cas.Digest]GCReason{pruned.Digest: GCUnused, orphan.Blob.Digest: GCNoRow}
	if got := reasons(plan.Remove); !maps.Equal(got, wantRemove) {
		t.Errorf("plan.Remove = %v, want %v", got, wantRemove)
	}
	if got, want := reasons(plan.Young), map[cas.Digest]GCReason{young.Digest: GCUnused}; !maps.Equal(got, want) {
		t.Errorf("plan.Young = %v, want %v", got, want)
	}
	if plan.Blobs != 4 || plan.Grace != time.Hour || len(plan.Missing)+len(plan.StaleRows)+len(plan.Temps) != 0 {
		t.Errorf("plan: %d blobs, grace %v, missing %v, stale rows %v, temps %v; want 4 blobs, 1h, nothing else",
			plan.Blobs, plan.Grace, plan.Missing, plan.StaleRows, plan.Temps)
	}
	for _, b := range plan.Remove {
		if b.ModTime.After(plan.At.Add(-plan.Grace)) || b.Size <= 0 {
			t.Errorf("planned removal %s: modified %v (plan at %v), size %d", b.Blob, b.ModTime, plan.At, b.Size)
		}
	}

	res, err := s.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedBlobs != 2 || res.KeptYoung != 1 {
		t.Errorf("GC = %+v, want the plan's 2 blobs removed and 1 kept young", res)
	}
	for path, want := range map[string]bool{keep.Path: true, young.Path: true, pruned.Path: false, s.Path(orphan.Blob): false} {
		if _, err := os.Stat(path); (err == nil) != want {
			t.Errorf("after GC, %s exists: %v, want %v", path, err == nil, want)
		}
	}
}

// A blob whose file is old but whose row was referenced within the grace
// period (a write of the same content refreshes the row; it cannot touch
// a pack's file) is young in the plan, as the sweep, which deletes a row
// only once its last reference is old, keeps it.
func TestGCPlanAgesRowsByTheirLastReference(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	c := &clock{now}
	s := MustOpen(t, WithClock(c.now))
	touched := mustWrite(t, s, item("touched", 1, "pruned; its file old, its row referenced just now"))[0]
	old := now.Add(-3 * time.Hour)
	if err := os.Chtimes(touched.Path, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(ctx, PruneOptions{Run: "touched"}); err != nil {
		t.Fatal(err)
	}
	plan, err := s.PlanGC(ctx, GCOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Remove) != 0 || len(plan.Young) != 1 || plan.Young[0].Blob.Digest != touched.Digest {
		t.Fatalf("plan: remove %v, young %v; want nothing removed, %s young", plan.Remove, plan.Young, touched.Digest)
	}
	if got := plan.Young[0].ModTime; got.Before(now) {
		t.Errorf("young blob's time %v, want its row's last reference (%v)", got, now)
	}
	res, err := s.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedBlobs != 0 || res.KeptYoung != 1 {
		t.Errorf("GC = %+v, want nothing removed, 1 kept young", res)
	}
	if _, err := os.Stat(touched.Path); err != nil {
		t.Errorf("after GC: %v, want the blob kept", err)
	}
}
