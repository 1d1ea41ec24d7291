package cas

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestShardRootKeptOnMiss looks up missing names in a shard while other
// goroutines open a file of the same shard: a miss must not close the
// shard's directory handle that the others are using (which failed their
// opens with "file already closed", and so failed concurrent puts).
func TestShardRootKeptOnMiss(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, BlobsDir, "00"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, BlobsDir, "00", "present"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	rfs := newRootFS(root)
	defer rfs.close()
	const n = 5000
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 2 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range n {
				if _, err := rfs.Lstat(BlobsDir + "/00/missing"); !errors.Is(err, fs.ErrNotExist) {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range n {
				f, err := rfs.OpenFile(BlobsDir+"/00/present", os.O_RDONLY, 0)
				if err != nil {
					errs <- err
					return
				}
				f.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("with misses in the same shard: %v", err)
	}
	if len(rfs.retired) != 0 {
		t.Errorf("%d shard handles retired, want 0: the shard was never removed", len(rfs.retired))
	}
}

// TestShardRootRetiredWhenRemade removes a shard directory and makes it
// again, as packing and the next write do: the cached handle of the old
// directory is dropped, and names resolve in the new one.
func TestShardRootRetiredWhenRemade(t *testing.T) {
	dir := t.TempDir()
	shard := filepath.Join(dir, BlobsDir, "00")
	if err := os.MkdirAll(shard, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	rfs := newRootFS(root)
	defer rfs.close()
	if _, err := rfs.Lstat(BlobsDir + "/00/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Lstat of a missing file = %v", err)
	}
	if err := os.Remove(shard); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(shard, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shard, "a"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rfs.Lstat(BlobsDir + "/00/a"); err != nil {
		t.Errorf("Lstat in the remade shard = %v, want the file", err)
	}
	f, err := rfs.OpenFile(BlobsDir+"/00/a", os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("OpenFile in the remade shard = %v", err)
	}
	f.Close()
	if len(rfs.retired) != 1 {
		t.Errorf("%d shard handles retired, want the removed directory's", len(rfs.retired))
	}
}
