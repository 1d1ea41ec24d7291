package cas

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestVerifyInfo: VerifyInfo gives a whole blob's size and time as its
// file has them, says a blob whose bytes changed is corrupt, with the
// size it read, across several of its buffers too, and says a blob with
// no file is not found.
func TestVerifyInfo(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	for _, size := range []int{0, 100, verifyBufSize, 3*verifyBufSize + 17} {
		res, err := s.PutBytes(ctx, pattern(size, 3), ".txt")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(s.Dir(), filepath.FromSlash(res.Blob.RelPath()))
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := s.VerifyInfo(ctx, res.Blob)
		if err != nil || fi.Size() != int64(size) || !fi.ModTime().Equal(st.ModTime()) {
			t.Fatalf("%d bytes: VerifyInfo = %v, %v; want size %d, time %v", size, fi, err, size, st.ModTime())
		}
		if size == 0 {
			continue
		}
		if err := os.WriteFile(path, pattern(size, 4), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = s.VerifyInfo(ctx, res.Blob)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Size != int64(size) || ce.Got != Sum(pattern(size, 4)) {
			t.Errorf("%d bytes changed: VerifyInfo = %v, want corrupt, %d bytes read", size, err, size)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if _, err := s.VerifyInfo(ctx, res.Blob); !errors.Is(err, ErrNotFound) {
			t.Errorf("%d bytes removed: VerifyInfo = %v, want not found", size, err)
		}
	}
}
