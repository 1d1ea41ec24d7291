package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
	"github.com/toolcas/toolcas/index"
)

// The mark reads the rows that parts use by their digests' first eight
// bytes alone (blobs_digest's key). These tests make rows and files whose
// digests share a key, or a digest and not an extension, and check that gc
// still tells them apart where it matters.

// keyTwin returns a digest whose first eight bytes are d's and whose last
// byte is not: another blob of the same key.
func keyTwin(d cas.Digest) cas.Digest {
	d[cas.DigestSize-1] ^= 0xff
	return d
}

// recordRow records a part of run using blob b, with no file: the index
// row alone, for a digest no content need have.
func recordRow(t *testing.T, s *Store, run string, b cas.Blob) {
	t.Helper()
	p := index.NewPart{Key: fmt.Sprintf("%s/1_t_c%s", run, b.Ext), Run: run, Step: 1, Tool: "t", CallID: "c", Part: -1,
		Kind: catalog.KindText, MIME: "text/plain", Chars: 4, Bytes: 4, Blob: b}
	if _, err := s.ix.Record(context.Background(), []index.NewPart{p}); err != nil {
		t.Fatal(err)
	}
}

// plantFile writes a blob file named for b, whatever its bytes hash to.
func plantFile(t *testing.T, s *Store, b cas.Blob) {
	t.Helper()
	p := localOf(s).blobs.Path(b)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("blob"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGCTellsApartBlobsOfOneKey: rows and files whose digests share their
// first eight bytes. A file no row names goes though a used row shares its
// key (another digest, or the same digest with another extension); files
// of rows that share a key stay; a used row whose file is gone is found
// missing though another file of its key is there. Where a key has as many
// files as used rows, the files are taken as theirs: a row whose file is
// gone, beside an orphan of its key, keeps the orphan (gc keeps garbage,
// never removes a blob in use).
func TestGCTellsApartBlobsOfOneKey(t *testing.T) {
	x := cas.Blob{Digest: cas.Sum([]byte("x")), Ext: ".txt"}
	y := cas.Blob{Digest: keyTwin(x.Digest), Ext: ".txt"}
	xJSON := cas.Blob{Digest: x.Digest, Ext: ".json"}
	if index.KeyOf(x.Digest) != index.KeyOf(y.Digest) || x.Digest == y.Digest {
		t.Fatal("the twins do not share a key")
	}
	for _, tc := range []struct {
		name         string
		used, unused []cas.Blob
		files        []cas.Blob
		removed      []cas.Blob
		missing      bool
		// kept are files that must stay, whatever else gc does.
		kept []cas.Blob
	}{
		{name: "an orphan sharing a used row's key", used: []cas.Blob{x}, files: []cas.Blob{x, y},
			removed: []cas.Blob{y}},
		{name: "the same digest with another extension", used: []cas.Blob{x}, files: []cas.Blob{x, xJSON},
			removed: []cas.Blob{xJSON}},
		{name: "two used rows of one key", used: []cas.Blob{x, y}, files: []cas.Blob{x, y}},
		{name: "two used rows of one digest", used: []cas.Blob{x, xJSON}, files: []cas.Blob{x, xJSON}},
		{name: "an unused row sharing a used row's key", used: []cas.Blob{x}, unused: []cas.Blob{y}, files: []cas.Blob{x, y},
			removed: []cas.Blob{y}},
		{name: "a used row's file gone beside another row's of its key", used: []cas.Blob{x, y}, files: []cas.Blob{y},
			missing: true},
		{name: "a used row's file gone beside one of another extension", used: []cas.Blob{x, xJSON}, files: []cas.Blob{xJSON},
			missing: true},
		{name: "a used row's file gone, an orphan of its key there", used: []cas.Blob{x}, files: []cas.Blob{y},
			kept: []cas.Blob{y}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := MustOpen(t)
			for i, b := range tc.used {
				recordRow(t, s, fmt.Sprint("used-", i), b)
			}
			for i, b := range tc.unused {
				run := fmt.Sprint("unused-", i)
				recordRow(t, s, run, b)
				if _, err := s.Prune(ctx, PruneOptions{Run: run}); err != nil {
					t.Fatal(err)
				}
			}
			for _, b := range tc.files {
				plantFile(t, s, b)
			}
			res, err := s.GC(ctx, GCOptions{Grace: 0})
			if tc.missing {
				if !errors.Is(err, ErrMissingBlobs) {
					t.Fatalf("gc = %+v, %v; want %v", res, err, ErrMissingBlobs)
				}
			} else if err != nil {
				t.Fatalf("gc: %v", err)
			}
			if !tc.missing && !slices.Equal(res.Removed, tc.removed) {
				t.Errorf("gc removed %v, want %v", res.Removed, tc.removed)
			}
			for _, b := range tc.files {
				_, err := os.Stat(localOf(s).blobs.Path(b))
				gone := slices.Contains(tc.removed, b) && !tc.missing
				switch {
				case gone && !os.IsNotExist(err):
					t.Errorf("%s kept: %v", b, err)
				case !gone && err != nil:
					t.Errorf("%s removed: %v", b, err)
				}
			}
			for _, b := range tc.kept {
				if _, err := os.Stat(localOf(s).blobs.Path(b)); err != nil {
					t.Errorf("%s removed: %v", b, err)
				}
			}
			// The used rows stay, and the unused ones go with their files.
			for _, b := range tc.used {
				if _, err := s.ix.Blob(ctx, b); err != nil {
					t.Errorf("row of %s: %v", b, err)
				}
			}
		})
	}
}

// TestMatchByKey matches rows known by key alone, in the order of their
// keys, with a shard's files: a key with as many files as rows takes them,
// one with more or fewer has its rows read whole, and files of keys no row
// has stay.
func TestMatchByKey(t *testing.T) {
	blob := func(first byte, last byte, ext string) cas.Blob {
		var d cas.Digest
		d[0], d[cas.DigestSize-1] = first, last
		return cas.Blob{Digest: d, Ext: ext}
	}
	a, a2, aJSON := blob(0x0a, 1, ".txt"), blob(0x0a, 2, ".txt"), blob(0x0a, 1, ".json")
	b, c, d := blob(0x0b, 1, ".txt"), blob(0x0c, 1, ".txt"), blob(0x0d, 1, ".txt")
	row := func(id int64, bl cas.Blob) index.BlobKey { return index.BlobKey{ID: id, Key: index.KeyOf(bl.Digest)} }
	entries := func(bs ...cas.Blob) map[cas.Blob]cas.Entry {
		m := map[cas.Blob]cas.Entry{}
		for _, bl := range bs {
			m[bl] = cas.Entry{Kind: cas.EntryBlob, Blob: bl, RelPath: bl.RelPath()}
		}
		return m
	}
	for _, tc := range []struct {
		name          string
		rows          []index.BlobKey
		loose, inPack map[cas.Blob]cas.Entry
		whole         []int64
		left          []cas.Blob
	}{
		{name: "one row, one file", rows: []index.BlobKey{row(1, a)}, loose: entries(a), inPack: entries()},
		{name: "a file of another key stays", rows: []index.BlobKey{row(1, a)}, loose: entries(a, b), inPack: entries(),
			left: []cas.Blob{b}},
		{name: "two files of one key, one row", rows: []index.BlobKey{row(1, a)}, loose: entries(a, a2), inPack: entries(),
			whole: []int64{1}, left: []cas.Blob{a, a2}},
		{name: "another extension", rows: []index.BlobKey{row(1, a)}, loose: entries(a, aJSON), inPack: entries(),
			whole: []int64{1}, left: []cas.Blob{a, aJSON}},
		{name: "two rows of one key, one file", rows: []index.BlobKey{row(1, a), row(2, a2)}, loose: entries(a2), inPack: entries(),
			whole: []int64{1, 2}, left: []cas.Blob{a2}},
		{name: "a row with no file", rows: []index.BlobKey{row(1, a), row(3, c)}, loose: entries(a), inPack: entries(),
			whole: []int64{3}},
		{name: "a loose and a packed copy are one file", rows: []index.BlobKey{row(1, a)}, loose: entries(a), inPack: entries(a)},
		{name: "packed files count too", rows: []index.BlobKey{row(1, a), row(4, d)}, loose: entries(a), inPack: entries(a2, d),
			whole: []int64{1}, left: []cas.Blob{a, a2}},
		{name: "keys of their own", rows: []index.BlobKey{row(1, a), row(2, b), row(4, d)}, loose: entries(a, b, d), inPack: entries()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole := matchByKey(tc.rows, tc.loose, tc.inPack, map[index.DigestKey]int{})
			slices.Sort(whole)
			if !slices.Equal(whole, tc.whole) {
				t.Errorf("rows to read whole %v, want %v", whole, tc.whole)
			}
			var left []cas.Blob
			for bl := range tc.loose {
				left = append(left, bl)
			}
			for bl := range tc.inPack {
				if _, ok := tc.loose[bl]; !ok {
					left = append(left, bl)
				}
			}
			slices.SortFunc(left, byFileName)
			want := slices.Clone(tc.left)
			slices.SortFunc(want, byFileName)
			if !slices.Equal(left, want) {
				t.Errorf("files left %v, want %v", left, want)
			}
		})
	}
}

// TestGCCountsEachCopyOnce: a blob no row names that is both in a pack and
// loose is two candidates, one a copy: a dry run counts its packed copy as
// unused packed bytes and its loose copy as a file to remove, each once.
// (Counting the packed copy alone left the loose file for good.)
func TestGCCountsEachCopyOnce(t *testing.T) {
	ctx := context.Background()
	s, c, want, stored := packedStore(t)
	if _, err := s.Prune(ctx, PruneOptions{Run: "c"}); err != nil {
		t.Fatal(err)
	}
	var dead []cas.Blob
	for key, st := range stored {
		if key[0] == 'c' {
			dead = append(dead, blobOf(t, s, st))
		}
	}
	if _, err := s.ix.DeleteBlobRows(ctx, dead); err != nil {
		t.Fatal(err)
	}
	// A loose copy of one of them, as a pack that stopped before removing
	// the loose files leaves.
	var copied cas.Blob
	for key, st := range stored {
		if key[0] == 'c' {
			copied = blobOf(t, s, st)
			p := localOf(s).blobs.Path(copied)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, want[key], 0o644); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	c.t = c.t.Add(2 * DefaultGrace)
	res, err := s.GC(ctx, GCOptions{Grace: DefaultGrace, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.UnusedPacked != len(dead) || res.RemovedBlobs != 1 || !slices.Equal(res.Removed, []cas.Blob{copied}) {
		t.Errorf("dry run = %d unused packed, %d removed %v; want %d and the loose copy of %s",
			res.UnusedPacked, res.RemovedBlobs, res.Removed, len(dead), copied)
	}
}
