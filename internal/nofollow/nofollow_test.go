package nofollow

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	other := filepath.Join(dir, "other")
	link := filepath.Join(dir, "link")
	for _, p := range []string{target, other} {
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	open := func(name string) *os.File {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}

	if err := Verify(target, open(target), os.Lstat); err != nil {
		t.Errorf("Verify(a plain file) = %v, want nil", err)
	}
	if err := Verify(link, open(link), os.Lstat); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("Verify(a link) = %v, want ELOOP", err)
	}
	f := open(target)
	if err := os.Rename(other, target); err != nil {
		t.Fatal(err)
	}
	if err := Verify(target, f, os.Lstat); !errors.Is(err, ErrReplaced) {
		t.Errorf("Verify(a name replaced after the open) = %v, want ErrReplaced", err)
	}
	if err := Verify(other, f, os.Lstat); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Verify(a name gone) = %v, want ErrNotExist", err)
	}
}
