//go:build !unix

package cas

import (
	"io/fs"
	"os"
)

// createAt creates through the Root: elsewhere than on Unix there is no
// openat(2).
func createAt(dir func() (*os.File, error), name string, flag int, perm fs.FileMode,
	viaRoot func() (*os.File, error)) (*os.File, error) {
	return viaRoot()
}
