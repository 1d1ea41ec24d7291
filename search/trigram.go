package search

import "slices"

// A Trigram is three bytes of text, as they are (case matters), packed
// into the low 24 bits.
type Trigram = uint32

// fold lowers an ASCII capital letter; every other byte is itself.
func fold(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func trigramOf(a, b, c byte) Trigram {
	return Trigram(a)<<16 | Trigram(b)<<8 | Trigram(c)
}

// An Extractor lists the distinct trigrams of texts. It keeps a 2 MiB set
// between calls, so that listing them costs a pass over the text and a sort
// of what it found; it is not safe for concurrent use.
type Extractor struct {
	seen []uint64
	list []Trigram
}

// NewExtractor returns an empty Extractor.
func NewExtractor() *Extractor { return &Extractor{seen: make([]uint64, 1<<24/64)} }

// Reset forgets the trigrams added so far.
func (e *Extractor) Reset() {
	for _, t := range e.list {
		e.seen[t>>6] = 0
	}
	e.list = e.list[:0]
}

// Add adds the trigrams of text that do not span a line break. Text given
// in pieces should overlap by two bytes: Add(p[i-2:]) after Add(p[:i]).
func (e *Extractor) Add(text []byte) {
	if len(text) < 3 {
		return
	}
	a, b := text[0], text[1]
	for _, c := range text[2:] {
		if a != '\n' && b != '\n' && c != '\n' {
			t := Trigram(a)<<16 | Trigram(b)<<8 | Trigram(c)
			if w, bit := t>>6, uint64(1)<<(t&63); e.seen[w]&bit == 0 {
				e.seen[w] |= bit
				e.list = append(e.list, t)
			}
		}
		a, b = b, c
	}
}

// Trigrams returns the distinct trigrams added since the last Reset, in
// increasing order. The slice is the Extractor's until the next call.
func (e *Extractor) Trigrams() []Trigram {
	slices.Sort(e.list)
	return e.list
}

// Has reports whether t was added since the last Reset.
func (e *Extractor) Has(t Trigram) bool { return e.seen[t>>6]&(uint64(1)<<(t&63)) != 0 }
