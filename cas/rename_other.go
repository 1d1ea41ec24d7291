//go:build !unix

package cas

import "os"

// renameAt renames through the Root: elsewhere than on Unix there is no
// renameat(2).
func renameAt(from func() (*os.File, error), oldname string, to func() (*os.File, error), newname string,
	viaRoot func() error) error {
	return viaRoot()
}
