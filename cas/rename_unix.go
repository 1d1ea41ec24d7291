//go:build unix

package cas

import (
	"os"

	"golang.org/x/sys/unix"
)

// renameAt renames oldname in the directory from opens to newname in the
// directory to opens, with one renameat(2) on the two descriptors, where
// os.Root opens each name's directory again. Names that are not plain, or
// directories that cannot be had, go through viaRoot instead, which
// refuses what would lead out of the store.
func renameAt(from func() (*os.File, error), oldname string, to func() (*os.File, error), newname string,
	viaRoot func() error) error {
	if !plainName(oldname) || !plainName(newname) {
		return viaRoot()
	}
	src, err := from()
	if err != nil {
		return viaRoot()
	}
	dst, err := to()
	if err != nil {
		return viaRoot()
	}
	srcConn, err := src.SyscallConn()
	if err != nil {
		return viaRoot()
	}
	dstConn, err := dst.SyscallConn()
	if err != nil {
		return viaRoot()
	}
	var errno error
	err = srcConn.Control(func(srcFD uintptr) {
		err := dstConn.Control(func(dstFD uintptr) {
			errno = ignoringEINTR(func() error { return unix.Renameat(int(srcFD), oldname, int(dstFD), newname) })
		})
		if errno == nil {
			errno = err
		}
	})
	if err == nil {
		err = errno
	}
	if err != nil {
		return &os.LinkError{Op: "renameat", Old: oldname, New: newname, Err: err}
	}
	return nil
}

// ignoringEINTR calls f again while it fails with EINTR.
func ignoringEINTR(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}
