//go:build unix

package cas

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// createFlags is how blob and temp files are opened: made, never reused.
const createFlags = os.O_WRONLY | os.O_CREATE | os.O_EXCL

// storeWithShard returns a store root with the shard directory made, its
// path, and a rootFS on the root.
func storeWithShard(t *testing.T, shard string) (dir, shardDir string, fsys *rootFS) {
	t.Helper()
	dir = t.TempDir()
	shardDir = filepath.Join(dir, "blobs", shard)
	if err := os.MkdirAll(shardDir, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return dir, shardDir, newRootFS(root)
}

// TestCreateAt: a file created in a shard or in the blobs directory is made
// on the directory's descriptor, not through the Root, as the Root would
// make it (in that directory, with its mode, named by its path, blocking);
// it never follows a link or replaces a name that is there; names that are
// not plain, and opens that do not create, go through the Root.
func TestCreateAt(t *testing.T) {
	dir, shard, fsys := storeWithShard(t, "ab")

	for _, name := range []string{"blobs/ab/x.txt", "blobs/.tmp-1"} {
		f, err := fsys.OpenFile(name, createFlags, 0o444)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		of := f.(*os.File)
		if want := filepath.Join(dir, filepath.FromSlash(name)); of.Name() != want {
			t.Errorf("created %s named %q, want %q", name, of.Name(), want)
		}
		if fl, err := unix.FcntlInt(of.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
			t.Errorf("created %s: flags %#x, %v; want a blocking descriptor", name, fl, err)
		}
		if _, err := f.Write([]byte("bytes")); err != nil {
			t.Fatal(err)
		}
		f.Close()
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil || fi.Mode() != 0o444 || fi.Size() != 5 {
			t.Errorf("created %s: %v, %v; want a 5-byte file of mode 0444", name, fi, err)
		}
		if _, err := fsys.OpenFile(name, createFlags, 0o444); !errors.Is(err, fs.ErrExist) {
			t.Errorf("create %s again: %v, want fs.ErrExist", name, err)
		}
	}

	// A link at the name is not followed: its target outside the store is
	// neither created nor written.
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.Symlink(outside, filepath.Join(shard, "l.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.OpenFile("blobs/ab/l.txt", createFlags, 0o444); !errors.Is(err, fs.ErrExist) {
		t.Errorf("create over a link: %v, want fs.ErrExist", err)
	}
	if _, err := os.Lstat(outside); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link's target: %v, want it never made", err)
	}

	// The descriptor serves plain names that are created; anything else
	// goes through the Root.
	viaRoot := func() (*os.File, error) { return nil, errors.New("via root") }
	dirOf := func() (*os.File, error) { return os.Open(shard) }
	for _, c := range []struct {
		name    string
		flag    int
		viaRoot bool
	}{
		{"y.txt", createFlags, false},
		{"../y.txt", createFlags, true},
		{"..", createFlags, true},
		{"x.txt", os.O_RDONLY, true},
		{"z.txt", os.O_WRONLY | os.O_CREATE, true},
	} {
		f, err := createAt(dirOf, c.name, c.flag, 0o444, viaRoot)
		if f != nil {
			f.Close()
		}
		if got := err != nil && err.Error() == "via root"; got != c.viaRoot {
			t.Errorf("createAt(%q, %#x): %v; through the Root: %v, want %v", c.name, c.flag, err, got, c.viaRoot)
		}
	}
}

// TestCreateInShardMadeAnew: a shard directory removed after its
// descriptor was cached, and made anew (as packing and another process
// do), gets the file, in the new directory.
func TestCreateInShardMadeAnew(t *testing.T) {
	_, shard, fsys := storeWithShard(t, "cd")
	f, err := fsys.OpenFile("blobs/cd/1.txt", createFlags, 0o444)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.RemoveAll(shard); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(shard, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err = fsys.OpenFile("blobs/cd/2.txt", createFlags, 0o444)
	if err != nil {
		t.Fatalf("create in the shard made anew: %v", err)
	}
	f.Close()
	if _, err := os.Lstat(filepath.Join(shard, "2.txt")); err != nil {
		t.Errorf("the file in the new shard directory: %v", err)
	}
}

// TestShardLinkNotFollowed: a shard directory that is a symbolic link to
// a directory outside the store is not opened on its descriptor (see
// openDirAt); a create there goes through the store's Root, which refuses
// it, and nothing is made outside.
func TestShardLinkNotFollowed(t *testing.T) {
	dir, _, fsys := storeWithShard(t, "ab")
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "blobs", "ef")); err != nil {
		t.Fatal(err)
	}
	blobs, err := fsys.blobsDir()
	if err != nil {
		t.Fatal(err)
	}
	if d, err := openDirAt(blobs, "ef"); err == nil {
		d.Close()
		t.Error("openDirAt opened a link to a directory outside the store")
	}
	f, err := fsys.OpenFile("blobs/ef/x.txt", createFlags, 0o444)
	if err == nil {
		f.Close()
		t.Error("a create in a shard linked outside the store succeeded")
	}
	if des, _ := os.ReadDir(outside); len(des) != 0 {
		t.Errorf("the directory outside holds %d entries, want none", len(des))
	}
	fsys.close()
}

// TestShardWritesOpenNoRoot: creates, renames and syncs in a shard use
// its directory's descriptor alone; its Root is opened by the first call
// that walks a name (a stat here), once.
func TestShardWritesOpenNoRoot(t *testing.T) {
	_, _, fsys := storeWithShard(t, "ab")
	defer fsys.close()
	f, err := fsys.OpenFile("blobs/ab/.tmp-1", createFlags, 0o444)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := fsys.Rename("blobs/ab/.tmp-1", "blobs/ab/x.txt"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("blobs/ab"); err != nil {
		t.Fatal(err)
	}
	sr := fsys.shards["ab"]
	if sr == nil || sr.root != nil {
		t.Fatalf("after a create, a rename and a sync: entry %+v, want one without a Root", sr)
	}
	for range 2 {
		if _, err := fsys.Lstat("blobs/ab/x.txt"); err != nil {
			t.Fatal(err)
		}
	}
	root := sr.root
	if root == nil {
		t.Fatal("a stat in the shard opened no Root")
	}
	if _, err := fsys.Lstat("blobs/ab/x.txt"); err != nil || sr.root != root {
		t.Errorf("a second stat: %v, Root %p, want the first's %p", err, sr.root, root)
	}
}
