package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
	"github.com/toolcas/toolcas/search"
)

// A segment's blob list and posting groups are stored compacted and read
// back as they were given; a damaged list or group is an error that says
// the index is damaged, never a wrong list.
func TestSearchSegmentRoundTrip(t *testing.T) { forEachBackend(t, testSearchSegmentRoundTrip) }

func testSearchSegmentRoundTrip(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	lag := newBlobs(t, x, 600)
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
	ids, blocks := sg.Blobs()
	if !slices.Equal(ids, rec.Blobs) || !slices.Equal(blocks, rec.Blocks) || sg.N != len(ids) || sg.NBlocks != 150 || sg.Packed != 200 {
		t.Errorf("segment read back: %d blobs (N %d), blocks %v…, %d blocks, %d packed; want %d blobs, 150 blocks, 200 packed",
			len(ids), sg.N, blocks[:8], sg.NBlocks, sg.Packed, len(rec.Blobs))
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

// newBlobs records n one-part steps of run r, each of new content, and
// returns their blobs, none of which a search segment covers yet, by id.
func newBlobs(t *testing.T, x *Index, n int) []UnsearchedBlob {
	t.Helper()
	var ps []NewPart
	for i := range n {
		ps = append(ps, newPart("r", i, "bash", fmt.Sprint("c", i), fmt.Sprint("content ", i)))
	}
	mustRecord(t, x, ps...)
	lag, err := x.UnsearchedBlobs(context.Background(), 0, n+1)
	if err != nil || len(lag) != n {
		t.Fatalf("%d unsearched blobs, %v; want %d", len(lag), err, n)
	}
	return lag
}

// A segment gives its blobs block by block, in the order they were read
// in (not the order of their ids), and those of some blocks only.
func TestSearchSegmentReadingOrder(t *testing.T) { forEachBackend(t, testSearchSegmentReadingOrder) }

func testSearchSegmentReadingOrder(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	lag := newBlobs(t, x, 9)
	// Blobs 0-8 (by id) in blocks 2 2 0 1 0 2 1 1 0.
	rec := SearchSegmentRecord{Bytes: 90, Through: lag[8].ID, Blocks: []int{2, 2, 0, 1, 0, 2, 1, 1, 0},
		Postings: func(func(uint32, []byte) error) error { return nil }}
	for _, ub := range lag {
		rec.Blobs = append(rec.Blobs, ub.ID)
	}
	if _, err := x.AddSearchSegment(ctx, rec); err != nil {
		t.Fatal(err)
	}
	segs, err := x.SearchSegments(ctx)
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %+v, %v; want 1", segs, err)
	}
	sg := segs[0]
	id := func(is ...int) []int64 {
		var out []int64
		for _, i := range is {
			out = append(out, rec.Blobs[i])
		}
		return out
	}
	if got, want := sg.InReadingOrder(nil), id(2, 4, 8, 3, 6, 7, 0, 1, 5); !slices.Equal(got, want) {
		t.Errorf("every block: %v, want %v", got, want)
	}
	if got, want := sg.InReadingOrder(func(b int) bool { return b != 1 }), id(2, 4, 8, 0, 1, 5); !slices.Equal(got, want) {
		t.Errorf("blocks 0 and 2: %v, want %v", got, want)
	}
	if got := sg.InReadingOrder(func(int) bool { return false }); len(got) != 0 {
		t.Errorf("no block: %v, want none", got)
	}
	if sg.N != 9 || sg.NBlocks != 3 {
		t.Errorf("%d blobs in %d blocks, want 9 in 3", sg.N, sg.NBlocks)
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

// SearchParts gives the text parts of the blobs named, blob by blob in the
// order given, each blob's parts in the order they were written, with the
// full key, the run's name and the blob given; filters as List's. A blob
// whose id another blob has taken since (gc deleted it, and SQLite gives
// the highest id again) has no parts: they are the other blob's.
func TestSearchParts(t *testing.T) { forEachBackend(t, testSearchParts) }

func testSearchParts(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	shared := newPart("run-b", 1, "bash", "c1", "shared text")
	mustRecord(t, x,
		newPart("run-a", 1, "bash", "c1", "alpha"),
		shared,
		newPart("run-a", 2, "read", "c2", "shared text"),
		newPart("run-a", 3, "bash", "c3", "alpha"), // a second part of alpha's blob
	)
	again := newPart("run-a", 2, "read", "c2", "shared text") // a second version of run-a/2_read_c2.txt
	mustRecord(t, x, again)
	blobs := searchBlobsOf(t, x)
	if len(blobs) != 2 {
		t.Fatalf("%d blobs, want 2", len(blobs))
	}
	alpha, sharedBlob := blobs[0], blobs[1]
	keys := func(o SearchPartsOptions, bs ...SearchBlob) []string {
		t.Helper()
		var got []string
		err := x.SearchParts(ctx, o, bs, func(sp SearchPart) error {
			var want SearchBlob
			for _, b := range bs {
				if b.ID == sp.BlobID {
					want = b
				}
			}
			if sp.Blob != want.Blob || sp.Kind != catalog.KindText {
				t.Errorf("part %s: blob %v, kind %s; want %v, text", sp.Key, sp.Blob, sp.Kind, want.Blob)
			}
			got = append(got, fmt.Sprintf("%s@%d %s", sp.Key, sp.Version, sp.Run))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, tc := range []struct {
		name  string
		o     SearchPartsOptions
		blobs []SearchBlob
		want  []string
	}{
		{"newest versions, blob by blob", SearchPartsOptions{}, []SearchBlob{sharedBlob, alpha, sharedBlob},
			[]string{"run-b/1_bash_c1.txt@1 run-b", "run-a/2_read_c2.txt@2 run-a", "run-a/1_bash_c1.txt@1 run-a", "run-a/3_bash_c3.txt@1 run-a"}},
		{"every version", SearchPartsOptions{AllVersions: true}, []SearchBlob{sharedBlob},
			[]string{"run-b/1_bash_c1.txt@1 run-b", "run-a/2_read_c2.txt@1 run-a", "run-a/2_read_c2.txt@2 run-a"}},
		{"one run", SearchPartsOptions{Run: "run-b"}, []SearchBlob{alpha, sharedBlob}, []string{"run-b/1_bash_c1.txt@1 run-b"}},
		{"one tool", SearchPartsOptions{Tool: "read"}, []SearchBlob{alpha, sharedBlob}, []string{"run-a/2_read_c2.txt@2 run-a"}},
		{"no such run", SearchPartsOptions{Run: "run-c"}, []SearchBlob{alpha, sharedBlob}, nil},
	} {
		if got := keys(tc.o, tc.blobs...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: SearchParts = %q, want %q", tc.name, got, tc.want)
		}
	}

	// The newest blob loses its parts and its row; the next blob written
	// takes its id on SQLite.
	gone := mustRecord(t, x, newPart("run-c", 1, "bash", "c1", "gone soon"))
	blobs = searchBlobsOf(t, x)
	old := blobs[len(blobs)-1]
	if err := x.DeleteParts(ctx, []int64{gone[0].ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.DeleteBlobRows(ctx, []cas.Blob{old.Blob}); err != nil {
		t.Fatal(err)
	}
	mustRecord(t, x, newPart("run-c", 2, "bash", "c2", "written after"))
	blobs = searchBlobsOf(t, x)
	taken := blobs[len(blobs)-1]
	if !onPostgres(t) && taken.ID != old.ID {
		t.Fatalf("the new blob has id %d, the deleted one had %d: SQLite did not give the id again, the test shows nothing", taken.ID, old.ID)
	}
	if got := keys(SearchPartsOptions{}, old); got != nil {
		t.Errorf("SearchParts of a deleted blob whose id %d was taken = %q, want none", old.ID, got)
	}
	if got, want := keys(SearchPartsOptions{}, taken), []string{"run-c/2_bash_c2.txt@1 run-c"}; !slices.Equal(got, want) {
		t.Errorf("SearchParts of the blob that took id %d = %q, want %q", taken.ID, got, want)
	}
}

// SearchBlobs gives the rows of the ids asked for, in the order asked,
// each once, without ids no row has, with the pack of a packed blob.
func TestSearchBlobs(t *testing.T) { forEachBackend(t, testSearchBlobs) }

func testSearchBlobs(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	lag := newBlobs(t, x, 5)
	if err := x.RecordPack(ctx, PackRecord{Name: "pack-1.zst", Size: 10, Raw: 50, Blobs: []cas.Blob{lag[1].Blob, lag[3].Blob}}); err != nil {
		t.Fatal(err)
	}
	id := func(i int) int64 { return lag[i].ID }
	none := id(4) + 1000
	got, err := x.SearchBlobs(ctx, []int64{id(3), id(0), none, id(3), id(4), id(1), id(0)})
	if err != nil {
		t.Fatal(err)
	}
	var order []int64
	for _, sb := range got {
		order = append(order, sb.ID)
	}
	if want := []int64{id(3), id(0), id(4), id(1)}; !slices.Equal(order, want) {
		t.Fatalf("ids %v, want %v", order, want)
	}
	byID := map[int64]UnsearchedBlob{}
	for _, ub := range lag {
		byID[ub.ID] = ub
	}
	for _, sb := range got {
		ub := byID[sb.ID]
		packed := sb.ID == id(1) || sb.ID == id(3)
		if sb.Blob != ub.Blob || sb.Size != ub.Size || sb.Packed != packed || packed != (sb.Pack == "pack-1.zst") {
			t.Errorf("blob %d: %+v; want %s of %d bytes, packed %v (in pack-1.zst)", sb.ID, sb, ub.Blob, ub.Size, packed)
		}
	}
	if got, err := x.SearchBlobs(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("no ids: %v, %v; want none", got, err)
	}
}

// searchBlobsOf returns every blob of x as SearchBlobs reads it, by id.
func searchBlobsOf(t *testing.T, x *Index) []SearchBlob {
	t.Helper()
	ctx := context.Background()
	lag, err := x.UnsearchedBlobs(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, ub := range lag {
		ids = append(ids, ub.ID)
	}
	bs, err := x.SearchBlobs(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// readRunNames adds only the rows it read: a run with no row stays out of
// the map (SearchParts then says so, rather than print a key without its
// run), and asking again reads what the first time could not.
func TestReadRunNamesAddsOnlyRows(t *testing.T) { forEachBackend(t, testReadRunNamesAddsOnlyRows) }

func testReadRunNamesAddsOnlyRows(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	mustRecord(t, x, newPart("run-a", 1, "bash", "c1", "text"))
	var runID int64
	if err := x.db.GetContext(ctx, &runID, x.db.Rebind(`SELECT id FROM runs WHERE name = ?`), "run-a"); err != nil {
		t.Fatal(err)
	}
	runs := map[int64]runName{}
	read := func(runOf map[int64]int64) {
		t.Helper()
		err := x.readTx(ctx, func(tx *sqlx.Tx) error { return x.readRunNames(ctx, tx, runOf, runs) })
		if err != nil {
			t.Fatal(err)
		}
	}
	read(map[int64]int64{1: runID + 1000})
	if r, ok := runs[runID+1000]; ok {
		t.Errorf("a run with no row is in the map as %+v", r)
	}
	read(map[int64]int64{1: runID, 2: runID})
	if r := runs[runID]; r.name != "run-a" || r.prefix != "run-a/" {
		t.Errorf("run %d read as %+v, want run-a with prefix run-a/", runID, r)
	}
}
