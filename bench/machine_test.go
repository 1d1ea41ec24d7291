package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The file system of a stores' directory not made yet is its parent's.
func TestFileSystemOfADirectoryNotMadeYet(t *testing.T) {
	if _, err := os.Stat("/proc/self/mounts"); err != nil {
		t.Skip("no /proc/self/mounts here")
	}
	dir := t.TempDir()
	want := fileSystem(dir)
	if strings.HasPrefix(want, "unknown") {
		t.Fatalf("fileSystem(%s) = %q, want a file system", dir, want)
	}
	if got := fileSystem(filepath.Join(dir, "not", "yet")); got != want {
		t.Errorf("fileSystem of a directory not made yet = %q, want its parent's %q", got, want)
	}
}

// An ext4 file system has a journal where the proc file system lists one
// for its device; where it lists none, or does not know the device, it
// tells so.
func TestExt4Journal(t *testing.T) {
	proc := t.TempDir()
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(proc, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk("fs/ext4/vda")
	mk("fs/ext4/sdb1")
	mk("fs/jbd2/sdb1-8")
	mk("fs/jbd2/vdab-8") // another device whose name starts alike
	for _, tc := range []struct {
		dev            string
		journal, known bool
	}{
		{"/dev/vda", false, true},
		{"/dev/sdb1", true, true},
		{"/dev/root", false, false}, // not a name the proc file system uses
	} {
		journal, known := ext4Journal(proc, tc.dev)
		if journal != tc.journal || known != tc.known {
			t.Errorf("ext4Journal(%s) = %v, %v; want %v, %v", tc.dev, journal, known, tc.journal, tc.known)
		}
	}
	if err := os.RemoveAll(filepath.Join(proc, "fs", "jbd2")); err != nil {
		t.Fatal(err)
	}
	if _, known := ext4Journal(proc, "/dev/vda"); known {
		t.Error("without fs/jbd2, a journal's absence was taken as known")
	}
}
