package tokens

import "math"

// ranks maps a byte sequence to its token's rank, which is also its id:
// sequences of up to 7 bytes by a number made of them (most lookups, and
// the cheapest to hash and compare), longer ones by themselves.
type ranks struct {
	short map[uint64]int32
	long  map[string]int32
	// pairs holds the ranks of the two-byte sequences, -1 for none: the
	// first lookups of every merge, answered without hashing.
	pairs *[1 << 16]int32
}

func newRanks(m map[string]int) ranks {
	r := ranks{short: make(map[uint64]int32), long: make(map[string]int32), pairs: new([1 << 16]int32)}
	for i := range r.pairs {
		r.pairs[i] = -1
	}
	for k, v := range m {
		if len(k) == 2 {
			r.pairs[int(k[0])<<8|int(k[1])] = int32(v)
		}
		if len(k) <= 7 {
			r.short[shortKey(k)] = int32(v)
		} else {
			r.long[k] = int32(v)
		}
	}
	return r
}

// shortKey packs up to 7 bytes and their number into one word.
func shortKey(s string) uint64 {
	k := uint64(len(s)) << 56
	for i := 0; i < len(s); i++ {
		k |= uint64(s[i]) << (8 * i)
	}
	return k
}

// rank returns the rank of s, and whether it is a token.
func (r ranks) rank(s string) (int, bool) {
	if len(s) == 2 {
		v := r.pairs[int(s[0])<<8|int(s[1])]
		return int(v), v >= 0
	}
	if len(s) <= 7 {
		v, ok := r.short[shortKey(s)]
		return int(v), ok
	}
	v, ok := r.long[s]
	return int(v), ok
}

// countPiece returns the tokens of one piece: one when the whole piece is
// a token, else as many as byte-pair merging leaves.
func (r ranks) countPiece(p string) int {
	if _, ok := r.rank(p); ok {
		return 1
	}
	return len(r.merge(p)) - 1
}

// appendPiece appends the ids of one piece's tokens to ids.
func (r ranks) appendPiece(ids []uint, p string) []uint {
	if id, ok := r.rank(p); ok {
		return append(ids, uint(id))
	}
	b := r.merge(p)
	for k := 0; k+1 < len(b); k++ {
		id, _ := r.rank(p[b[k]:b[k+1]])
		ids = append(ids, uint(id))
	}
	return ids
}

// longPiece is the length from which merge keeps its candidate pairs in a
// heap rather than looking through them all at every merge.
const longPiece = 128

// merge returns the boundaries of p's tokens, from 0 to len(p): starting
// from single bytes, it merges, again and again, the adjacent pair whose
// joined bytes have the lowest rank, the leftmost on a tie, as tiktoken's
// byte_pair_merge does.
func (r ranks) merge(p string) []int {
	if len(p) >= longPiece {
		return r.mergeLong(p)
	}
	// parts[k] is a boundary; rank[k] the rank of p[parts[k]:parts[k+2]].
	var partsBuf [longPiece + 1]int
	var rankBuf [longPiece + 1]int
	parts, rank := partsBuf[:len(p)+1], rankBuf[:len(p)+1]
	for k := range parts {
		parts[k] = k
	}
	pairRank := func(k int) int {
		if k+2 >= len(parts) {
			return math.MaxInt
		}
		if v, ok := r.rank(p[parts[k]:parts[k+2]]); ok {
			return v
		}
		return math.MaxInt
	}
	for k := range len(parts) - 1 {
		rank[k] = pairRank(k)
	}
	rank = rank[:len(parts)-1]
	for len(parts) > 2 {
		best, at := math.MaxInt, -1
		for k, v := range rank[:len(parts)-2] {
			if v < best {
				best, at = v, k
			}
		}
		if at < 0 {
			break
		}
		// Join parts at and at+1 by dropping boundary at+1.
		parts = append(parts[:at+1], parts[at+2:]...)
		rank = append(rank[:at+1], rank[at+2:]...)
		rank[at] = pairRank(at)
		if at > 0 {
			rank[at-1] = pairRank(at - 1)
		}
	}
	return append([]int(nil), parts...)
}

// mergeLong is merge for a long piece (a run of spaces or of one
// character, say): the same merges in the same order, with the candidate
// pairs in a heap ordered by rank, then position, so that a piece of n
// bytes takes O(n log n), not O(n²).
func (r ranks) mergeLong(p string) []int {
	n := len(p)
	// A linked list of the parts: part k spans [k, next[k]); prev links
	// back; gone marks a boundary merged away.
	next := make([]int, n+1)
	prev := make([]int, n+1)
	for k := range next {
		next[k], prev[k] = k+1, k-1
	}
	gone := make([]bool, n+1)
	h := make(pairHeap, 0, n)
	push := func(k int) {
		if k < 0 || k >= n {
			return
		}
		m := next[k]
		if m >= n {
			return
		}
		if v, ok := r.rank(p[k:next[m]]); ok {
			h.push(pair{rank: v, start: k, mid: m, end: next[m]})
		}
	}
	for k := 0; k < n-1; k++ {
		push(k)
	}
	for len(h) > 0 {
		c := h.pop()
		// Skip a pair that an earlier merge changed.
		if gone[c.start] || gone[c.mid] || next[c.start] != c.mid || next[c.mid] != c.end {
			continue
		}
		gone[c.mid] = true
		next[c.start] = c.end
		if c.end <= n {
			prev[c.end] = c.start
		}
		push(prev[c.start])
		push(c.start)
	}
	var out []int
	for k := 0; k < n; k = next[k] {
		out = append(out, k)
	}
	return append(out, n)
}

// pair is a candidate merge of the parts [start, mid) and [mid, end).
type pair struct{ rank, start, mid, end int }

// pairHeap is a binary min-heap of pairs by rank, then start.
type pairHeap []pair

func (h pairHeap) less(i, j int) bool {
	return h[i].rank < h[j].rank || h[i].rank == h[j].rank && h[i].start < h[j].start
}

func (h *pairHeap) push(x pair) {
	*h = append(*h, x)
	q := *h
	for i := len(q) - 1; i > 0; {
		up := (i - 1) / 2
		if !q.less(i, up) {
			break
		}
		q[i], q[up] = q[up], q[i]
		i = up
	}
}

func (h *pairHeap) pop() pair {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		m := l
		if r := l + 1; r < len(q) && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}
