package cas

import (
	"context"
	"io/fs"
)

// VerifyInfo is Verify for a loose blob file, which it also looks at: it
// returns the file's size and times as the open file gives them, so that
// a walk that listed the file by name alone (WalkNames) needs no look of
// its own. A blob with no loose file is ErrNotFound, whatever packs hold.
func (s *Store) VerifyInfo(ctx context.Context, b Blob) (fs.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, fi, err := s.openBlob(b)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return fi, verifyFile(ctx, b, f)
}
