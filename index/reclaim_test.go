package index

import (
	"context"
	"os"
	"testing"
)

// freePages returns the database's free pages and its file's size.
func freePages(t *testing.T, x *Index) (pages, size int64) {
	t.Helper()
	if err := x.db.GetContext(context.Background(), &pages, `PRAGMA freelist_count`); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(x.Path())
	if err != nil {
		t.Fatal(err)
	}
	return pages, fi.Size()
}

// The pages of deleted rows go back to the file system, a chunk a
// transaction, and the file shrinks by them.
func TestReclaimFree(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	// 12,000 parts free about 8,500 pages, two chunks and more; 7,000,
	// under -short (the race detector's run), still more than one.
	n := 12000
	if testing.Short() {
		n = 7000
	}
	var ps []NewPart
	for i := range n {
		ps = append(ps, stepPart(i, true))
	}
	mustRecord(t, x, ps...)
	for _, q := range []string{`DELETE FROM parts`, `DELETE FROM blobs`} {
		if _, err := x.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	free, before := freePages(t, x)
	if free < reclaimChunk {
		t.Fatalf("%d free pages after deleting every part, want more than a chunk (%d) to reclaim", free, reclaimChunk)
	}
	got, err := x.ReclaimFree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != free*pageSize {
		t.Errorf("ReclaimFree = %d bytes, want the %d free pages' %d", got, free, free*pageSize)
	}
	left, after := freePages(t, x)
	if left != 0 || before-after < got {
		t.Errorf("after ReclaimFree: %d free pages, file %d bytes from %d; want none, and %d bytes fewer", left, after, before, got)
	}
	if got, err := x.ReclaimFree(ctx); got != 0 || err != nil {
		t.Errorf("ReclaimFree again = %d, %v; want 0, nil", got, err)
	}
}

// A database made without incremental auto-vacuum keeps its free pages.
func TestReclaimFreeWithoutAutoVacuum(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	for _, q := range []string{`PRAGMA auto_vacuum = NONE`, `VACUUM`} {
		if _, err := x.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var ps []NewPart
	for i := range 1000 {
		ps = append(ps, stepPart(i, false))
	}
	mustRecord(t, x, ps...)
	if _, err := x.db.ExecContext(ctx, `DELETE FROM parts`); err != nil {
		t.Fatal(err)
	}
	free, _ := freePages(t, x)
	if got, err := x.ReclaimFree(ctx); got != 0 || err != nil {
		t.Errorf("ReclaimFree = %d, %v; want 0, nil", got, err)
	}
	if left, _ := freePages(t, x); left != free || free == 0 {
		t.Errorf("%d free pages before, %d after; want the same, and some", free, left)
	}
}
