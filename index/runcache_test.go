package index

import (
	"context"
	"testing"
)

// A runs row made by a transaction that was rolled back is not
// remembered: the run's next part makes it again and is recorded under it,
// and later parts of the run find it.
func TestRunCacheKeepsOnlyCommittedRuns(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	if _, err := x.db.ExecContext(ctx, `CREATE TRIGGER boom BEFORE INSERT ON parts WHEN NEW.tool = 'boom'
		BEGIN SELECT RAISE(ABORT, 'boom'); END`); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Record(ctx, []NewPart{newPart("fresh", 1, "boom", "c1", "one")}); err == nil {
		t.Fatal("the aborted insert recorded a part")
	}
	if got, _ := x.runs.get(runKey{"fresh", "fresh/"}); got != 0 {
		t.Fatalf("the rolled-back runs row %d is remembered", got)
	}
	for i := range 3 {
		mustRecord(t, x, newPart("fresh", 2+i, "t", "c1", "two"))
	}
	ps, err := x.List(ctx, ListOptions{Run: "fresh"})
	if err != nil || len(ps) != 3 {
		t.Fatalf("List(run fresh) = %d parts, %v; want 3", len(ps), err)
	}
	var n int
	if err := x.db.GetContext(ctx, &n, `SELECT count(*) FROM runs WHERE name = 'fresh'`); err != nil || n != 1 {
		t.Errorf("%d runs rows for the run, %v; want 1", n, err)
	}
	if _, ok := x.runs.get(runKey{"fresh", "fresh/"}); !ok {
		t.Error("the committed runs row is not remembered")
	}
}
