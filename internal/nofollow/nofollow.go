// Package nofollow checks that a file opened by name was not opened through
// a symbolic link, where the system has no O_NOFOLLOW to refuse one.
package nofollow

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// ErrReplaced is wrapped by Verify when the name no longer names the file
// that was opened by it.
var ErrReplaced = errors.New("file replaced while it was opened")

// Verify returns nil when name, looked up with lstat (which does not follow
// a last link), names f, the file just opened by it. When name is a link it
// returns a *fs.PathError wrapping syscall.ELOOP, as an open with O_NOFOLLOW
// fails; when name now names another file, one wrapping ErrReplaced; and
// lstat's own error when it fails. The caller closes f on an error.
func Verify(name string, f interface{ Stat() (fs.FileInfo, error) }, lstat func(string) (fs.FileInfo, error)) error {
	li, err := lstat(name)
	if err != nil {
		return err
	}
	fail := func(err error) error { return &fs.PathError{Op: "open", Path: name, Err: err} }
	if li.Mode()&fs.ModeSymlink != 0 {
		return fail(syscall.ELOOP)
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if !os.SameFile(fi, li) {
		return fail(ErrReplaced)
	}
	return nil
}
