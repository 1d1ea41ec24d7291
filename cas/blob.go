package cas

import (
	"encoding/hex"
	"fmt"
	"path"
	"strings"
	"time"
)

// BlobsDir is the directory under the store root that holds the shard
// directories.
const BlobsDir = "blobs"

// tempPrefix starts the name of every temp file; walks never list such files
// as blobs.
const tempPrefix = ".tmp-"

// A Blob names one file of the store: the digest of its bytes and the
// extension of its type. Identical bytes of the same type are one blob.
type Blob struct {
	Digest Digest
	Ext    string
}

// FileName returns the blob's file name: 64 hex digits and the extension.
func (b Blob) FileName() string {
	return b.Digest.Hex() + b.Ext
}

// Shard returns the name of the blob's shard directory: the first byte of its
// digest in hex.
func (b Blob) Shard() string {
	return hex.EncodeToString(b.Digest[:1])
}

// RelPath returns the blob's path relative to the store root, with forward
// slashes: blobs/3f/3fa9….txt.
func (b Blob) RelPath() string {
	return b.pathIn("", '/')
}

// pathIn returns dir joined to the blob's path below the store root, with
// sep between the path's elements, built in one allocation: a store names
// a blob's file at every write. dir is "" or a clean path.
func (b Blob) pathIn(dir string, sep byte) string {
	var h [2 * DigestSize]byte
	hex.Encode(h[:], b.Digest[:])
	var sb strings.Builder
	sb.Grow(len(dir) + 1 + len(BlobsDir) + 4 + len(h) + len(b.Ext))
	if dir != "" {
		sb.WriteString(dir)
		if dir[len(dir)-1] != sep {
			sb.WriteByte(sep)
		}
	}
	sb.WriteString(BlobsDir)
	sb.WriteByte(sep)
	sb.Write(h[:2])
	sb.WriteByte(sep)
	sb.Write(h[:])
	sb.WriteString(b.Ext)
	return sb.String()
}

// String returns the blob's file name.
func (b Blob) String() string {
	return b.FileName()
}

// ParseBlobName parses a blob's file name, 64 lowercase hex digits followed by
// a valid extension.
func ParseBlobName(name string) (Blob, error) {
	if len(name) < 2*DigestSize {
		return Blob{}, fmt.Errorf("%w: %q is too short for a blob name", ErrNotBlobPath, clip(name))
	}
	d, err := ParseHex(name[:2*DigestSize])
	if err != nil {
		return Blob{}, fmt.Errorf("%w: %q: %v", ErrNotBlobPath, clip(name), err)
	}
	ext := name[2*DigestSize:]
	if err := CheckExt(ext); err != nil {
		return Blob{}, fmt.Errorf("%w: %q: %v", ErrNotBlobPath, clip(name), err)
	}
	return Blob{Digest: d, Ext: ext}, nil
}

// ParseBlobPath parses a path relative to the store root, with forward
// slashes, that must be exactly blobs/<shard>/<blob name> with the shard
// matching the digest. Anything else, including ".." elements, extra
// elements or a misplaced blob, is refused with ErrNotBlobPath.
func ParseBlobPath(rel string) (Blob, error) {
	if path.Clean(rel) != rel || strings.Contains(rel, "\\") {
		return Blob{}, fmt.Errorf("%w: %q is not a clean relative path", ErrNotBlobPath, clip(rel))
	}
	elems := strings.Split(rel, "/")
	if len(elems) != 3 || elems[0] != BlobsDir {
		return Blob{}, fmt.Errorf("%w: %q is not of the form %s/<shard>/<digest><ext>", ErrNotBlobPath, clip(rel), BlobsDir)
	}
	b, err := ParseBlobName(elems[2])
	if err != nil {
		return Blob{}, err
	}
	if b.Shard() != elems[1] {
		return Blob{}, fmt.Errorf("%w: %q is in shard %q, want %q", ErrNotBlobPath, clip(rel), clip(elems[1]), b.Shard())
	}
	return b, nil
}

// BlobInfo describes a blob file on disk.
type BlobInfo struct {
	Blob    Blob
	Size    int64
	ModTime time.Time
	// Pack names the pack file holding the blob, empty for a loose blob
	// (a file of its own under blobs/). ModTime is then the pack's.
	Pack string
}
