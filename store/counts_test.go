package store

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	_ "modernc.org/sqlite"
)

// TestVerifyReportsCountDriftAndRepairFixesIt damages the counters behind
// stats by hand: verify fails naming them, repair sets them to a recount,
// and stats agree with the rows again.
func TestVerifyReportsCountDriftAndRepairFixesIt(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	mustWrite(t, s, item("r1", 1, "one"), item("r1", 2, "two"))
	mustWrite(t, s, item("r2", 1, "one"))
	before, err := s.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", s.ix.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE counts SET parts = parts + 40, stored = stored - 1`); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(ctx, ""); st.Parts == before.Parts {
		t.Fatal("the damage did not reach stats")
	}
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || len(res.CountDrift) == 0 {
		t.Fatalf("verify of drifted counters = OK %v, drift %q; want a failure naming them", res.OK, res.CountDrift)
	}
	dry, err := s.Repair(ctx, RepairOptions{DryRun: true})
	if err != nil || len(dry.CountDrift) == 0 {
		t.Fatalf("dry repair = %+v, %v; want the drift named", dry, err)
	}
	if st, _ := s.Stats(ctx, ""); st.Parts == before.Parts {
		t.Fatal("a dry repair fixed the counters")
	}
	rep, err := s.Repair(ctx, RepairOptions{})
	if err != nil || len(rep.CountDrift) == 0 {
		t.Fatalf("repair = %+v, %v", rep, err)
	}
	after, err := s.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if after.Parts != before.Parts || after.StoredBytes != before.StoredBytes || after.Blobs != before.Blobs {
		t.Errorf("stats after repair = %d parts, %d bytes, %d blobs; want %d, %d, %d", after.Parts, after.StoredBytes,
			after.Blobs, before.Parts, before.StoredBytes, before.Blobs)
	}
	if res, err := s.Verify(ctx, VerifyOptions{}); err != nil || !res.OK {
		t.Errorf("verify after repair = %+v, %v", res, err)
	}
}

// TestCountsThroughGCAndPack runs the store's own gc, pack and gc's pack
// rewrite between writes and prunes, and recounts after each: the counters
// stay those of the rows, and stats read from them say what the rows say.
func TestCountsThroughGCAndPack(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	recount := func(when string) {
		t.Helper()
		drift, err := s.ix.CountDrift(ctx)
		if err != nil || len(drift) > 0 {
			t.Fatalf("%s: drift %q, %v", when, drift, err)
		}
	}
	for round := range 3 {
		for run := range 4 {
			r := fmt.Sprint("run", round, "-", run)
			mustWrite(t, s, item(r, 1, fmt.Sprint("unique ", round, run)), item(r, 2, "shared by all"),
				item(r, 3, fmt.Sprint("per round ", round)))
		}
		recount("after writes")
		if _, err := s.Pack(ctx, PackOptions{}); err != nil {
			t.Fatal(err)
		}
		recount("after pack")
		if _, err := s.Prune(ctx, PruneOptions{Run: fmt.Sprint("run", round, "-0")}); err != nil {
			t.Fatal(err)
		}
		recount("after prune")
		if _, err := s.GC(ctx, GCOptions{Grace: 0}); err != nil {
			t.Fatal(err)
		}
		recount("after gc")
	}
	st, err := s.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.Parts != 27 || st.PackedBlobs == 0 {
		t.Errorf("stats = %d parts, %d packed blobs; want 27 parts, some packed", st.Parts, st.PackedBlobs)
	}
}
