//go:build !unix

package s3blob

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// openNoFollow opens the file at path with flag, never through a symbolic
// link at its last element. There is no O_NOFOLLOW here (Windows): the file
// is opened, then the name is looked at without following it, and the
// open is refused with ELOOP when the name is a link, or when it no longer
// names the file opened.
func openNoFollow(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, err
	}
	li, err := os.Lstat(path)
	if err != nil {
		f.Close()
		return nil, err
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	if li.Mode()&fs.ModeSymlink != 0 {
		return fail(syscall.ELOOP)
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if !os.SameFile(fi, li) {
		return fail(errors.New("file replaced while it was opened"))
	}
	return f, nil
}
