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

// TestBlobKeysInShard: every shard's ids and digest starts, read from
// blobs_digest alone, are those of BlobsInShard's rows, in the order of
// their digests; rows whose digests start alike (another digest of the
// same start, the same digest with another extension) are each there.
func TestBlobKeysInShard(t *testing.T) { forEachBackend(t, testBlobKeysInShard) }

func testBlobKeysInShard(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	var ps []NewPart
	for i := range 400 {
		ps = append(ps, newPart(fmt.Sprint("run-", i%4), i, "t", "c", fmt.Sprint("content ", i)))
	}
	twin := ps[0]
	twin.Key, twin.Step = "twin/1_t_c.txt", 1
	twin.Run = "twin"
	twin.Blob.Digest[cas.DigestSize-1] ^= 0xff
	json := ps[0]
	json.Key, json.Step, json.Run = "json/1_t_c.json", 1, "json"
	json.Blob.Ext = ".json"
	ps = append(ps, twin, json)
	mustRecord(t, x, ps...)
	if _, err := x.Prune(ctx, PruneOptions{Run: "run-1"}); err != nil {
		t.Fatal(err)
	}
	total := 0
	for sh := range 256 {
		rows, err := x.BlobsInShard(ctx, byte(sh))
		if err != nil {
			t.Fatal(err)
		}
		got, err := x.BlobKeysInShard(ctx, byte(sh))
		if err != nil {
			t.Fatal(err)
		}
		// BlobsInShard's order is by whole digest: by id within a start.
		want := make([]BlobKey, len(rows))
		for i, r := range rows {
			want[i] = BlobKey{ID: r.ID, Key: KeyOf(r.Blob.Digest)}
		}
		slices.SortStableFunc(want, func(a, b BlobKey) int {
			if c := slices.Compare(a.Key[:], b.Key[:]); c != 0 {
				return c
			}
			return cmp.Compare(a.ID, b.ID)
		})
		if !slices.Equal(got, want) {
			t.Errorf("shard %02x: keys %v, want %v", sh, got, want)
		}
		total += len(got)
	}
	if total != 402 {
		t.Errorf("%d rows in all, want 402", total)
	}
}

// TestBlobsByID: the blobs of rows named by id, those of rows whose
// digests start alike told apart; an id with no row is left out.
func TestBlobsByID(t *testing.T) { forEachBackend(t, testBlobsByID) }

func testBlobsByID(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	a := newPart("r", 1, "t", "c", "a")
	twin := newPart("r", 2, "t", "c", "a")
	twin.Blob.Digest[cas.DigestSize-1] ^= 0xff
	json := newPart("r", 3, "t", "c", "a")
	json.Key, json.Blob.Ext = "r/3_t_c.json", ".json"
	mustRecord(t, x, a, twin, json)
	rows := shardRowsOf(t, x, a.Blob, twin.Blob, json.Blob)
	ids := []int64{rows[a.Blob].ID, rows[twin.Blob].ID, rows[json.Blob].ID, 1 << 40}
	got, err := x.BlobsByID(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]cas.Blob{ids[0]: a.Blob, ids[1]: twin.Blob, ids[2]: json.Blob}
	if len(got) != len(want) {
		t.Errorf("BlobsByID = %v, want %v", got, want)
	}
	for id, b := range want {
		if got[id] != b {
			t.Errorf("id %d: %s, want %s", id, got[id], b)
		}
	}
	// More ids than one statement takes.
	many := make([]int64, 2500)
	for i := range many {
		many[i] = int64(i + 1)
	}
	if got, err := x.BlobsByID(ctx, many); err != nil || len(got) != 3 {
		t.Errorf("BlobsByID of 2500 ids = %d blobs, %v; want 3", len(got), err)
	}
}

// TestUnusualRowsInShard: a shard's unusual rows come with their blobs
// and flags in the order of BlobKeysInShard's (digest start, then id),
// rows whose digests start alike among them; used and loose rows are not
// there, and every unusual row is in its shard once.
func TestUnusualRowsInShard(t *testing.T) { forEachBackend(t, testUnusualRowsInShard) }

func testUnusualRowsInShard(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	var ps []NewPart
	for i := range 300 {
		ps = append(ps, newPart(fmt.Sprint("run-", i%3), i, "t", "c", fmt.Sprint("content ", i)))
	}
	// Rows whose digests start as the first's, stored after it, unused.
	twin := newPart("run-1", 1000, "t", "c", "twin")
	twin.Blob.Digest = ps[0].Blob.Digest
	twin.Blob.Digest[cas.DigestSize-1] ^= 0xff
	json := newPart("run-1", 1001, "t", "c", "json")
	json.Blob = cas.Blob{Digest: ps[0].Blob.Digest, Ext: ".json"}
	json.Key = "run-1/1001_t_c.json"
	ps = append(ps, twin, json)
	mustRecord(t, x, ps...)
	for _, run := range []string{"run-0", "run-1"} {
		if _, err := x.Prune(ctx, PruneOptions{Run: run}); err != nil {
			t.Fatal(err)
		}
	}
	u, err := x.UnusualBlobRows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for sh := range 256 {
		rows, err := x.BlobsInShard(ctx, byte(sh))
		if err != nil {
			t.Fatal(err)
		}
		keys, err := x.BlobKeysInShard(ctx, byte(sh))
		if err != nil {
			t.Fatal(err)
		}
		byID := map[int64]ShardBlob{}
		for _, r := range rows {
			byID[r.ID] = r
		}
		// The unused rows, in the order of the shard's keys.
		var want []ShardBlob
		for _, k := range keys {
			if r := byID[k.ID]; !r.Used {
				want = append(want, ShardBlob{ID: r.ID, Blob: r.Blob})
			}
		}
		got := u.InShard(byte(sh))
		if len(got) != len(want) {
			t.Fatalf("shard %02x: %d unusual rows, want %d", sh, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID || got[i].Blob != want[i].Blob || got[i].Used || got[i].Packed {
				t.Errorf("shard %02x row %d = %+v, want %+v unused and loose", sh, i, got[i], want[i])
			}
		}
		total += len(got)
	}
	if total != 202 {
		t.Errorf("%d unusual rows in all, want 202", total)
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
