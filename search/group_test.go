package search

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// groupLists makes the posting lists of n trigrams of group g, spread
// over the group's 65,536, for a segment of blocks blocks.
func groupLists(r *rand.Rand, g uint32, n, blocks int) ([]Trigram, [][]byte) {
	seen := map[Trigram]bool{}
	var ts []Trigram
	for len(ts) < n {
		t := g<<16 | Trigram(r.IntN(1<<16))
		if !seen[t] {
			seen[t] = true
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	lists := make([][]byte, n)
	for i := range ts {
		var pos []int
		for p := range blocks {
			if r.IntN(8) == 0 {
				pos = append(pos, p)
			}
		}
		lists[i] = EncodePosting(pos, blocks)
	}
	return ts, lists
}

func TestGroupRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var w GroupWriter
	for _, c := range []struct {
		g         uint32
		n, blocks int
	}{{'a', 1, 1}, {'a', 3, 64}, {' ', 500, 300}, {0, 2000, 4096}, {0xff, 40, 9}} {
		ts, lists := groupLists(r, c.g, c.n, c.blocks)
		if c.g == 0xff {
			ts[0], ts[len(ts)-1] = 0xff0000, 0xffffff // the first and last of a group
			slices.Sort(ts)
		}
		for i, tg := range ts {
			w.Add(tg, lists[i])
		}
		data := w.Bytes()
		i := 0
		err := DecodeGroup(c.g, data, func(tg Trigram, list []byte) {
			if i >= len(ts) || tg != ts[i] || !bytes.Equal(list, lists[i]) {
				t.Errorf("group %#x: entry %d = %#x %x, want %#x %x", c.g, i, tg, list, ts[min(i, len(ts)-1)], lists[min(i, len(ts)-1)])
			}
			i++
		})
		if err != nil || i != len(ts) {
			t.Errorf("group %#x of %d trigrams: %d decoded, %v", c.g, len(ts), i, err)
		}
	}
}

// A group that zstd cannot shrink is kept plain, and one that it can is
// compressed.
func TestGroupCompressesWhenSmaller(t *testing.T) {
	var w GroupWriter
	w.Add('a'<<16|'b'<<8|'c', []byte{postingDeltas, 3})
	if data := w.Bytes(); data[0] != compactPlain {
		t.Errorf("a group of one short list: encoding %d, want plain", data[0])
	}
	for i := range 1000 {
		w.Add('a'<<16|Trigram(i), []byte{postingDeltas, 1, 2, 3})
	}
	data := w.Bytes()
	if data[0] != compactZstd || len(data) > 1000 {
		t.Errorf("1,000 like lists: encoding %d in %d bytes, want zstd and under 1,000", data[0], len(data))
	}
}

func TestGroupDamaged(t *testing.T) {
	var w GroupWriter
	for i := range 1000 {
		w.Add('x'<<16|Trigram(2*i), []byte{postingDeltas, byte(i)})
	}
	z := w.Bytes()
	if z[0] != compactZstd {
		t.Fatalf("encoding %d, want zstd", z[0])
	}
	cut := bytes.Clone(z[:len(z)-5])
	flipped := bytes.Clone(z)
	flipped[len(flipped)/2] ^= 0xff
	for name, data := range map[string][]byte{
		"empty":              {},
		"unknown encoding":   {7, 1, 2},
		"zstd cut short":     cut,
		"zstd damaged":       flipped,
		"list past the end":  {compactPlain, 0, 5, 1, 2},
		"gap past the group": {compactPlain, 0xff, 0xff, 0x04, 0},
		"second gap past":    {compactPlain, 0xfe, 0xff, 0x03, 0, 1, 0},
		"truncated varint":   {compactPlain, 0x80},
	} {
		err := DecodeGroup('x', data, func(Trigram, []byte) {})
		if !errors.Is(err, ErrBadPosting) {
			t.Errorf("%s: DecodeGroup = %v, want ErrBadPosting", name, err)
		}
	}
}

func FuzzDecodeGroup(f *testing.F) {
	var w GroupWriter
	for i := range 50 {
		w.Add('q'<<16|Trigram(7*i), []byte{postingBitmap, byte(i)})
	}
	f.Add(w.Bytes())
	f.Add([]byte{compactPlain, 0, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		prev := Trigram(0)
		first := true
		err := DecodeGroup('q', data, func(tg Trigram, list []byte) {
			if GroupOf(tg) != 'q' || !first && tg <= prev {
				t.Fatalf("trigram %#x after %#x in group 'q'", tg, prev)
			}
			prev, first = tg, false
		})
		if err != nil && !errors.Is(err, ErrBadPosting) {
			t.Fatalf("error %v is not ErrBadPosting", err)
		}
	})
}
