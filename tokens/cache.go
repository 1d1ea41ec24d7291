package tokens

import (
	"encoding/binary"
	"sync"
)

// A text repeats its words: a count remembers the pieces of up to 16
// bytes it has counted, so that a piece seen again costs a hash and a
// comparison, not a merge. The memory is reused from count to count (a
// pool), but what it holds is not: each count starts with none of it, so
// a count's cost never depends on the texts counted before.

const (
	cacheBits = 12
	cacheMax  = 16 // the longest piece remembered
)

type cacheEntry struct {
	a, b uint64 // the piece's bytes, zero-padded
	gen  uint32 // the count that wrote the entry
	len  uint8
	n    int32 // the piece's tokens
}

type pieceCache struct {
	gen     uint32
	entries [1 << cacheBits]cacheEntry
}

var caches = sync.Pool{New: func() any { return new(pieceCache) }}

// empty makes the cache hold nothing valid for the count to come.
func (c *pieceCache) empty() {
	c.gen++
	if c.gen == 0 { // wrapped: entries of generation 0 must not match
		clear(c.entries[:])
		c.gen = 1
	}
}

// count returns the tokens of p, from the cache when this count has seen
// p before.
func (c *pieceCache) count(r *ranks, p string) int {
	if len(p) > cacheMax || len(p) == 1 {
		return r.countPiece(p)
	}
	var buf [cacheMax]byte
	copy(buf[:], p)
	a, b := binary.LittleEndian.Uint64(buf[:8]), binary.LittleEndian.Uint64(buf[8:])
	h := (a*0x9e3779b97f4a7c15 ^ b*0xc2b2ae3d27d4eb4f ^ uint64(len(p))) * 0x165667b19e3779f9
	e := &c.entries[h>>(64-cacheBits)]
	if e.gen == c.gen && e.a == a && e.b == b && int(e.len) == len(p) {
		return int(e.n)
	}
	n := r.countPiece(p)
	*e = cacheEntry{a: a, b: b, gen: c.gen, len: uint8(len(p)), n: int32(n)}
	return n
}
