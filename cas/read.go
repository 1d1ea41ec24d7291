package cas

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
)

// CorruptError describes a blob whose file does not hold what its name says.
// It wraps ErrCorrupt.
type CorruptError struct {
	Blob Blob
	// Reason is a short phrase: "content hashes to blake3:…", "not a regular file".
	Reason string
	// Got is the digest of the bytes found, when they could be read.
	Got Digest
	// Size is the size of the file found, when it could be read.
	Size int64
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("blob %s corrupt: %s", e.Blob.FileName(), e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// openBlob opens a blob's file for reading. The final element is never
// followed as a symbolic link, and the file must be a regular file.
func (s *Store) openBlob(b Blob) (file, fs.FileInfo, error) {
	if err := CheckExt(b.Ext); err != nil {
		return nil, nil, err
	}
	f, fi, err := s.openRegular(b.RelPath())
	var odd oddFile
	switch {
	case err == nil:
		return f, fi, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("%s: %w", b.FileName(), ErrNotFound)
	case errors.Is(err, syscall.ELOOP):
		return nil, nil, &CorruptError{Blob: b, Reason: "a symbolic link stands where the blob should be"}
	case errors.As(err, &odd):
		return nil, nil, &CorruptError{Blob: b, Reason: "a " + string(odd) + " stands where the blob should be"}
	}
	if fi, lerr := s.fs.Lstat(b.RelPath()); lerr == nil && !fi.Mode().IsRegular() {
		return nil, nil, &CorruptError{Blob: b, Reason: "a " + kindOf(fi.Mode()) + " stands where the blob should be"}
	}
	return nil, nil, err
}

// openRegular opens the file at rel for reading, never through a link at
// its last element; what stands there when it is not a regular file is an
// oddFile.
func (s *Store) openRegular(rel string) (file, fs.FileInfo, error) {
	f, err := openNoFollow(s.fs, rel, os.O_RDONLY)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = oddFile(kindOf(fi.Mode()))
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// oddFile is the error of a file that is not a regular file: what it is.
type oddFile string

func (o oddFile) Error() string { return "not a regular file: a " + string(o) }

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "non-regular file"
}

// A Reader reads a blob's bytes and checks them: the read that reaches the
// end returns an error wrapping ErrCorrupt instead of io.EOF when the bytes do
// not hash to the blob's digest. A caller that must never pass on wrong bytes
// reads to the end before using them, or uses ReadAll.
type Reader struct {
	f    io.ReadCloser
	pack string // the pack holding the blob, empty when loose
	blob Blob
	size int64
	h    hash.Hash
	n    int64
	err  error
}

// Open opens a blob for a checked read.
func (s *Store) Open(ctx context.Context, b Blob) (*Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, fi, err := s.openBlob(b)
	if errors.Is(err, ErrNotFound) {
		r, perr := s.openPacked(ctx, b)
		if perr == nil {
			return r, nil
		}
		if !errors.Is(perr, ErrNotFound) {
			err = perr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return newReader(f, b, fi.Size(), ""), nil
}

// Size returns the size of the blob's file when it was opened, or of the
// blob in its pack.
func (r *Reader) Size() int64 { return r.size }

// Pack returns the name of the pack file the blob is read from, or "" when
// it is read from a file of its own.
func (r *Reader) Pack() string { return r.pack }

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.f.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	if err == io.EOF {
		if bad := mismatch(r.blob, r.h, r.n); bad != nil {
			r.err = fmt.Errorf("read: %w", bad)
			return n, r.err
		}
		r.err = io.EOF
	} else if err != nil {
		r.err = err
	}
	return n, err
}

// Close closes the blob's file.
func (r *Reader) Close() error {
	if r.h != nil {
		hashPool.Put(r.h)
		r.h = nil
		if r.err == nil {
			r.err = os.ErrClosed
		}
	}
	return r.f.Close()
}

// newReader returns a Reader of f, the bytes of b, with a hasher from the
// pool that Close gives back.
func newReader(f io.ReadCloser, b Blob, size int64, pack string) *Reader {
	h := hashPool.Get().(hash.Hash)
	h.Reset()
	return &Reader{f: f, blob: b, size: size, h: h, pack: pack}
}

// ReadAll returns a blob's bytes once they are checked against its digest;
// a corrupt blob gives an error wrapping ErrCorrupt and no bytes.
func (s *Store) ReadAll(ctx context.Context, b Blob) ([]byte, error) {
	return ReadBlob(ctx, s, b)
}

// Stat describes a blob's file without reading it; a blob that is not a file
// of its own but is held in a pack is described with its pack's name.
func (s *Store) Stat(ctx context.Context, b Blob) (BlobInfo, error) {
	if err := ctx.Err(); err != nil {
		return BlobInfo{}, err
	}
	if err := CheckExt(b.Ext); err != nil {
		return BlobInfo{}, fmt.Errorf("stat: %w", err)
	}
	fi, err := s.fs.Lstat(b.RelPath())
	if errors.Is(err, fs.ErrNotExist) {
		return s.statPacked(ctx, b)
	}
	if err != nil {
		return BlobInfo{}, fmt.Errorf("stat: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return BlobInfo{}, fmt.Errorf("stat: %w", &CorruptError{Blob: b, Reason: "a " + kindOf(fi.Mode()) + " stands where the blob should be"})
	}
	return BlobInfo{Blob: b, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Verify re-hashes a blob (its file, or its bytes in a pack) and returns nil when it matches its name,
// an error wrapping ErrNotFound when it is missing, and a *CorruptError
// (wrapping ErrCorrupt) when it holds anything else.
func (s *Store) Verify(ctx context.Context, b Blob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, _, err := s.openBlob(b)
	if err == nil {
		defer f.Close()
		return verifyFile(ctx, b, f)
	}
	r, err := s.Open(ctx, b)
	if err != nil {
		return err
	}
	defer r.Close()
	// The Reader checks the digest at the end.
	_, err = CopyContext(ctx, io.Discard, r)
	return err
}

// hashPool keeps hashers for Verify and Readers: a hasher is a few KiB to
// allocate and clear, as much as hashing a small blob costs. Whoever takes
// one resets it.
var hashPool = sync.Pool{New: func() any { return NewHash() }}

// verifyFile re-hashes a blob's open file, as a Reader would, with a
// hasher and a buffer from the pools.
func verifyFile(ctx context.Context, b Blob, f io.Reader) error {
	h := hashPool.Get().(hash.Hash)
	h.Reset()
	defer hashPool.Put(h)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	return checkDigest(ctx, b, f, h, (*bp)[:chunkSize])
}

// checkDigest reads f to its end through buf, hashing it with h, and
// returns nil when it hashes to b's digest, a *CorruptError when it does
// not.
func checkDigest(ctx context.Context, b Blob, f io.Reader, h hash.Hash, buf []byte) error {
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		k, err := f.Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
	}
	if bad := mismatch(b, h, n); bad != nil {
		return fmt.Errorf("read: %w", bad)
	}
	return nil
}

// mismatch returns a *CorruptError when the n bytes h hashed are not b's,
// and nil when they are.
func mismatch(b Blob, h hash.Hash, n int64) error {
	var got Digest
	h.Sum(got[:0])
	if got != b.Digest {
		return &CorruptError{Blob: b, Reason: "content hashes to " + got.String(), Got: got, Size: n}
	}
	return nil
}

// Remove deletes a blob's file. Only gc calls it, once no index row refers to
// the blob.
func (s *Store) Remove(ctx context.Context, b Blob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := CheckExt(b.Ext); err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	err := s.fs.Remove(b.RelPath())
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", b.FileName(), ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", b.FileName(), err)
	}
	return nil
}

// discardPrefix starts the temp name Discard gives a blob it sets aside.
const discardPrefix = tempPrefix + "gone-"

// Discard takes a blob out of the store by renaming its file to a temp name
// in its shard, and returns that name, relative to the root, for
// RemoveDiscarded. A reader or a writer no longer finds the blob once
// Discard returns; the file's blocks are freed by the unlink after. Only gc
// calls it, once no index row refers to the blob: a rename costs a fraction
// of an unlink, so gc holds its lock for the rename and unlinks after. A
// discarded file that a crash left is an old temp file, which gc removes.
func (s *Store) Discard(ctx context.Context, b Blob) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := CheckExt(b.Ext); err != nil {
		return "", fmt.Errorf("discard: %w", err)
	}
	to := BlobsDir + "/" + b.Shard() + "/" + discardPrefix + b.FileName()
	err := s.fs.Rename(b.RelPath(), to)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("discard %s: %w", b.FileName(), ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("discard %s: %w", b.FileName(), err)
	}
	return to, nil
}

// RemoveDiscarded unlinks a file that Discard set aside, by the name it
// returned. It refuses any other name.
func (s *Store) RemoveDiscarded(rel string) error {
	if !isTempPath(rel) || !strings.HasPrefix(path.Base(rel), discardPrefix) {
		return fmt.Errorf("remove discarded: %q is no blob set aside by gc", clip(rel))
	}
	if err := s.fs.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove discarded %s: %w", s.abs(rel), err)
	}
	return nil
}

// TempStray reports whether a temp file that a walk reported, by its path
// relative to the root, is a stray: still there, and held by no live
// writer (see TempInUse). A file gone since the walk was a writer's,
// renamed to its blob, or one that gc set aside and has unlinked.
func (s *Store) TempStray(rel string) bool {
	if s.TempInUse(rel) {
		return false
	}
	_, err := s.fs.Lstat(rel)
	return err == nil
}

// TempInUse reports whether a temp file that a walk reported, by its path
// relative to the root, is held by a live writer: one being written, or
// one waiting in a store's pool (WithTempPool). Such a file is no stray.
// It reports false for a file gone, a name that is no temp file, and
// where temp files are not locked.
func (s *Store) TempInUse(rel string) bool {
	if !isTempPath(rel) {
		return false
	}
	f, err := openNoFollow(s.fs, rel, os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return false
	}
	defer f.Close()
	return errors.Is(tryLockTemp(f), ErrTempInUse)
}

// RemoveTemp deletes a temp file that a walk reported, by its path relative
// to the root. It refuses any other name.
func (s *Store) RemoveTemp(ctx context.Context, rel string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !isTempPath(rel) {
		return fmt.Errorf("remove temp: %q is not a temp file of the store", clip(rel))
	}
	// A put holds its temp file's lock until the file is renamed or
	// removed: take the lock, or leave the file alone.
	f, err := openNoFollow(s.fs, rel, os.O_RDONLY|syscall.O_NONBLOCK)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		defer f.Close()
		if err := tryLockTemp(f); err != nil {
			if errors.Is(err, ErrTempInUse) {
				return fmt.Errorf("remove temp %s: %w", s.abs(rel), err)
			}
			return fmt.Errorf("remove temp %s: lock: %w", s.abs(rel), err)
		}
	}
	if err := s.fs.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove temp %s: %w", s.abs(rel), err)
	}
	return nil
}

// isTempPath reports whether rel is blobs/.tmp-* or blobs/<shard>/.tmp-*.
func isTempPath(rel string) bool {
	elems := strings.Split(rel, "/")
	if elems[0] != BlobsDir {
		return false
	}
	switch len(elems) {
	case 2:
		return isTempName(elems[1])
	case 3:
		return isShardName(elems[1]) && isTempName(elems[2])
	}
	return false
}

func isTempName(name string) bool {
	return strings.HasPrefix(name, tempPrefix) && !strings.ContainsAny(name[len(tempPrefix):], "/\\") && name != tempPrefix
}

func isShardName(name string) bool {
	return len(name) == 2 && isLowerHex(name[0]) && isLowerHex(name[1])
}

// locate lists the blobs whose digest is d, one per extension stored.
func (s *Store) locate(ctx context.Context, d Digest) ([]Blob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hexd := d.Hex()
	entries, err := s.fs.ReadDir(BlobsDir + "/" + hexd[:2])
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("locate %s: %w", d, err)
	}
	var out []Blob
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), hexd) {
			continue
		}
		if b, err := ParseBlobName(e.Name()); err == nil && b.Digest == d {
			out = append(out, b)
		}
	}
	return out, nil
}
