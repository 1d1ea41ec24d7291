package main

import (
	"os"
	"path/filepath"
	"testing"
)

// createCosts times new files in both directories, leaves none of them
// behind, and fails on a directory it cannot write in.
func TestCreateCosts(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	ta, tb, err := createCosts(2, 5, 4<<10, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if ta <= 0 || tb <= 0 {
		t.Errorf("createCosts = %v, %v; want two positive times", ta, tb)
	}
	for _, dir := range []string{a, b} {
		if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
			t.Errorf("%s holds %d entries after, %v; want none", dir, len(ents), err)
		}
	}
	if err := os.WriteFile(filepath.Join(a, "kept"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := createCosts(1, 3, 10, a, filepath.Join(b, "missing")); err == nil {
		t.Error("createCosts into a missing directory succeeded")
	}
	if ents, _ := os.ReadDir(a); len(ents) != 1 {
		t.Errorf("after the failed run, %s holds %d entries, want only the file that was there", a, len(ents))
	}
}
