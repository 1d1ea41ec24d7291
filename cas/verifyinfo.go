package cas

import (
	"context"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"sync"
)

// VerifyInfo is Verify for a loose blob file, which it also looks at: it
// returns the file's size and times as the open file gives them, so that
// a walk that listed the file by name alone (WalkNames) needs no look of
// its own. A blob with no loose file is ErrNotFound, whatever packs hold.
// It reads through a buffer of verifyBufSize from a pool of its own,
// rather than the puts' buffers of a mebibyte: verify re-hashes every file
// of the store, mostly small ones, a worker per core.
func (s *Store) VerifyInfo(ctx context.Context, b Blob) (fs.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, fi, err := s.openBlob(b)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bp := verifyBufs.Get().(*[]byte)
	defer verifyBufs.Put(bp)
	h := hashPool.Get().(hash.Hash)
	h.Reset()
	defer hashPool.Put(h)
	buf := *bp
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return fi, err
		}
		k, err := f.Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fi, fmt.Errorf("read: %w", err)
		}
	}
	var got Digest
	h.Sum(got[:0])
	if got != b.Digest {
		return fi, fmt.Errorf("read: %w", &CorruptError{Blob: b, Reason: "content hashes to " + got.String(), Got: got, Size: n})
	}
	return fi, nil
}

// verifyBufSize is the size of VerifyInfo's buffers.
const verifyBufSize = 64 << 10

var verifyBufs = sync.Pool{New: func() any { b := make([]byte, verifyBufSize); return &b }}
