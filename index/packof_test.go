package index

import (
	"context"
	"testing"

	"github.com/toolcas/toolcas/cas"
)

// PackOf names the pack a blob's row records, follows a pack rewritten,
// and says "" for a loose blob and for a blob without a row.
func TestPackOf(t *testing.T) { forEachBackend(t, testPackOf) }

func testPackOf(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	a, b := newPart("run-a", 1, "bash", "c1", "alpha"), newPart("run-a", 2, "bash", "c2", "beta")
	mustRecord(t, x, a, b)
	want := func(blob cas.Blob, name string) {
		t.Helper()
		got, err := x.PackOf(ctx, blob)
		if err != nil || got != name {
			t.Errorf("PackOf(%s) = %q, %v; want %q", blob, got, err, name)
		}
	}
	want(a.Blob, "")
	if err := x.RecordPack(ctx, PackRecord{Name: "pack-1.zst", Size: 10, Raw: 10, Blobs: []cas.Blob{a.Blob}}); err != nil {
		t.Fatal(err)
	}
	want(a.Blob, "pack-1.zst")
	want(b.Blob, "")
	want(cas.Blob{Digest: a.Blob.Digest, Ext: ".json"}, "")
	want(cas.Blob{Digest: cas.Sum([]byte("no row")), Ext: ".txt"}, "")
	if err := x.ReplacePack(ctx, "pack-1.zst", PackRecord{Name: "pack-2.zst", Size: 10, Raw: 10, Blobs: []cas.Blob{a.Blob}}); err != nil {
		t.Fatal(err)
	}
	want(a.Blob, "pack-2.zst")
}
