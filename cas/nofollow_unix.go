//go:build unix

package cas

import "syscall"

// openNoFollow opens rel in fsys with flag, never through a symbolic link
// at its last element: O_NOFOLLOW makes the open itself fail with ELOOP
// there, in one system call.
func openNoFollow(fsys fileSystem, rel string, flag int) (file, error) {
	return fsys.OpenFile(rel, flag|syscall.O_NOFOLLOW, 0)
}
