//go:build unix

package cas

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestReadDirLazy: the root's lazy listing gives each entry's name and
// type from the listing and looks at an entry only when its Info is asked
// for, through the root: a file grown after the listing has its new size,
// where a Root's ReadDir gives the size it had when listed, and a link is
// looked at, not followed.
func TestReadDirLazy(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "blobs", "ab")
	if err := os.MkdirAll(filepath.Join(sub, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "f"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("a longer secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(sub, "l")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	fsys := newRootFS(root)
	des, err := readDirLazy(fsys, "blobs/ab")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]fs.FileMode{}
	byName := map[string]fs.DirEntry{}
	for _, de := range des {
		types[de.Name()] = de.Type()
		byName[de.Name()] = de
	}
	if len(des) != 3 || types["f"] != 0 || types["d"] != fs.ModeDir || types["l"] != fs.ModeSymlink {
		t.Fatalf("entries %v, want f a file, d a directory, l a link", types)
	}
	// Grown after the listing.
	if err := os.WriteFile(filepath.Join(sub, "f"), []byte("1234567890"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := byName["f"].Info()
	if err != nil || fi.Size() != 10 {
		t.Errorf("Info of a file grown since the listing: %v, %v; want its size now, 10", fi, err)
	}
	if fi, err := byName["l"].Info(); err != nil || fi.Mode().Type() != fs.ModeSymlink {
		t.Errorf("Info of a link: %v, %v; want the link itself", fi, err)
	}
	if err := os.Remove(filepath.Join(sub, "f")); err != nil {
		t.Fatal(err)
	}
	if _, err := byName["f"].Info(); !os.IsNotExist(err) {
		t.Errorf("Info of a file removed since the listing: %v, want not found", err)
	}
}
