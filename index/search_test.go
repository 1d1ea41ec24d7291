package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/toolcas/toolcas/search"
)

// A segment's blob list and posting groups are stored compacted and read
// back as they were given; a damaged list or group is an error that says
// the index is damaged, never a wrong list.
func TestSearchSegmentRoundTrip(t *testing.T) { forEachBackend(t, testSearchSegmentRoundTrip) }

func testSearchSegmentRoundTrip(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	var ps []NewPart
	for i := range 600 {
		ps = append(ps, newPart("r", i, "bash", fmt.Sprint("c", i), fmt.Sprint("content ", i)))
	}
	mustRecord(t, x, ps...)
	lag, err := x.UnsearchedBlobs(ctx, 0, 1000)
	if err != nil || len(lag) != 600 {
		t.Fatalf("%d unsearched blobs, %v; want 600", len(lag), err)
	}
	rec := SearchSegmentRecord{Bytes: 6000, Through: lag[len(lag)-1].ID}
	for i, ub := range lag {
		rec.Blobs = append(rec.Blobs, ub.ID)
		rec.Blocks = append(rec.Blocks, i/4)
		rec.Packed = append(rec.Packed, i%3 == 0)
	}
	abc, abd, xyz := uint32('a')<<16|'b'<<8|'c', uint32('a')<<16|'b'<<8|'d', uint32('x')<<16|'y'<<8|'z'
	lists := map[uint32][]byte{abc: search.EncodePosting([]int{0, 7, 149}, 150), abd: {}, xyz: search.EncodePosting([]int{3}, 150)}
	rec.Postings = func(add func(uint32, []byte) error) error {
		for _, tg := range []uint32{abc, abd, xyz} {
			if err := add(tg, lists[tg]); err != nil {
				return err
			}
		}
		return nil
	}
	seg, err := x.AddSearchSegment(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := x.SearchSegments(ctx)
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %+v, %v; want 1", segs, err)
	}
	sg := segs[0]
	if !slices.Equal(sg.Blobs, rec.Blobs) || !slices.Equal(sg.Blocks, rec.Blocks) || sg.NBlocks != 150 || sg.Packed != 200 {
		t.Errorf("segment read back: %d blobs, blocks %v…, %d blocks, %d packed; want %d blobs, 150 blocks, 200 packed",
			len(sg.Blobs), sg.Blocks[:8], sg.NBlocks, sg.Packed, len(rec.Blobs))
	}
	var stored []byte
	if err := x.db.GetContext(ctx, &stored, x.db.Rebind(`SELECT blob_ids FROM search_segments WHERE id = ?`), seg); err != nil {
		t.Fatal(err)
	}
	if stored[0] != 1 || len(stored) >= 1200 { // plain, each blob takes a byte of gap and at least one of block
		t.Errorf("600 blobs' list stored in %d bytes, encoding %d; want zstd, under 2 bytes a blob", len(stored), stored[0])
	}
	v, err := x.SearchView(ctx, []uint32{abc, abd, xyz, uint32('a')<<16 | 'b'<<8 | 'e'})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Postings[seg]; len(got) != 3 || string(got[abc]) != string(lists[abc]) || len(got[abd]) != 0 ||
		string(got[xyz]) != string(lists[xyz]) {
		t.Errorf("postings read back %v, want %v", got, lists)
	}
	// Out of order: refused, nothing recorded.
	bad := rec
	bad.Postings = func(add func(uint32, []byte) error) error {
		if err := add(xyz, nil); err != nil {
			return err
		}
		return add(abc, nil)
	}
	if _, err := x.AddSearchSegment(ctx, bad); err == nil {
		t.Errorf("postings out of order were recorded")
	}

	for name, q := range map[string]string{
		"blob list cut short": `UPDATE search_segments SET blob_ids = substr(blob_ids, 1, length(blob_ids) - 3)`,
		"blob list encoding":  `UPDATE search_segments SET blob_ids = ` + hexBlob(x, "07000102"),
	} {
		t.Run(name, func(t *testing.T) {
			tx, err := x.db.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
			if _, err := searchSegments(ctx, tx); !errors.Is(err, search.ErrBadPosting) {
				t.Errorf("segments of a damaged list: %v, want ErrBadPosting", err)
			}
		})
	}
	mustExecIndex(t, x, `UPDATE search_posting_groups SET data = `+hexBlob(x, "0005"))
	if _, err := x.SearchView(ctx, []uint32{abc}); !errors.Is(err, search.ErrBadPosting) {
		t.Errorf("search view of a damaged group: %v, want ErrBadPosting", err)
	}
}

// hexBlob returns an SQL literal of the bytes of hex h in x's dialect.
func hexBlob(x *Index, h string) string {
	if x.IsPostgres() {
		return `'\x` + h + `'::bytea`
	}
	return `x'` + h + `'`
}

func mustExecIndex(t *testing.T, x *Index, q string) {
	t.Helper()
	if _, err := x.db.Exec(q); err != nil {
		t.Fatal(err)
	}
}
