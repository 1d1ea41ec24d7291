package cas

import (
	"bytes"
	"context"
	"errors"
	"io"
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
	if rfs.retired != 0 {
		t.Errorf("%d shard handles retired, want 0: the shard was never removed", rfs.retired)
	}
}

// shardRootFS returns a store directory with shard 00 made, the shard's
// path, and a rootFS on it, closed when the test ends.
func shardRootFS(t *testing.T) (dir, shard string, rfs *rootFS) {
	t.Helper()
	dir = t.TempDir()
	shard = filepath.Join(dir, BlobsDir, "00")
	if err := os.MkdirAll(shard, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	rfs = newRootFS(root)
	t.Cleanup(func() {
		rfs.close()
		root.Close()
	})
	return dir, shard, rfs
}

// TestShardRootRetiredWhenRemade removes a shard directory and makes it
// again, as packing and the next write do: the cached handle of the old
// directory is dropped, and names resolve in the new one.
func TestShardRootRetiredWhenRemade(t *testing.T) {
	_, shard, rfs := shardRootFS(t)
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
	if rfs.retired != 1 {
		t.Errorf("%d shard handles retired, want the removed directory's", rfs.retired)
	}
}

// TestShardRootsClosedWhenRemoved writes a blob, removes it and its empty
// shard directory, again and again, as a long-lived process that packs
// does: the store's open file descriptors do not grow with the cycles.
func TestShardRootsClosedWhenRemoved(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd to count open files")
	}
	ctx := t.Context()
	s, err := Open(ctx, t.TempDir(), WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := []byte("a blob removed and written again\n")
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	cycle := func() {
		res, err := s.PutBytes(ctx, data, ".txt")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Remove(ctx, res.Blob); err != nil {
			t.Fatal(err)
		}
		if n, err := s.RemoveEmptyShards(ctx); err != nil || n == 0 {
			t.Fatalf("RemoveEmptyShards = %d, %v; want the blob's shard removed", n, err)
		}
	}
	cycle()
	before := fds()
	const cycles = 50
	for range cycles {
		cycle()
	}
	after := fds()
	t.Logf("open descriptors: %d before, %d after %d cycles", before, after, cycles)
	if after > before+5 {
		t.Errorf("open descriptors grew from %d to %d over %d remove/write cycles", before, after, cycles)
	}
}

// TestOpenStoredLocal reads a local store's blob with OpenStored, which
// falls back to Open for a backend without a cache.
func TestOpenStoredLocal(t *testing.T) {
	s, err := Open(t.Context(), t.TempDir(), WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.PutBytes(t.Context(), []byte("stored"), ".txt")
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenStored(t.Context(), s, res.Blob)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := OpenStored(t.Context(), s, Blob{Digest: Sum([]byte("absent")), Ext: ".txt"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenStored(missing) = %v, want ErrNotFound", err)
	}
}

// CopyContext copies everything while ctx lasts and stops with ctx's
// error once it ends, without reading on.
func TestCopyContext(t *testing.T) {
	data := bytes.Repeat([]byte("toolcas "), 100_000)
	var got bytes.Buffer
	n, err := CopyContext(context.Background(), &got, bytes.NewReader(data))
	if err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("CopyContext = %d, %v, %d bytes copied; want %d, nil, the same bytes", n, err, got.Len(), len(data))
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &cancelAfterRead{r: bytes.NewReader(data), cancel: cancel}
	n, err = CopyContext(ctx, io.Discard, r)
	if !errors.Is(err, context.Canceled) || r.reads != 1 || n != 256<<10 {
		t.Errorf("CopyContext cancelled after the first read = %d, %v after %d reads; want %d, context.Canceled after 1", n, err, r.reads, 256<<10)
	}
}

type cancelAfterRead struct {
	r      io.Reader
	cancel func()
	reads  int
}

func (c *cancelAfterRead) Read(p []byte) (int, error) {
	c.reads++
	defer c.cancel()
	return c.r.Read(p)
}

// TestRenameInShard renames within a shard directory, and from blobs/ into
// one, through the directories' cached descriptors: a plain rename moves
// the file, and a symbolic link at the new
// name is replaced, never written through; a name that is not plain ("..")
// goes through the Root and is refused; and once the shard directory is
// made anew, a rename into the new one works after the miss.
func TestRenameInShard(t *testing.T) {
	dir, shard, rfs := shardRootFS(t)
	outside := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(shard, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".tmp-1", "one")
	if err := rfs.Rename(BlobsDir+"/00/.tmp-1", BlobsDir+"/00/a"); err != nil {
		t.Fatalf("Rename in the shard = %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(shard, "a")); err != nil || string(got) != "one" {
		t.Errorf("renamed file holds %q, %v; want one", got, err)
	}
	// A pooled temp file, in blobs/, into the shard.
	if err := os.WriteFile(filepath.Join(dir, BlobsDir, ".tmp-p"), []byte("pooled"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rfs.Rename(BlobsDir+"/.tmp-p", BlobsDir+"/00/p"); err != nil {
		t.Fatalf("Rename from blobs/ into the shard = %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(shard, "p")); err != nil || string(got) != "pooled" {
		t.Errorf("file renamed from blobs/ holds %q, %v; want pooled", got, err)
	}
	target := filepath.Join(outside, "target")
	if err := os.WriteFile(target, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(shard, "b")); err != nil {
		t.Fatal(err)
	}
	write(".tmp-2", "two")
	if err := rfs.Rename(BlobsDir+"/00/.tmp-2", BlobsDir+"/00/b"); err != nil {
		t.Fatalf("Rename onto a link = %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(shard, "b")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the link was not replaced by the file: %v, %v", fi, err)
	}
	if got, _ := os.ReadFile(target); string(got) != "outside" {
		t.Errorf("the link's target now holds %q", got)
	}
	write(".tmp-3", "three")
	if err := rfs.Rename(BlobsDir+"/00/.tmp-3", BlobsDir+"/00/.."); err == nil {
		t.Error(`Rename onto ".." succeeded`)
	}
	if got, err := os.ReadFile(filepath.Join(shard, ".tmp-3")); err != nil || string(got) != "three" {
		t.Errorf(`after the refused rename onto "..", the file holds %q, %v`, got, err)
	}
	// The shard directory made anew, as packing and another process do.
	for _, name := range []string{"a", "b", "p", ".tmp-3"} {
		os.Remove(filepath.Join(shard, name))
	}
	if err := os.Remove(shard); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(shard, 0o755); err != nil {
		t.Fatal(err)
	}
	write(".tmp-4", "four")
	err := rfs.Rename(BlobsDir+"/00/.tmp-4", BlobsDir+"/00/c")
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Rename in the removed shard's handle = %v, want not exist", err)
		}
		err = rfs.Rename(BlobsDir+"/00/.tmp-4", BlobsDir+"/00/c")
	}
	if err != nil {
		t.Fatalf("Rename in the remade shard = %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(shard, "c")); err != nil || string(got) != "four" {
		t.Errorf("file renamed in the remade shard holds %q, %v", got, err)
	}
}
