package cas

import (
	"io/fs"
)

// lazyLister is a fileSystem that can list a directory's names and types
// without a look at each entry: a Root's ReadDir looks at every entry it
// lists, a system call per name, which is most of the cost of a walk of a
// large store.
type lazyLister interface {
	// ReadDirLazy lists the directory name as ReadDir does, the entries'
	// types from the listing itself; an entry's Info looks at it, through
	// the fileSystem, when asked.
	ReadDirLazy(name string) ([]fs.DirEntry, error)
}

// lazyDirEntry is an entry of ReadDirLazy: its name and type from the
// listing, and Info through the fileSystem's Lstat, inside the store root.
type lazyDirEntry struct {
	fs.DirEntry
	lstat func(string) (fs.FileInfo, error)
	rel   string
}

// Info looks at the entry through the store root.
func (e *lazyDirEntry) Info() (fs.FileInfo, error) { return e.lstat(e.rel) }

// readDirLazy lists dir with fsys's ReadDirLazy when it has one, and its
// ReadDir otherwise.
func readDirLazy(fsys fileSystem, dir string) ([]fs.DirEntry, error) {
	if l, ok := fsys.(lazyLister); ok {
		return l.ReadDirLazy(dir)
	}
	return fsys.ReadDir(dir)
}
