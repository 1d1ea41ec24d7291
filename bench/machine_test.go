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
