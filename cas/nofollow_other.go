//go:build !unix

package cas

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// openNoFollow opens rel in fsys with flag, never through a symbolic link
// at its last element. There is no O_NOFOLLOW here (Windows), and os.Root
// follows a link that stays inside the root: the file is opened, then the
// name is looked at without following it, and the open is refused with
// ELOOP when the name is a link, or with errReplaced when it no longer
// names the file opened.
func openNoFollow(fsys fileSystem, rel string, flag int) (file, error) {
	f, err := fsys.OpenFile(rel, flag, 0)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (file, error) {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	li, err := fsys.Lstat(rel)
	if err != nil {
		f.Close()
		return nil, err
	}
	if li.Mode()&fs.ModeSymlink != 0 {
		return fail(syscall.ELOOP)
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if !os.SameFile(fi, li) {
		return fail(errReplaced)
	}
	return f, nil
}

// errReplaced is the error of an open whose name was changed to name
// another file while it was opened.
var errReplaced = errors.New("file replaced while it was opened")
