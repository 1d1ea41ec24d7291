package index

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// TestBlobIDsInShard: every shard's ids and blobs, read from the index on
// digest alone, are BlobsInShard's rows, in the same order, used or not.
func TestBlobIDsInShard(t *testing.T) { forEachBackend(t, testBlobIDsInShard) }

func testBlobIDsInShard(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	var ps []NewPart
	for i := range 400 {
		ps = append(ps, newPart(fmt.Sprint("run-", i%4), i, "t", "c", fmt.Sprint("content ", i)))
	}
	mustRecord(t, x, ps...)
	if _, err := x.Prune(ctx, PruneOptions{Run: "run-1"}); err != nil {
		t.Fatal(err)
	}
	total := 0
	for sh := range 256 {
		want, err := x.BlobsInShard(ctx, byte(sh))
		if err != nil {
			t.Fatal(err)
		}
		got, err := x.BlobIDsInShard(ctx, byte(sh))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("shard %02x: %d ids, want %d", sh, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID || got[i].Blob != want[i].Blob {
				t.Errorf("shard %02x row %d = %d %s, want %d %s", sh, i, got[i].ID, got[i].Blob, want[i].ID, want[i].Blob)
			}
		}
		total += len(got)
	}
	if total != 400 {
		t.Errorf("%d rows in all, want 400", total)
	}
}

// TestUnusualBlobRows: the rows no part uses and the rows naming a pack
// are read with their flags; every other row, a row stored since, and an
// id given with another blob than its row's count as used and loose.
func TestUnusualBlobRows(t *testing.T) { forEachBackend(t, testUnusualBlobRows) }

func testUnusualBlobRows(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	used, unused, packed := newPart("keep", 1, "t", "c", "used"), newPart("gone", 1, "t", "c", "unused"), newPart("keep", 2, "t", "c", "packed")
	packedUnused := newPart("gone", 2, "t", "c", "packed and unused")
	mustRecord(t, x, used, unused, packed, packedUnused)
	if err := x.RecordPack(ctx, PackRecord{Name: "pack-a.zst", Size: 10, Raw: 50, Blobs: []cas.Blob{packed.Blob, packedUnused.Blob}}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Prune(ctx, PruneOptions{Run: "gone"}); err != nil {
		t.Fatal(err)
	}
	u, err := x.UnusualBlobRows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u.Len() != 3 {
		t.Errorf("%d unusual rows, want 3 (unused, packed, both)", u.Len())
	}
	later := newPart("keep", 3, "t", "c", "stored after the read")
	mustRecord(t, x, later)
	rows := shardRowsOf(t, x, used.Blob, unused.Blob, packed.Blob, packedUnused.Blob, later.Blob)
	for _, tc := range []struct {
		name         string
		id           BlobID
		used, packed bool
	}{
		{"used", BlobID{rows[used.Blob].ID, used.Blob}, true, false},
		{"unused", BlobID{rows[unused.Blob].ID, unused.Blob}, false, false},
		{"packed", BlobID{rows[packed.Blob].ID, packed.Blob}, true, true},
		{"packed and unused", BlobID{rows[packedUnused.Blob].ID, packedUnused.Blob}, false, true},
		{"stored after the read", BlobID{rows[later.Blob].ID, later.Blob}, true, false},
		// The unused row's id given with another blob: a row that took
		// the id since the read is no unused row.
		{"id of another blob", BlobID{rows[unused.Blob].ID, used.Blob}, true, false},
		{"same digest, another extension", BlobID{rows[unused.Blob].ID, cas.Blob{Digest: unused.Blob.Digest, Ext: ".json"}}, true, false},
	} {
		got := u.Row(tc.id)
		if got.ID != tc.id.ID || got.Blob != tc.id.Blob || got.Used != tc.used || got.Packed != tc.packed {
			t.Errorf("%s: Row = %+v, want used %v, packed %v", tc.name, got, tc.used, tc.packed)
		}
		// The rows as BlobsInShard reads them say the same, but for the
		// rows named with another blob than theirs.
		if r, ok := rows[tc.id.Blob]; ok && r.ID == tc.id.ID && (r.Used != got.Used || r.Packed != got.Packed) {
			t.Errorf("%s: Row says used %v packed %v, BlobsInShard %v %v", tc.name, got.Used, got.Packed, r.Used, r.Packed)
		}
	}
}

// TestMarkVerifiedChecked: rows named by id and the check of their blob
// are marked; a row stored after the check began, and an id whose row is
// of another blob (another digest, or the same digest with another
// extension) are not, while the rest of their batch is.
func TestMarkVerifiedChecked(t *testing.T) { forEachBackend(t, testMarkVerifiedChecked) }

func testMarkVerifiedChecked(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1_000_000, 0)}
	x := MustOpen(t, WithClock(c.now))
	a, b, d, e := newPart("r", 1, "t", "c", "a"), newPart("r", 2, "t", "c", "b"), newPart("r", 3, "t", "c", "d"), newPart("r", 4, "t", "c", "e")
	mustRecord(t, x, a, b, d, e)
	c.t = c.t.Add(time.Minute)
	since := c.t
	c.t = c.t.Add(time.Minute)
	late := newPart("r", 5, "t", "c", "stored after the check began")
	mustRecord(t, x, late)
	rows := shardRowsOf(t, x, a.Blob, b.Blob, d.Blob, e.Blob, late.Blob)
	named := func(p NewPart, as cas.Blob) CheckedRow {
		return CheckedRow{ID: rows[p.Blob].ID, Check: RowCheck(as.Digest, as.Ext)}
	}
	other := cas.Blob{Digest: e.Blob.Digest, Ext: ".json"}
	if RowCheck(a.Blob.Digest, a.Blob.Ext) == RowCheck(d.Blob.Digest, d.Blob.Ext) || RowCheck(other.Digest, other.Ext) == RowCheck(e.Blob.Digest, e.Blob.Ext) {
		t.Fatal("the test's blobs have equal checks")
	}
	vs := []CheckedRow{
		named(a, a.Blob), named(b, b.Blob), named(late, late.Blob),
		named(d, a.Blob), // d's id with another blob's digest
		named(e, other),
	}
	slices.SortFunc(vs, func(a, b CheckedRow) int { return cmp.Compare(a.ID, b.ID) })
	at := c.t.Add(time.Minute)
	if err := x.MarkVerifiedChecked(ctx, vs, since, at); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    NewPart
		want bool
	}{{a, true}, {b, true}, {late, false}, {d, false}, {e, false}} {
		r, err := x.Blob(ctx, tc.p.Blob)
		if err != nil {
			t.Fatal(err)
		}
		if got := !r.VerifiedAt.IsZero(); got != tc.want || (got && !r.VerifiedAt.Equal(at)) {
			t.Errorf("%s: verified at %v, want marked %v", tc.p.Key, r.VerifiedAt, tc.want)
		}
	}
}
