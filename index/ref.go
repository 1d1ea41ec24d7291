package index

import (
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/toolcas/toolcas/cas"
)

// MinPrefixLen is the fewest hex digits a digest prefix reference may have.
const MinPrefixLen = 8

// RefKind says how a reference names a part.
type RefKind int

// The kinds of reference.
const (
	// RefKey is a rendered logical key, run/step_tool_call.ext; it resolves
	// to the newest version.
	RefKey RefKind = iota + 1
	// RefDigest is blake3:<64 hex>.
	RefDigest
	// RefPrefix is 8 to 64 lowercase hex digits starting a digest.
	RefPrefix
	// RefPath is a blob file's path, absolute inside the store root or
	// relative to it (blobs/3f/3fa9….txt).
	RefPath
)

// A Ref is a parsed reference.
type Ref struct {
	Kind   RefKind
	Key    string     // RefKey
	Digest cas.Digest // RefDigest
	Prefix string     // RefPrefix
	Blob   cas.Blob   // RefPath
	text   string
}

// String returns the reference as it was written.
func (r Ref) String() string { return r.text }

// ParseRef parses a reference: a rendered key, blake3:<hex>, a hex prefix of
// at least MinPrefixLen digits, or a blob's path. An absolute path must lie
// inside root (the store root) and name a blob file exactly; ".." elements
// and paths to anything else in the store, such as the index database, are
// refused. The error says what was wrong.
func ParseRef(s, root string) (Ref, error) {
	r := Ref{text: s}
	// Hex digits are case-insensitive: people copy them from anywhere.
	if low := strings.ToLower(s); low != s {
		if cas.IsHexPrefix(low) || strings.HasPrefix(low, cas.DigestPrefix) && cas.IsHexPrefix(low[len(cas.DigestPrefix):]) {
			s = low
		}
	}
	bad := func(format string, args ...any) (Ref, error) {
		return Ref{}, fmt.Errorf("%w %q: %s", ErrInvalidRef, clip(s), fmt.Sprintf(format, args...))
	}
	switch {
	case s == "":
		return bad("empty")
	case len(s) > maxKeyLen:
		return bad("longer than %d bytes", maxKeyLen)
	case !utf8.ValidString(s):
		return bad("not UTF-8")
	case strings.ContainsAny(s, "\x00\n\r"):
		return bad("contains a NUL or a line break")
	case strings.HasPrefix(s, cas.DigestPrefix):
		d, err := cas.ParseDigest(s)
		if err != nil {
			return bad("%v", err)
		}
		r.Kind, r.Digest = RefDigest, d
		return r, nil
	case filepath.IsAbs(s):
		rootAbs, err := filepath.Abs(root)
		if err != nil || root == "" {
			return bad("a path, but the store root is unknown")
		}
		rel, err := filepath.Rel(rootAbs, filepath.Clean(s))
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return bad("outside the store %s", rootAbs)
		}
		if filepath.Clean(s) != s {
			return bad("not a clean path")
		}
		b, err := cas.ParseBlobPath(filepath.ToSlash(rel))
		if err != nil {
			return bad("not a blob file of the store (%v)", err)
		}
		r.Kind, r.Blob = RefPath, b
		return r, nil
	case strings.HasPrefix(s, cas.BlobsDir+"/") && isBlobPath(s):
		r.Kind, r.Blob = RefPath, mustBlobPath(s)
		return r, nil
	case cas.IsHexPrefix(s):
		if len(s) < MinPrefixLen {
			return bad("a digest prefix needs at least %d hex digits", MinPrefixLen)
		}
		r.Kind, r.Prefix = RefPrefix, s
		return r, nil
	case strings.Contains(s, "/"):
		if strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.Contains(s, "/../") {
			return bad("a key is run/step_tool_call.ext, with no path elements")
		}
		r.Kind, r.Key = RefKey, s
		return r, nil
	}
	return bad("want a key (run/step_tool_call.ext), a blob path, blake3:<hex> or at least %d hex digits of one", MinPrefixLen)
}

// AmbiguousError is returned by Resolve when a digest prefix matches several
// blobs. It wraps ErrAmbiguous.
type AmbiguousError struct {
	Prefix     string
	Candidates []cas.Digest
}

func (e *AmbiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "prefix %s matches %d blobs:", e.Prefix, len(e.Candidates))
	for _, d := range e.Candidates {
		b.WriteString(" " + d.String())
	}
	return b.String()
}

// Unwrap returns ErrAmbiguous.
func (e *AmbiguousError) Unwrap() error { return ErrAmbiguous }

// Resolve returns the part a reference names: the newest version of a key;
// for a digest, prefix or path, the newest part whose blob it is. With run
// set, only that run's parts are considered, so a reference to another run's
// part, even by a digest both runs share, is ErrNotFound.
func (x *Index) Resolve(ctx context.Context, r Ref, run string) (Part, error) {
	var args []any
	switch r.Kind {
	case RefKey:
		prefix, rest := splitKey(r.Key)
		args = []any{rest, prefix}
	case RefDigest, RefPrefix:
		d := r.Digest
		if r.Kind == RefPrefix {
			var err error
			if d, err = x.expandPrefix(ctx, r.Prefix, run); err != nil {
				return Part{}, err
			}
		}
		args = digestArgs(d)
	case RefPath:
		args = append(digestArgs(r.Blob.Digest), r.Blob.Ext)
	default:
		return Part{}, fmt.Errorf("resolve: %w: unparsed reference", ErrInvalidRef)
	}
	q := resolveSQL(r.Kind, run != "")
	if run != "" {
		args = append(args, run)
	}
	var rows []partRow
	var err error
	if r.Kind != RefKey && run == "" {
		// A blob very many parts share: see resolveShared.
		rows, err = x.resolveShared(ctx, r.Kind, q, args)
	} else {
		err = x.read(ctx, func() error { return x.db.SelectContext(ctx, &rows, q, args...) })
	}
	if err != nil {
		return Part{}, fmt.Errorf("resolve %s: %w", clip(r.text), err)
	}
	if len(rows) == 0 {
		if run != "" {
			return Part{}, fmt.Errorf("%s: %w in run %s", clip(r.text), ErrNotFound, run)
		}
		return Part{}, fmt.Errorf("%s: %w", clip(r.text), ErrNotFound)
	}
	return rows[0].part()
}

// prefixSQL is expandPrefix's query of the digests at or above a bound
// and, when bounded, below another, that parts (of a run, when scoped)
// use. blobs_digest holds the digests' first bytes: the range of those
// bounds the range of digests, which is checked whole.
func prefixSQL(bounded, scoped bool) string {
	q := `SELECT DISTINCT b.digest FROM blobs b WHERE substr(b.digest, 1, 8) >= ? AND b.digest >= ?`
	if bounded {
		q += ` AND substr(b.digest, 1, 8) <= ? AND b.digest < ?`
	}
	q += ` AND EXISTS (SELECT 1 FROM parts p WHERE p.blob_id = b.id`
	if scoped {
		q += ` AND p.run_id IN (SELECT id FROM runs WHERE name = ?)`
	}
	return q + `) ORDER BY b.digest LIMIT 10`
}

// expandPrefix finds the one digest starting with prefix, among the blobs
// that parts (of run, when set) use.
func (x *Index) expandPrefix(ctx context.Context, prefix, run string) (cas.Digest, error) {
	lo, hi := prefixRange(prefix)
	q, args := prefixSQL(hi != nil, run != ""), []any{keyBound(lo), lo}
	if hi != nil {
		args = append(args, keyBound(hi), hi)
	}
	if run != "" {
		args = append(args, run)
	}
	var found [][]byte
	if err := x.read(ctx, func() error { return x.db.SelectContext(ctx, &found, q, args...) }); err != nil {
		return cas.Digest{}, fmt.Errorf("resolve prefix %s: %w", prefix, err)
	}
	var matches []cas.Digest
	for _, b := range found {
		if len(b) == cas.DigestSize && strings.HasPrefix(hex.EncodeToString(b), prefix) {
			matches = append(matches, cas.Digest(b))
		}
	}
	switch len(matches) {
	case 0:
		if run != "" {
			return cas.Digest{}, fmt.Errorf("%s: %w in run %s", prefix, ErrNotFound, run)
		}
		return cas.Digest{}, fmt.Errorf("%s: %w", prefix, ErrNotFound)
	case 1:
		return matches[0], nil
	}
	return cas.Digest{}, &AmbiguousError{Prefix: prefix, Candidates: matches}
}

// prefixRange returns the byte range [lo, hi) of digests whose hex form
// starts with prefix; hi is nil when the range runs to the end.
func prefixRange(prefix string) (lo, hi []byte) {
	p := prefix
	if len(p)%2 == 1 {
		p += "0"
	}
	lo, _ = hex.DecodeString(p)
	// hi: increment the prefix as a hex number of its own length.
	digits := []byte(prefix)
	i := len(digits) - 1
	for ; i >= 0; i-- {
		if digits[i] != 'f' {
			if digits[i] == '9' {
				digits[i] = 'a'
			} else {
				digits[i]++
			}
			break
		}
		digits[i] = '0'
	}
	if i < 0 {
		return lo, nil
	}
	h := string(digits)
	if len(h)%2 == 1 {
		h += "0"
	}
	hi, _ = hex.DecodeString(h)
	return lo, hi
}

func isBlobPath(rel string) bool {
	_, err := cas.ParseBlobPath(rel)
	return err == nil
}

func mustBlobPath(rel string) cas.Blob {
	b, _ := cas.ParseBlobPath(rel)
	return b
}

// resolveSQL is the query Resolve runs for a kind of reference, scoped to a
// run or not.
func resolveSQL(kind RefKind, scoped bool) string {
	scope := ""
	if scoped {
		scope = " AND p.run_id IN (SELECT id FROM runs WHERE name = ?)"
	}
	switch kind {
	case RefKey:
		return `SELECT ` + partColumns + ` FROM parts p JOIN blobs b ON b.id = p.blob_id
			WHERE p.key = ? AND (SELECT prefix FROM runs WHERE id = p.run_id) = ?` + scope + ` ORDER BY p.version DESC LIMIT 1`
	case RefPath:
		return `SELECT ` + partColumns + ` FROM blobs b JOIN parts p ON p.blob_id = b.id
			WHERE ` + blobDigestIs + ` AND b.ext = ?` + scope + ` ORDER BY p.created_at DESC, p.id DESC LIMIT 1`
	}
	return `SELECT ` + partColumns + ` FROM blobs b JOIN parts p ON p.blob_id = b.id
		WHERE ` + blobDigestIs + scope + ` ORDER BY p.created_at DESC, p.id DESC LIMIT 1`
}
