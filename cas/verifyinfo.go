package cas

import (
	"context"
	"hash"
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
	return fi, checkDigest(ctx, b, f, h, *bp)
}

// verifyBufSize is the size of VerifyInfo's buffers.
const verifyBufSize = 64 << 10

var verifyBufs = sync.Pool{New: func() any { b := make([]byte, verifyBufSize); return &b }}
