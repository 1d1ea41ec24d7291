package index

import (
	"bytes"

	"github.com/toolcas/toolcas/cas"
)

// The blobs table is indexed by the first digestKeyLen bytes of each
// digest (blobs_digest, an index of the expression substr(digest, 1, 8)):
// entries a third as wide as the whole digest and extension, so that the
// index's random inserts split fewer pages of the write-ahead log. A
// lookup by digest names that expression, with the digest's start as its
// argument, and compares the whole digest too.
const digestKeyLen = 8

// digestIs is the condition that a blobs row, read without an alias, has
// the digest of digestArgs; blobDigestIs is it for a row read as b.
const (
	digestIs     = `substr(digest, 1, 8) = ? AND digest = ?`
	blobDigestIs = `substr(b.digest, 1, 8) = ? AND b.digest = ?`
)

// digestArgs returns the arguments of digestIs: the digest's start, which
// blobs_digest holds, and the whole digest.
func digestArgs(d cas.Digest) []any { return []any{d[:digestKeyLen], d[:]} }

// digestKey returns the start of a digest that blobs_digest holds.
func digestKey(d cas.Digest) []byte { return d[:digestKeyLen] }

// keyBound returns the start of a bound of a range of digests: a digest
// at or above (below) the bound has a start at or above (below) it.
func keyBound(b []byte) []byte { return b[:min(len(b), digestKeyLen)] }

// DigestKey is the start of a digest that blobs_digest holds: two blobs
// whose digests start alike share it.
type DigestKey [digestKeyLen]byte

// KeyOf returns the start of digest d that blobs_digest holds.
func KeyOf(d cas.Digest) DigestKey { return DigestKey(d[:digestKeyLen]) }

// CompareKeys orders digest starts as blobs_digest does, byte by byte.
func CompareKeys(a, b DigestKey) int { return bytes.Compare(a[:], b[:]) }
