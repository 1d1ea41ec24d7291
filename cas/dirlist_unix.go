//go:build unix

package cas

import (
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ReadDirLazy opens the directory through the root, and lists it through a
// second descriptor of the same directory that is no Root's: an os.File
// opened in a Root looks at every name it lists, where one of its own
// takes the names' types from the listing. Every look at an entry
// afterwards goes through the root again.
func (r *rootFS) ReadDirLazy(name string) ([]fs.DirEntry, error) {
	f, err := r.root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd, derr := -1, error(nil)
	if err := raw.Control(func(p uintptr) { fd, derr = unix.FcntlInt(p, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, &os.PathError{Op: "dup", Path: name, Err: derr}
	}
	// Named by its absolute path: a file system that gives no types in its
	// listings has each entry looked at by that name, for its type only.
	d := os.NewFile(uintptr(fd), filepath.Join(r.root.Name(), filepath.FromSlash(name)))
	defer d.Close()
	des, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	lazy := make([]lazyDirEntry, len(des))
	for i, de := range des {
		lazy[i] = lazyDirEntry{DirEntry: de, lstat: r.Lstat, rel: name + "/" + de.Name()}
		des[i] = &lazy[i]
	}
	return des, nil
}
