package cas

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A pack whose end is cut off (its trailer and part of its table of
// contents gone), or whose table of contents is gone whole, still holds
// every blob in its frames: SalvagePack finds them all, checked. Blobs the
// caller does not name (their rows gone) are skipped; with the table of
// contents cut off, the blobs beside them are found as well; with it gone
// whole, those of the frames that hold no such blob are (one between two
// unnamed blobs cannot be told apart from them).
func TestSalvagePack(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// cut returns the bytes of the damaged pack.
		cut func(file []byte, tocAt int64) []byte
		// unnamed leaves blobs out of want: dead blobs, whose rows are
		// gone.
		unnamed int
	}{
		{"end cut off", func(f []byte, _ int64) []byte { return f[:len(f)-100] }, 0},
		{"end cut off, most of the table of contents too", func(f []byte, toc int64) []byte { return f[:toc+100] }, 0},
		{"table of contents gone", func(f []byte, toc int64) []byte { return f[:toc] }, 0},
		{"table of contents zeroed", func(f []byte, toc int64) []byte {
			g := bytes.Clone(f)
			clear(g[toc:])
			return g
		}, 0},
		{"end cut off, dead blobs", func(f []byte, _ int64) []byte { return f[:len(f)-100] }, 7},
		{"table of contents gone, dead blobs", func(f []byte, toc int64) []byte { return f[:toc] }, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := MustOpen(t)
			contents, _, info := packFixture(t, s)
			removeLoose(t, s, contents)
			path := filepath.Join(s.Dir(), PacksDir, info.Name)
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			frames, tocAt := walkFrames(file)
			if tocAt < 0 || len(frames) < 2 {
				t.Fatalf("walkFrames found %d frames, table of contents at %d", len(frames), tocAt)
			}
			os.Chmod(path, 0o644)
			if err := os.WriteFile(path, tc.cut(file, tocAt), 0o444); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ReadAll(ctx, info.Entries[0].Blob); err == nil {
				t.Fatal("the damaged pack still reads: the damage did not happen")
			}
			var want []SizedBlob
			skipped := map[Blob]bool{}
			for b, data := range contents {
				// Leave out some blobs of a few hundred bytes or more: a
				// blob as short as a line can stand inside another.
				if len(skipped) < tc.unnamed && len(data) > 2000 {
					skipped[b] = true
					continue
				}
				want = append(want, SizedBlob{b, int64(len(data))})
			}
			got := map[Blob][]byte{}
			n, err := s.SalvagePack(ctx, info.Name, want, func(b Blob, data []byte) error {
				if _, dup := got[b]; dup {
					t.Errorf("%s found twice", b)
				}
				got[b] = bytes.Clone(data)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n != len(got) {
				t.Errorf("SalvagePack = %d, called found %d times", n, len(got))
			}
			frameOf := map[Blob]int{}
			for _, e := range info.Entries {
				frameOf[e.Blob] = e.Frame
			}
			blind := map[int]bool{} // frames with unnamed blobs, no table of contents to say where
			for b := range skipped {
				if tc.name == "table of contents gone, dead blobs" {
					blind[frameOf[b]] = true
				}
			}
			for _, w := range want {
				if data, ok := got[w.Blob]; !ok {
					if !blind[frameOf[w.Blob]] {
						t.Errorf("%s (%d bytes) not salvaged", w.Blob, w.Size)
					}
				} else if !bytes.Equal(data, contents[w.Blob]) {
					t.Errorf("%s salvaged with other bytes", w.Blob)
				}
			}
			for b := range skipped {
				if _, ok := got[b]; ok {
					t.Errorf("%s salvaged, though not wanted", b)
				}
			}
		})
	}
}
