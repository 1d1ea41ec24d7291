package cas

import (
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"lukechampine.com/blake3"
)

// DigestSize is the length in bytes of a BLAKE3-256 digest.
const DigestSize = 32

// DigestPrefix starts every printed digest, naming the hash algorithm.
const DigestPrefix = "blake3:"

// A Digest is the BLAKE3-256 hash of a blob's bytes. It is a value: comparable,
// usable as a map key, free to copy.
type Digest [DigestSize]byte

// Sum returns the digest of b.
func Sum(b []byte) Digest {
	return Digest(blake3.Sum256(b))
}

// NewHash returns a hash.Hash computing digests incrementally; its Sum is a
// Digest's bytes.
func NewHash() hash.Hash {
	return blake3.New(DigestSize, nil)
}

// ParseDigest parses the printed form of a digest, "blake3:" followed by 64
// lowercase hex digits. It returns an error wrapping ErrInvalidDigest that
// says what is wrong with s.
func ParseDigest(s string) (Digest, error) {
	rest, ok := strings.CutPrefix(s, DigestPrefix)
	if !ok {
		return Digest{}, fmt.Errorf("%w: %q does not start with %q", ErrInvalidDigest, clip(s), DigestPrefix)
	}
	return ParseHex(rest)
}

// ParseHex parses a digest written as 64 lowercase hex digits, as in a blob's
// file name.
func ParseHex(s string) (Digest, error) {
	var d Digest
	if len(s) != 2*DigestSize {
		return d, fmt.Errorf("%w: %q has %d hex digits, want %d", ErrInvalidDigest, clip(s), len(s), 2*DigestSize)
	}
	for i := 0; i < len(s); i++ {
		if !isLowerHex(s[i]) {
			return d, fmt.Errorf("%w: %q has %q at offset %d, want a lowercase hex digit", ErrInvalidDigest, clip(s), s[i], i)
		}
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("%w: %v", ErrInvalidDigest, err)
	}
	return d, nil
}

// String returns the printed form, "blake3:" and 64 hex digits.
func (d Digest) String() string {
	return DigestPrefix + d.Hex()
}

// Hex returns the digest as 64 lowercase hex digits.
func (d Digest) Hex() string {
	return hex.EncodeToString(d[:])
}

// Short returns the first 12 hex digits, enough to tell blobs apart in
// human-facing output.
func (d Digest) Short() string {
	return hex.EncodeToString(d[:6])
}

// IsZero reports whether d is the zero value, which no content hashes to in
// practice and which marks "no digest".
func (d Digest) IsZero() bool {
	return d == Digest{}
}

// MarshalText implements encoding.TextMarshaler with the printed form.
func (d Digest) MarshalText() ([]byte, error) {
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler, accepting the printed form.
func (d *Digest) UnmarshalText(b []byte) error {
	p, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

func isLowerHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
}

// IsHexPrefix reports whether s could be the start of a digest's hex form:
// 1 to 64 lowercase hex digits.
func IsHexPrefix(s string) bool {
	if len(s) == 0 || len(s) > 2*DigestSize {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isLowerHex(s[i]) {
			return false
		}
	}
	return true
}

// clip shortens untrusted text quoted in error messages so that an error stays
// one readable line.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
