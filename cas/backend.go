package cas

import (
	"context"
	"errors"
	"hash"
	"io"
	"sync"
)

// The roles a blob store plays, one small interface each, and Backend, all
// of them together. The local sharded directory (Store) is one backend; an
// object store reached over the network is another. Whatever holds the
// bytes, a blob is named by its digest and extension, and every promise
// below holds for every backend: backendtest runs the same suite against
// each of them.

// A Receiver stores blobs by their content.
type Receiver interface {
	// Put stores the bytes read from r as a blob with extension ext and
	// returns its name. The digest is computed from the bytes; the caller
	// need not know it. Memory stays bounded whatever the size of r.
	//
	// Put is idempotent: storing content that is already stored succeeds,
	// with PutResult.Existed set, and any number of writers may store the
	// same content at once: each succeeds and the blob is stored once.
	// When Put returns without error the blob is durable and reads back
	// exactly r's bytes. When it returns an error (a failing r, a cancelled
	// ctx, a lost connection) no blob of partial content is visible under
	// any name. An invalid extension gives ErrInvalidExt.
	Put(ctx context.Context, r io.Reader, ext string) (PutResult, error)
}

// A Fetcher reads blobs.
type Fetcher interface {
	// Open opens a blob for a checked read: the bytes are re-hashed as they
	// are read, and the read that reaches the end returns an error
	// wrapping ErrCorrupt instead of io.EOF when they do not hash to the
	// blob's digest. A missing blob gives an error wrapping ErrNotFound.
	// The caller closes the Reader.
	//
	// A backend with a local read-through cache (an object store) may
	// answer from its cached copy a blob that another machine has since
	// removed from the store: Open then succeeds where Stat says
	// ErrNotFound. The cached bytes are still checked against the digest,
	// so what is read is the blob, never other content. Checking the store
	// on every read would cost a round trip per read and defeat the cache
	// that keeps pointer reads local; and a blob is removed only by gc once
	// no index row names it, so a reader following a row does not meet
	// this. A caller that must know what the store holds (verify, gc) uses
	// Stat, or OpenStored.
	Open(ctx context.Context, b Blob) (*Reader, error)
}

// A RemoteOpener is a Fetcher with a local cache that can also read a blob
// from the store itself, past the cache.
type RemoteOpener interface {
	// OpenRemote opens the blob as Open does, but reads it from the store,
	// never from a cached copy: a blob the store no longer holds gives
	// ErrNotFound, and damage to the stored bytes shows.
	OpenRemote(ctx context.Context, b Blob) (*Reader, error)
}

// OpenStored opens a blob for a checked read of what the store holds: with
// OpenRemote when f has a cache it can bypass, else with Open. Verify and
// gc read so.
func OpenStored(ctx context.Context, f Fetcher, b Blob) (*Reader, error) {
	if ro, ok := f.(RemoteOpener); ok {
		return ro.OpenRemote(ctx, b)
	}
	return f.Open(ctx, b)
}

// A Statter describes blobs without reading them.
type Statter interface {
	// Stat returns a blob's size and modification time, or an error
	// wrapping ErrNotFound when no blob has that name. It does not re-hash:
	// a blob that Stat finds may still be corrupt.
	Stat(ctx context.Context, b Blob) (BlobInfo, error)
}

// A Remover deletes blobs.
type Remover interface {
	// Remove deletes a blob, or returns an error wrapping ErrNotFound when
	// no blob has that name. Only gc calls it, once no index row uses the
	// blob.
	Remove(ctx context.Context, b Blob) error
}

// A Walker lists every blob a backend holds.
type Walker interface {
	// Walk calls fn once for every name under the backend's blobs/, with
	// its Kind, Size and ModTime. ModTime is when the blob was last
	// written: gc's grace period counts from it. A backend that cannot
	// refresh it on a dedup hit (an object store) reports the first
	// write, so a caller that needs the last use must keep it elsewhere.
	// Any error listing stops the walk and is returned, so that a caller
	// deciding what to delete fails closed; an error from fn stops the
	// walk and is returned as is. Blobs written or removed during a walk
	// may or may not be reported.
	Walk(ctx context.Context, fn func(Entry) error) error
}

// A Pather names the local file that holds a blob's bytes, the path a
// pointer shows so that a file tool can open it.
type Pather interface {
	// Path returns the absolute local path of a blob's file. For the local
	// directory it is the blob's own file. For a remote backend it is the
	// blob's file in the local cache: present after a put or a read of the
	// blob until the cache evicts it, and made again by the next read.
	Path(b Blob) string
}

// A Backend is a blob store: it keeps blobs, reads them back checked,
// describes, lists and deletes them, and names their local files. Every
// method is safe for concurrent use by many goroutines, and, on the same
// storage, by many processes.
type Backend interface {
	Receiver
	Fetcher
	Statter
	Remover
	Walker
	Pather
	io.Closer
}

// The local sharded directory is a Backend.
var _ Backend = (*Store)(nil)

// NewReader returns a Reader that checks the bytes read from rc against b's
// digest, as Store.Open's Reader does: a backend reading from elsewhere
// hands out the same checked reads. size is the size of the content rc is
// expected to hold, as Reader.Size reports it; closing the Reader closes rc.
func NewReader(rc io.ReadCloser, b Blob, size int64) *Reader {
	return newReader(rc, b, size, "")
}

// ReadBlob returns a blob's bytes from any Fetcher once they are checked
// against its digest; a corrupt blob gives an error wrapping ErrCorrupt and
// no bytes.
func ReadBlob(ctx context.Context, f Fetcher, b Blob) ([]byte, error) {
	r, err := f.Open(ctx, b)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	buf := make([]byte, 0, r.Size()+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Has reports whether a Statter holds a blob of that name.
func Has(ctx context.Context, s Statter, b Blob) (bool, error) {
	_, err := s.Stat(ctx, b)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, err
}

// A HashingReader passes on the bytes of an underlying reader and hashes
// them, so that a backend streaming content to somewhere else learns its
// digest and size once the last byte has gone by.
type HashingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

// NewHashingReader returns a HashingReader reading from r.
func NewHashingReader(r io.Reader) *HashingReader {
	return &HashingReader{r: r, h: NewHash()}
}

// Read implements io.Reader.
func (hr *HashingReader) Read(p []byte) (int, error) {
	n, err := hr.r.Read(p)
	hr.h.Write(p[:n])
	hr.n += int64(n)
	return n, err
}

// Digest returns the digest of the bytes read so far.
func (hr *HashingReader) Digest() Digest {
	var d Digest
	hr.h.Sum(d[:0])
	return d
}

// Size returns the number of bytes read so far.
func (hr *HashingReader) Size() int64 { return hr.n }

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// CopyContext copies src to dst as io.Copy does, in chunks of 256 KiB,
// and stops with ctx's error when ctx ends between two of them: a copy
// to or from a network store that a caller gave up on does not run on.
func CopyContext(ctx context.Context, dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k, rerr := src.Read(buf)
		if k > 0 {
			if _, err := dst.Write(buf[:k]); err != nil {
				return n, err
			}
			n += int64(k)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}
