package cas

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"time"
)

// fileSystem is the seam between the store and the operating system. Every
// name is relative to the store root. The production implementation confines
// every operation to the root with os.Root; tests wrap it to record the order
// of calls or to inject failures.
type fileSystem interface {
	OpenFile(name string, flag int, perm fs.FileMode) (file, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	Lstat(name string) (fs.FileInfo, error)
	// Peek is Lstat for a check whose false miss costs only work: a name
	// missing from a shard directory that was removed and made anew is
	// not looked up again.
	Peek(name string) (fs.FileInfo, error)
	Chtimes(name string, atime, mtime time.Time) error
	Mkdir(name string, perm fs.FileMode) error
	ReadDir(name string) ([]fs.DirEntry, error)
	// SyncDir makes the entries of a directory (creations, renames) durable.
	SyncDir(name string) error
	// SyncFS makes everything written to the file system holding the store
	// durable: one barrier for a batch. It returns errSyncFSUnsupported where
	// the platform has no such call.
	SyncFS() error
}

// file is the part of *os.File the store uses.
type file interface {
	io.Reader
	io.Writer
	io.Closer
	Name() string
	Sync() error
	Stat() (fs.FileInfo, error)
}

// writebackChecker is a file that reports its own write-back errors (see
// writebackErr): the files of a test's file system, which inject them.
type writebackChecker interface {
	writebackErr() error
}

var errSyncFSUnsupported = errors.New("syncfs not supported")

// rootFS implements fileSystem on an os.Root, so that no name, whatever it
// holds, reaches outside the store root, and no symbolic link leads out.
// Walking a name through os.Root costs a system call per element, so each
// shard directory has a cached entry (see shardRoot), opened on first use,
// and names inside one shard cost one call.
type rootFS struct {
	root   *os.Root
	mu     sync.Mutex
	shards map[string]*shardRoot
	// retired counts the shard entries dropped because their directory
	// was removed; each is closed once no call uses it.
	retired int
	// blobs is the blobs directory, where the temp pool's files are,
	// opened through root on first use, for renames out of it (see
	// shardRoot.dir). mu guards it.
	blobs *os.File
}

// shardRoot is a shard directory's cached descriptors and the number of
// calls using them, so that an entry dropped from the cache is closed by
// its last user rather than kept open until the store closes.
type shardRoot struct {
	// name is the shard's, "3f".
	name string
	// dir is the shard directory, opened when the entry is made, for the
	// calls a descriptor of the directory itself serves in one system
	// call: a blob created, a rename into the shard, a sync of its entries.
	dir *os.File
	// root is a Root on the directory, opened on first use by the calls
	// that go through one (reads, stats, removals): the writes of a store
	// just opened, spread over every shard, need none. rootFS.mu guards it.
	root    *os.Root
	refs    int
	dropped bool
}

// close closes the directory's descriptor and the Root, once no call uses
// them. The caller holds rootFS.mu.
func (sr *shardRoot) close() {
	sr.dir.Close()
	if sr.root != nil {
		sr.root.Close()
	}
}

// opener returns sr's directory, in the form createAt and renameAt take.
func (sr *shardRoot) opener() func() (*os.File, error) {
	return func() (*os.File, error) { return sr.dir, nil }
}

// blobsDir returns the blobs directory's descriptor, opened on first use.
func (r *rootFS) blobsDir() (*os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.blobs == nil {
		f, err := r.root.Open(BlobsDir)
		if err != nil {
			return nil, err
		}
		r.blobs = f
	}
	return r.blobs, nil
}

// shardRoot returns sr's Root, opened on first use. The caller holds a
// reference to sr.
func (r *rootFS) shardRoot(sr *shardRoot) (*os.Root, error) {
	r.mu.Lock()
	root := sr.root
	r.mu.Unlock()
	if root != nil {
		return root, nil
	}
	// Opened without the lock, which every blob's call takes.
	opened, err := r.root.OpenRoot(BlobsDir + "/" + sr.name)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if sr.root != nil {
		opened.Close() // another call's was first
		return sr.root, nil
	}
	sr.root = opened
	return opened, nil
}

// openShardDir opens a shard directory: with one openat(2) on the blobs
// directory's descriptor where the platform has it (a shard that is a
// symbolic link is refused, and its names go through the store's Root),
// else through the Root.
func (r *rootFS) openShardDir(shard string) (*os.File, error) {
	blobs, err := r.blobsDir()
	if err != nil {
		return nil, err
	}
	d, err := openDirAt(blobs, shard)
	if errors.Is(err, errors.ErrUnsupported) {
		return r.root.Open(BlobsDir + "/" + shard)
	}
	return d, err
}

func newRootFS(root *os.Root) *rootFS {
	return &rootFS{root: root, shards: make(map[string]*shardRoot)}
}

// resolve returns the Root and name to use for a name relative to the store
// root: the shard's own Root for blobs/<shard>/<file>. The caller calls
// release once done with the Root.
func (r *rootFS) resolve(name string) (root *os.Root, base string, release func()) {
	sr, base, release := r.resolveShard(name)
	if sr == nil {
		return r.root, base, release
	}
	root, base = r.walker(sr, name, base)
	return root, base, release
}

// walker returns the Root and name for name in sr: sr's Root and base,
// or, when that Root cannot be had, the store's and name.
func (r *rootFS) walker(sr *shardRoot, name, base string) (*os.Root, string) {
	root, err := r.shardRoot(sr)
	if err != nil {
		return r.root, name
	}
	return root, base
}

// resolveShard returns the shard's cached entry for a name in a shard
// (blobs/<shard>/<file>) and the file's name in it, or nil and name for a
// name outside the shards or a shard that could not be opened.
func (r *rootFS) resolveShard(name string) (sr *shardRoot, base string, release func()) {
	shard, base, ok := splitShard(name)
	if !ok {
		return nil, name, func() {}
	}
	r.mu.Lock()
	sr = r.shards[shard]
	if sr != nil {
		sr.refs++
	}
	r.mu.Unlock()
	if sr == nil {
		// Opened without the lock: a store's first writes open many
		// shards at once.
		dir, err := r.openShardDir(shard)
		if err != nil {
			return nil, name, func() {}
		}
		r.mu.Lock()
		if sr = r.shards[shard]; sr != nil {
			dir.Close() // another call's was first
		} else {
			sr = &shardRoot{name: shard, dir: dir}
			r.shards[shard] = sr
		}
		sr.refs++
		r.mu.Unlock()
	}
	return sr, base, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		sr.refs--
		if sr.dropped && sr.refs == 0 {
			sr.close()
		}
	}
}

// splitShard splits blobs/<shard>/<file> into its shard and file names.
func splitShard(name string) (shard, base string, ok bool) {
	const prefix = BlobsDir + "/"
	if len(name) < len(prefix)+4 || name[:len(prefix)] != prefix || name[len(prefix)+2] != '/' {
		return "", "", false
	}
	shard, base = name[len(prefix):len(prefix)+2], name[len(prefix)+3:]
	if !isShardName(shard) || strings.ContainsRune(base, '/') {
		return "", "", false
	}
	return shard, base, true
}

// drop removes a shard's entry from the cache if it is sr (any entry when
// sr is nil); it is closed now if no call uses it, else by the last.
func (r *rootFS) drop(shard string, sr *shardRoot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.shards[shard]
	if cur == nil || (sr != nil && cur != sr) {
		return
	}
	delete(r.shards, shard)
	cur.dropped = true
	r.retired++
	if cur.refs == 0 {
		cur.close()
	}
}

// forget drops the cached entry of the shard holding name, after an error
// that says its directory may have been removed and made anew.
func (r *rootFS) forget(name string, err error) {
	if !errors.Is(err, fs.ErrNotExist) {
		return
	}
	sr, _, release := r.resolveShard(name)
	defer release()
	if sr == nil {
		return
	}
	// Most often the file is missing from a shard that is still there:
	// the cached entry stays.
	if cached, err := sr.dir.Stat(); err == nil {
		if cur, err := r.root.Lstat(name[:len(BlobsDir)+3]); err == nil && os.SameFile(cached, cur) {
			return
		}
	}
	r.drop(sr.name, sr)
}

func (r *rootFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	f, inShard, err := r.openFile(name, flag, perm)
	if err != nil && inShard && errors.Is(err, fs.ErrNotExist) {
		// The cached shard directory may have been removed (packing removes
		// empty shards) and made anew by another process: look again.
		r.forget(name, err)
		f, _, err = r.openFile(name, flag, perm)
	}
	if err != nil {
		r.forget(name, err)
		return nil, err
	}
	return f, nil
}

// openFile opens name through its shard's cached Root (inShard), or the
// store root's; a file it creates in a shard or in the blobs directory is
// made on the directory's descriptor (see createAt).
func (r *rootFS) openFile(name string, flag int, perm fs.FileMode) (f *os.File, inShard bool, err error) {
	sr, base, release := r.resolveShard(name)
	defer release()
	switch {
	case sr != nil:
		f, err = createAt(sr.opener(), base, flag, perm, func() (*os.File, error) {
			root, base := r.walker(sr, name, base)
			return root.OpenFile(base, flag, perm)
		})
		return f, true, err
	case path.Dir(name) == BlobsDir:
		f, err = createAt(r.blobsDir, path.Base(name), flag, perm,
			func() (*os.File, error) { return r.root.OpenFile(name, flag, perm) })
		return f, false, err
	}
	f, err = r.root.OpenFile(name, flag, perm)
	return f, false, err
}

func (r *rootFS) Rename(oldname, newname string) error {
	so, bo, releaseOld := r.resolveShard(oldname)
	sn, bn, releaseNew := r.resolveShard(newname)
	var err error
	switch {
	case so != nil && so == sn:
		// Both in one shard directory: one system call on its descriptor.
		err = renameAt(so.opener(), bo, so.opener(), bn, func() error {
			root, base := r.walker(so, oldname, bo)
			if root == r.root {
				return root.Rename(oldname, newname)
			}
			return root.Rename(base, bn)
		})
	case so == nil && sn != nil && path.Dir(oldname) == BlobsDir:
		// A pooled temp file into its shard.
		err = renameAt(r.blobsDir, path.Base(oldname), sn.opener(), bn,
			func() error { return r.root.Rename(oldname, newname) })
	default:
		err = r.root.Rename(oldname, newname)
	}
	releaseOld()
	releaseNew()
	if err != nil {
		r.forget(newname, err)
	}
	return err
}

func (r *rootFS) Remove(name string) error {
	root, base, release := r.resolve(name)
	err := root.Remove(base)
	release()
	if err == nil && root == r.root {
		// A shard directory removed here: its cached Root names nothing.
		if shard, ok := strings.CutPrefix(name, BlobsDir+"/"); ok && isShardName(shard) {
			r.drop(shard, nil)
		}
	}
	return err
}

func (r *rootFS) Lstat(name string) (fs.FileInfo, error) {
	root, base, release := r.resolve(name)
	fi, err := root.Lstat(base)
	release()
	if err != nil && root != r.root && errors.Is(err, fs.ErrNotExist) {
		r.forget(name, err)
		root, base, release = r.resolve(name)
		fi, err = root.Lstat(base)
		release()
	}
	return fi, err
}

func (r *rootFS) Peek(name string) (fs.FileInfo, error) {
	root, base, release := r.resolve(name)
	defer release()
	return root.Lstat(base)
}

func (r *rootFS) Chtimes(name string, atime, mtime time.Time) error {
	root, base, release := r.resolve(name)
	defer release()
	return root.Chtimes(base, atime, mtime)
}

func (r *rootFS) Mkdir(name string, perm fs.FileMode) error { return r.root.Mkdir(name, perm) }

func (r *rootFS) ReadDir(name string) ([]fs.DirEntry, error) {
	f, err := r.root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

func (r *rootFS) SyncDir(name string) error {
	sr, _, release := r.resolveShard(name + "/.")
	if sr != nil {
		defer release()
		return sr.dir.Sync()
	}
	release()
	f, err := r.root.Open(name)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (r *rootFS) SyncFS() error {
	f, err := r.root.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	return syncfs(f)
}

func (r *rootFS) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range r.shards {
		v.close()
		delete(r.shards, k)
	}
	if r.blobs != nil {
		r.blobs.Close()
		r.blobs = nil
	}
}

// plainName reports whether name is one element naming an entry of its
// directory: not empty, not "." or "..", without a separator.
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && !strings.ContainsRune(name, 0)
}
