package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
)

// TestPackRecordsInSlices: a pack of more blobs than one slice is recorded
// a slice at a time, each in its own hold of the writers' lock. A gc that
// wants the lock exclusively gets it between two slices (one hold for the
// whole pack would keep it waiting past its deadline); a pack stopped
// after its first slice leaves every blob readable, verify clean, and the
// next pack finishes the job.
func TestPackRecordsInSlices(t *testing.T) {
	ctx := context.Background()
	const n = 3*packSliceRows + 88
	c := &clock{time.Now()}
	boom := errors.New("injected")
	var s *Store
	var slices, gcs int
	var stopAfterFirst bool
	s = MustOpen(t, WithClock(c.now), withFaults(func(p string) error {
		if p != "pack:recorded-slice" {
			return nil
		}
		slices++
		if stopAfterFirst {
			return boom
		}
		if slices == 1 {
			// Between the first slice and the second, gc's exclusive
			// hold, with a deadline far shorter than the default.
			if _, err := s.GC(ctx, GCOptions{Grace: time.Hour, LockTimeout: 2 * time.Second}); err != nil {
				t.Errorf("gc between two slices of a pack: %v", err)
			}
			gcs++
		}
		return nil
	}))
	items := make([]hook.Item, n)
	for i := range items {
		items[i] = item("r", i, textOf("r", i))
	}
	all, err := s.Write(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(48 * time.Hour)
	check := func(when string) {
		t.Helper()
		for i, st := range all {
			got, err := s.Read(ctx, "r", st.Key)
			if err != nil || string(got.Data) != textOf("r", i) {
				t.Fatalf("%s: read %s = %v", when, st.Key, err)
			}
		}
		v, err := s.Verify(ctx, VerifyOptions{})
		if err != nil || len(v.Missing) > 0 || len(v.Corrupt) > 0 {
			t.Fatalf("%s: verify = %+v, %v", when, v, err)
		}
	}

	// Stopped after the first slice.
	stopAfterFirst = true
	if _, err := s.Pack(ctx, PackOptions{}); !errors.Is(err, boom) {
		t.Fatalf("Pack stopped after its first slice = %v", err)
	}
	stopAfterFirst = false
	if st, _ := s.Stats(ctx, ""); st.PackedBlobs != packSliceRows {
		t.Errorf("packed blobs after one slice = %d, want %d", st.PackedBlobs, packSliceRows)
	}
	check("after a pack stopped after one slice")
	if _, err := s.GC(ctx, GCOptions{Grace: 0}); err != nil {
		t.Fatal(err)
	}
	check("after gc")

	// The next pack takes the rest, with a gc between its first two slices.
	slices = 0
	if _, err := s.Pack(ctx, PackOptions{}); err != nil {
		t.Fatal(err)
	}
	if gcs != 1 || slices < 2 {
		t.Fatalf("the pack recorded %d slices, with %d gc between them: want two slices or more and one gc", slices, gcs)
	}
	check("after packing again")
	if st, _ := s.Stats(ctx, ""); st.PackedBlobs != n {
		t.Errorf("packed blobs at the end = %d, want %d", st.PackedBlobs, n)
	}
	if _, err := s.GC(ctx, GCOptions{Grace: 0}); err != nil {
		t.Fatal(err)
	}
	check("after the last gc")
	if v, _ := s.Verify(ctx, VerifyOptions{}); !v.OK || len(v.Orphans) > 0 {
		t.Errorf("verify at the end = %+v", v)
	}
}
