//go:build unix

package cas

import (
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// createAt creates name (O_CREATE|O_EXCL with flag) in the directory dir
// opens, with one openat(2) on its descriptor, and wraps the descriptor
// with os.NewFile. os.Root's OpenFile takes the same one call to create it,
// then four fcntl(2) calls and an epoll_ctl(2) to try the file, a regular
// one, in the runtime's poller (os.NewFile asks one fcntl(2)): on a machine
// where a system call costs microseconds, those were a tenth of a
// one-part write without syncs. O_EXCL makes the call fail on any name
// that is already there, a symbolic link included, so nothing is created
// outside dir. Names that are not plain, or a directory that cannot be
// had, go through viaRoot instead.
func createAt(dir func() (*os.File, error), name string, flag int, perm fs.FileMode,
	viaRoot func() (*os.File, error)) (*os.File, error) {
	if !plainName(name) || flag&(os.O_CREATE|os.O_EXCL) != os.O_CREATE|os.O_EXCL {
		return viaRoot()
	}
	d, err := dir()
	if err != nil {
		return viaRoot()
	}
	conn, err := d.SyscallConn()
	if err != nil {
		return viaRoot()
	}
	fd, errno := -1, error(nil)
	err = conn.Control(func(dfd uintptr) {
		errno = ignoringEINTR(func() error {
			var err error
			fd, err = unix.Openat(int(dfd), name, flag|unix.O_CLOEXEC|unix.O_NOFOLLOW, uint32(perm.Perm()))
			return err
		})
	})
	if err == nil {
		err = errno
	}
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.Name(), name)), nil
}
