package index

import (
	"context"
	"testing"

	"github.com/toolcas/toolcas/cas"
)

// Blobs whose digests start with the same 8 bytes share blobs_digest's key:
// each lookup still finds its own row, and a shard lists them in digest
// and extension order.
func TestDigestsStartingAlike(t *testing.T) { forEachBackend(t, testDigestsStartingAlike) }

func testDigestsStartingAlike(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	var a, b cas.Digest
	for i := range a {
		a[i], b[i] = 0x7e, 0x7e
	}
	b[20] = 0x80 // b sorts after a, and starts as a does
	blobs := []struct {
		blob cas.Blob
		size int64
	}{
		{cas.Blob{Digest: b, Ext: ".txt"}, 3},
		{cas.Blob{Digest: a, Ext: ".txt"}, 2},
		{cas.Blob{Digest: a, Ext: ".json"}, 1},
	}
	for _, r := range blobs {
		if _, err := x.db.ExecContext(ctx, `INSERT INTO blobs (digest, ext, size, first_stored, last_referenced)
			VALUES (?, ?, ?, 1, 1)`, r.blob.Digest[:], r.blob.Ext, r.size); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range blobs {
		got, err := x.Blob(ctx, r.blob)
		if err != nil || got.Blob != r.blob || got.Size != r.size {
			t.Errorf("Blob(%s) = %+v, %v; want its row of size %d", r.blob, got, err, r.size)
		}
	}
	shard, err := x.BlobsInShard(ctx, 0x7e)
	if err != nil {
		t.Fatal(err)
	}
	want := []cas.Blob{blobs[2].blob, blobs[1].blob, blobs[0].blob}
	if len(shard) != len(want) {
		t.Fatalf("shard 7e lists %d blobs, want %d", len(shard), len(want))
	}
	for i, w := range want {
		if shard[i].Blob != w {
			t.Errorf("shard 7e's blob %d is %s, want %s", i, shard[i].Blob, w)
		}
	}
	for _, s := range []byte{0x7d, 0x7f} {
		if got, err := x.BlobsInShard(ctx, s); err != nil || len(got) != 0 {
			t.Errorf("shard %x lists %d blobs (%v), want none", s, len(got), err)
		}
	}
	// Recorded again, a blob is found: the count of rows stays.
	p := newPart("r", 1, "t", "c", "x")
	p.Blob = blobs[1].blob
	mustRecord(t, x, p)
	checkOneRowPerBlob(t, x)
	if got, err := x.Blob(ctx, p.Blob); err != nil || got.Parts != 1 || got.Size != 2 {
		t.Errorf("Blob(%s) after a part used it = %+v, %v", p.Blob, got, err)
	}
}
