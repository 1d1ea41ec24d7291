//go:build !unix

package cas

import (
	"errors"
	"io/fs"
	"os"
)

// createAt creates through the Root: elsewhere than on Unix there is no
// openat(2).
func createAt(dir func() (*os.File, error), name string, flag int, perm fs.FileMode,
	viaRoot func() (*os.File, error)) (*os.File, error) {
	return viaRoot()
}

// openDirAt returns errors.ErrUnsupported: elsewhere than on Unix there is
// no openat(2), and the caller opens the directory through the Root.
func openDirAt(dir *os.File, name string) (*os.File, error) {
	return nil, errors.ErrUnsupported
}
