package index

import (
	"context"
	"testing"
)

func TestDeleteKey(t *testing.T) { forEachBackend(t, testDeleteKey) }

func testDeleteKey(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	for _, c := range []string{"one", "two", "three"} {
		mustRecord(t, x, newPart("r", 1, "t", "c", c))
	}
	other := newPart("r", 1, "t", "d", "one")
	mustRecord(t, x, other)
	key := newPart("r", 1, "t", "c", "").Key

	if n, err := x.DeleteKey(ctx, key, 3); err != nil || n != 1 {
		t.Fatalf("DeleteKey(newest) = %d, %v; want 1 row", n, err)
	}
	if vs, _ := x.Versions(ctx, key); len(vs) != 2 || vs[0].Version != 2 {
		t.Errorf("after deleting version 3: versions %v, want 2 and 1", keysVersions(vs))
	}
	if rec := mustRecord(t, x, newPart("r", 1, "t", "c", "four")); rec[0].Version != 3 {
		t.Errorf("write after deleting the newest: version %d, want 3", rec[0].Version)
	}
	if n, err := x.DeleteKey(ctx, key, 7); err != nil || n != 0 {
		t.Errorf("DeleteKey(missing version) = %d, %v; want 0, nil", n, err)
	}
	if n, err := x.DeleteKey(ctx, key, 0); err != nil || n != 3 {
		t.Errorf("DeleteKey(every version) = %d, %v; want 3", n, err)
	}
	if vs, _ := x.Versions(ctx, key); len(vs) != 0 {
		t.Errorf("after deleting every version: %v", keysVersions(vs))
	}
	if rec := mustRecord(t, x, newPart("r", 1, "t", "c", "five")); rec[0].Version != 1 {
		t.Errorf("write after deleting every version: version %d, want 1", rec[0].Version)
	}
	// Another key with the same content keeps its row, and so its blob.
	if vs, _ := x.Versions(ctx, other.Key); len(vs) != 1 {
		t.Errorf("other key lost its row: %v", keysVersions(vs))
	}
	for _, bad := range []struct {
		key     string
		version int
	}{{"", 0}, {key, -1}} {
		if _, err := x.DeleteKey(ctx, bad.key, bad.version); err == nil {
			t.Errorf("DeleteKey(%q, %d) succeeded", bad.key, bad.version)
		}
	}
}
