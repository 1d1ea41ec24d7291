package search

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// A Set is a set of positions in a segment (the blobs indexed together),
// one bit each.
type Set []uint64

// NewSet returns an empty set for a segment of n blobs.
func NewSet(n int) Set { return make(Set, (n+63)/64) }

// FullSet returns the set of every position of a segment of n blobs.
func FullSet(n int) Set {
	s := NewSet(n)
	for i := range s {
		s[i] = ^uint64(0)
	}
	if r := n % 64; r != 0 {
		s[len(s)-1] = 1<<r - 1
	}
	return s
}

// Add adds position i.
func (s Set) Add(i int) { s[i/64] |= 1 << (i % 64) }

// Has reports whether position i is in the set.
func (s Set) Has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }

// Len counts the positions in the set.
func (s Set) Len() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// Each calls fn with each position of the set, in increasing order.
func (s Set) Each(fn func(int)) {
	for i, w := range s {
		for w != 0 {
			fn(i*64 + bits.TrailingZeros64(w))
			w &= w - 1
		}
	}
}

func (s Set) and(t Set) {
	for i := range s {
		s[i] &= t[i]
	}
}

func (s Set) or(t Set) {
	for i := range s {
		s[i] |= t[i]
	}
}

// Posting list encodings. An empty list holds every position of its
// segment; otherwise the first byte says how the rest holds them.
const (
	postingDeltas = 0 // unsigned varints: the first position, then each gap minus one
	postingBitmap = 1 // one bit a position, little-endian
)

// ErrBadPosting is returned by DecodePosting for a list that does not
// decode: the index is damaged.
var ErrBadPosting = errors.New("search: damaged posting list")

// EncodePosting encodes the positions (increasing, each below n) of a
// segment of n blobs in the smaller of the two encodings, or as nothing
// when they are all n.
func EncodePosting(positions []int, n int) []byte {
	if len(positions) == n {
		return []byte{}
	}
	var d []byte
	if len(positions)*8 < n { // a bitmap takes n/8 bytes; deltas at least one a position
		d = append(make([]byte, 0, 1+len(positions)), postingDeltas)
		prev := -1
		for _, p := range positions {
			d = binary.AppendUvarint(d, uint64(p-prev-1))
			prev = p
		}
		if len(d) <= 1+(n+7)/8 {
			return d
		}
	}
	b := make([]byte, 1+(n+7)/8)
	b[0] = postingBitmap
	for _, p := range positions {
		b[1+p/8] |= 1 << (p % 8)
	}
	return b
}

// DecodePosting decodes a posting list of a segment of n blobs into a Set.
func DecodePosting(b []byte, n int) (Set, error) {
	if len(b) == 0 {
		return FullSet(n), nil
	}
	s := NewSet(n)
	switch b[0] {
	case postingDeltas:
		p := -1
		for rest := b[1:]; len(rest) > 0; {
			gap, k := binary.Uvarint(rest)
			if k <= 0 || gap >= uint64(n) {
				return nil, fmt.Errorf("%w: bad gap", ErrBadPosting)
			}
			rest = rest[k:]
			p += int(gap) + 1
			if p >= n {
				return nil, fmt.Errorf("%w: position %d past the segment's %d blobs", ErrBadPosting, p, n)
			}
			s.Add(p)
		}
	case postingBitmap:
		if len(b)-1 != (n+7)/8 {
			return nil, fmt.Errorf("%w: a bitmap of %d bytes for %d blobs", ErrBadPosting, len(b)-1, n)
		}
		for i, c := range b[1:] {
			s[i/8] |= uint64(c) << (8 * (i % 8))
		}
		if r := n % 64; r != 0 && s[len(s)-1]>>r != 0 {
			return nil, fmt.Errorf("%w: bits past the segment's %d blobs", ErrBadPosting, n)
		}
	default:
		return nil, fmt.Errorf("%w: unknown encoding %d", ErrBadPosting, b[0])
	}
	return s, nil
}

// EvalSet returns the positions of a segment of n blobs whose trigrams
// satisfy q, given each needed trigram's posting set (nil when no blob of
// the segment has it).
func (q *Query) EvalSet(n int, posting func(Trigram) Set) Set {
	switch q.Op {
	case All:
		return FullSet(n)
	case None:
		return NewSet(n)
	case And:
		s := FullSet(n)
		for _, t := range q.Trigrams {
			p := posting(t)
			if p == nil {
				return NewSet(n)
			}
			s.and(p)
		}
		for _, sub := range q.Sub {
			s.and(sub.EvalSet(n, posting))
		}
		return s
	}
	s := NewSet(n)
	for _, t := range q.Trigrams {
		if p := posting(t); p != nil {
			s.or(p)
		}
	}
	for _, sub := range q.Sub {
		s.or(sub.EvalSet(n, posting))
	}
	return s
}

// A Builder gathers the trigrams of a segment's blobs, one blob at a time
// at positions 0, 1, 2, …, and gives back their posting lists.
type Builder struct {
	n     int
	lists map[Trigram][]int
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder { return &Builder{lists: make(map[Trigram][]int)} }

// Add adds the next blob's trigrams and returns its position.
func (b *Builder) Add(trigrams []Trigram) int {
	pos := b.n
	for _, t := range trigrams {
		b.lists[t] = append(b.lists[t], pos)
	}
	b.n++
	return pos
}

// Len returns how many blobs were added.
func (b *Builder) Len() int { return b.n }

// Postings calls fn with each trigram and its encoded posting list, in
// increasing order of trigram.
func (b *Builder) Postings(fn func(Trigram, []byte) error) error {
	keys := make([]Trigram, 0, len(b.lists))
	for t := range b.lists {
		keys = append(keys, t)
	}
	slices.Sort(keys)
	for _, t := range keys {
		if err := fn(t, EncodePosting(b.lists[t], b.n)); err != nil {
			return err
		}
	}
	return nil
}

// Posting lists are stored a group of trigrams at a time: the trigrams of
// a segment that share their first byte, one row each in the index. A row
// a trigram would repeat its trigram and segment beside a list that is
// often only a few bytes long; a group row holds a few kilobytes and is
// compressed whole.

// GroupOf returns the group of trigram t: its first byte.
func GroupOf(t Trigram) uint32 { return t >> 16 }

// A group's body is a list of (the trigram's low 16 bits as the gap from
// the one before, minus one; the list's length; the list), all unsigned
// varints but the list, stored as Compact makes it.

// maxGroupBody bounds a group's body: 65,536 trigrams, each a list of at
// most 1 + 4,096/8 bytes (a segment holds at most 4,096 blocks) and its
// two varints. A damaged or hostile row never makes a decoder allocate
// more.
const maxGroupBody = 1 << 16 * (1 + 4096/8 + 3 + 2)

// Compact encodings: the first byte says how the rest holds the bytes.
const (
	compactPlain = 0 // as they are
	compactZstd  = 1 // in one zstd frame
)

var (
	compactEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1))
	compactDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxGroupBody))
)

// Compact returns b compressed with zstd behind a byte that says so, or
// as it is behind a byte that says that, whichever is smaller. The index
// stores its posting groups and segments' blob lists so: they are written
// once and read by every search.
func Compact(b []byte) []byte {
	z := compactEncoder.EncodeAll(b, []byte{compactZstd})
	if len(z) >= 1+len(b) {
		z = append(append(z[:0], compactPlain), b...)
	}
	return z
}

// Expand returns the bytes that Compact made data of, or ErrBadPosting
// when data is not such, or holds more than limit bytes (at most
// maxGroupBody).
func Expand(data []byte, limit int) ([]byte, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrBadPosting)
	}
	switch data[0] {
	case compactPlain:
		if len(data)-1 > limit {
			return nil, fmt.Errorf("%w: %d bytes, at most %d expected", ErrBadPosting, len(data)-1, limit)
		}
		return data[1:], nil
	case compactZstd:
		b, err := compactDecoder.DecodeAll(data[1:], nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadPosting, err)
		}
		if len(b) > limit {
			return nil, fmt.Errorf("%w: %d bytes, at most %d expected", ErrBadPosting, len(b), limit)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%w: unknown encoding %d", ErrBadPosting, data[0])
}

// A GroupWriter encodes the posting lists of one group, trigram by
// trigram in increasing order.
type GroupWriter struct {
	body []byte
	prev int
}

// Add appends trigram t's posting list. Trigrams come in increasing order,
// all of one group.
func (w *GroupWriter) Add(t Trigram, list []byte) {
	if len(w.body) == 0 {
		w.prev = -1
	}
	low := int(t & 0xffff)
	w.body = binary.AppendUvarint(w.body, uint64(low-w.prev-1))
	w.body = binary.AppendUvarint(w.body, uint64(len(list)))
	w.body = append(w.body, list...)
	w.prev = low
}

// Bytes returns the group encoded (see Compact), and resets w for the
// next group.
func (w *GroupWriter) Bytes() []byte {
	z := Compact(w.body)
	w.body = w.body[:0]
	return z
}

// DecodeGroup calls fn with each trigram of group g's encoded lists and
// its posting list, in increasing order of trigram. The lists are parts
// of one buffer that fn may keep.
func DecodeGroup(g uint32, data []byte, fn func(Trigram, []byte)) error {
	body, err := Expand(data, maxGroupBody)
	if err != nil {
		return fmt.Errorf("group %d: %w", g, err)
	}
	low := -1
	for len(body) > 0 {
		gap, k := binary.Uvarint(body)
		if k <= 0 || gap > 0xffff || low+int(gap)+1 > 0xffff {
			return fmt.Errorf("%w: group %d: bad trigram gap", ErrBadPosting, g)
		}
		body = body[k:]
		low += int(gap) + 1
		n, k := binary.Uvarint(body)
		if k <= 0 || n > uint64(len(body)-k) {
			return fmt.Errorf("%w: group %d: a list longer than its group", ErrBadPosting, g)
		}
		body = body[k:]
		fn(g<<16|Trigram(low), body[:n:n])
		body = body[n:]
	}
	return nil
}
