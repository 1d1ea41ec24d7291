package cas

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// testTOC returns a table of contents of n blobs in frames of 100, and
// where its frames end.
func testTOC(n int) (*packTOC, int64) {
	t := &packTOC{}
	var off int64
	for f := 0; f*100 < n; f++ {
		t.frames = append(t.frames, packFrame{Off: off, Len: 300, Raw: 100 * 4000})
		off += 300
	}
	for i := range n {
		ext := ".txt"
		if i%7 == 0 {
			ext = ".json"
		}
		t.entries = append(t.entries, PackEntry{Blob: Blob{Digest: Sum([]byte(fmt.Sprint(i))), Ext: ext},
			Frame: i / 100, Offset: int64(i%100) * 4000, Size: 4000})
	}
	slices.SortFunc(t.entries, func(a, b PackEntry) int { return compareEntries(a.Blob, b.Blob) })
	return t, off
}

func TestTOCRoundTrip(t *testing.T) {
	want, end := testTOC(1000)
	b := want.marshal()
	got, err := unmarshalTOC(b, end)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
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
	bad := slices.Clone(b)
	bad[0] = tocVersion + 1
	if _, err := unmarshalTOC(bad, end); !errors.Is(err, errTOC) {
		t.Errorf("another version: %v, want errTOC", err)
	}
}

func BenchmarkUnmarshalTOC(b *testing.B) {
	toc, end := testTOC(100_000)
	buf := toc.marshal()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, err := unmarshalTOC(buf, end); err != nil {
			b.Fatal(err)
		}
	}
}
