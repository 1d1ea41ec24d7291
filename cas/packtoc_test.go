package cas

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// testTOC returns the frames and entries of a table of contents of n
// blobs in frames of 100, and where its frames end.
func testTOC(n int) ([]packFrame, []PackEntry, int64) {
	var frames []packFrame
	var entries []PackEntry
	var off int64
	for f := 0; f*100 < n; f++ {
		frames = append(frames, packFrame{Off: off, Len: 300, Raw: 100 * 4000})
		off += 300
	}
	for i := range n {
		ext := ".txt"
		if i%7 == 0 {
			ext = ".json"
		}
		entries = append(entries, PackEntry{Blob: Blob{Digest: Sum([]byte(fmt.Sprint(i))), Ext: ext},
			Frame: i / 100, Offset: int64(i%100) * 4000, Size: 4000})
	}
	slices.SortFunc(entries, func(a, b PackEntry) int { return compareEntries(a.Blob, b.Blob) })
	return frames, entries, off
}

func TestTOCRoundTrip(t *testing.T) {
	frames, entries, end := testTOC(1000)
	b := marshalTOC(frames, entries)
	got, err := unmarshalTOC(b, end)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.frames, frames) || !reflect.DeepEqual(got.entries(), entries) {
		t.Errorf("table of contents changed in a round trip")
	}
	// Every cut, and a byte after the end, is an error that says the
	// table is damaged, never a shorter table.
	for _, n := range []int{0, 1, 2, 5, 40, 41, len(b) / 2, len(b) - 1} {
		if _, err := unmarshalTOC(b[:n], end); !errors.Is(err, errTOC) {
			t.Errorf("a table cut at %d of %d bytes: %v, want errTOC", n, len(b), err)
		}
	}
	if _, err := unmarshalTOC(append(slices.Clone(b), 0), end); !errors.Is(err, errTOC) {
		t.Errorf("a byte after the last entry: %v, want errTOC", err)
	}
	for _, ext := range []string{"", "txt", ".a/b"} {
		bad := slices.Clone(entries)
		bad[len(bad)/2].Blob.Ext = ext
		if _, err := unmarshalTOC(marshalTOC(frames, bad), end); !errors.Is(err, errTOC) {
			t.Errorf("an entry with extension %q: %v, want errTOC", ext, err)
		}
	}
	bad := slices.Clone(b)
	bad[0] = tocVersion + 1
	if _, err := unmarshalTOC(bad, end); !errors.Is(err, errTOC) {
		t.Errorf("another version: %v, want errTOC", err)
	}
}

// TestTOCFind looks up every entry of tables of every size around the
// marks' spacing, and blobs a table does not hold: before its first entry,
// between two, after its last, and a held digest with another extension.
func TestTOCFind(t *testing.T) {
	for _, n := range []int{1, 2, tocMarkEvery - 1, tocMarkEvery, tocMarkEvery + 1, 2 * tocMarkEvery, 333} {
		frames, entries, end := testTOC(n)
		toc, err := unmarshalTOC(marshalTOC(frames, entries), end)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if got, ok := toc.find(e.Blob); !ok || got != e {
				t.Errorf("%d entries: find(%s) = %+v, %v, want %+v", n, e.Blob, got, ok, e)
			}
			for _, other := range []string{"", ".bin", ".txt", ".json"} {
				if other == e.Blob.Ext {
					continue
				}
				b := Blob{Digest: e.Blob.Digest, Ext: other}
				if got, ok := toc.find(b); ok {
					t.Errorf("%d entries: find(%s) = %+v, want none", n, b, got)
				}
			}
		}
		absent := []Blob{{Ext: ".txt"}, {Digest: Digest{0xff, 0xff, 0xff, 0xff}, Ext: ".txt"}}
		for i := 0; i+1 < len(entries); i++ {
			d := entries[i].Blob.Digest
			d[DigestSize-1]++ // between entries i and i+1, unless it is i+1
			if d != entries[i+1].Blob.Digest {
				absent = append(absent, Blob{Digest: d, Ext: entries[i].Blob.Ext})
			}
		}
		for _, b := range absent {
			if got, ok := toc.find(b); ok {
				t.Errorf("%d entries: find(%s) = %+v, want none", n, b, got)
			}
		}
	}
}

func BenchmarkUnmarshalTOC(b *testing.B) {
	frames, entries, end := testTOC(100_000)
	buf := marshalTOC(frames, entries)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, err := unmarshalTOC(buf, end); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTOCFind(b *testing.B) {
	frames, entries, end := testTOC(100_000)
	toc, err := unmarshalTOC(marshalTOC(frames, entries), end)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		if _, ok := toc.find(entries[i%len(entries)].Blob); !ok {
			b.Fatal("not found")
		}
		i += 7919
	}
}
