package tokens

import (
	"math"
	"strings"
	"testing"
)

// TestCacheStartsEmpty checks that what one count remembers never serves
// another: a cache used by counts before, under another encoding, at any
// generation, about to wrap among them, counts as if it held nothing.
func TestCacheStartsEmpty(t *testing.T) {
	o200k, err := NewExact(O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	cl100k, err := NewExact(Cl100kBase)
	if err != nil {
		t.Fatal(err)
	}
	// The same pieces count differently under the two encodings, so a
	// count served from the other encoding's entries would be wrong.
	text := strings.Repeat("naïve résumé 12345 ", 50)
	want := map[*Exact]int{o200k: len(o200k.Tokens(text)), cl100k: len(cl100k.Tokens(text))}
	if want[o200k] == want[cl100k] {
		t.Fatalf("the text counts %d under both encodings: the test needs one that differs", want[o200k])
	}
	for _, gen := range []uint32{0, 1, math.MaxUint32 - 1, math.MaxUint32} {
		c := &pieceCache{gen: gen}
		for _, e := range []*Exact{o200k, cl100k, o200k, cl100k} {
			if got := e.countWith(c, text, math.MaxInt); got != want[e] {
				t.Errorf("generation %d, %s: CountText = %d, want %d", gen, e.Name(), got, want[e])
			}
		}
	}
}

// TestCacheMatchesMerge counts pieces of every length around the longest
// one the cache keeps, each twice in one count: the second must come from
// the cache and agree with the first.
func TestCacheMatchesMerge(t *testing.T) {
	e, err := NewExact(O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= cacheMax+2; n++ {
		word := strings.Repeat("q", n)
		text := word + " " + word + " " + word
		if got, want := e.CountText(text), len(e.Tokens(text)); got != want {
			t.Errorf("%d-byte word: CountText = %d, want %d", n, got, want)
		}
	}
}
