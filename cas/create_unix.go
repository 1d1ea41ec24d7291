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
	return openAt(d, name, flag, uint32(perm.Perm()))
}

// openAt opens name (one plain element) in dir with one openat(2), never
// following a symbolic link at name, and wraps the descriptor with
// os.NewFile.
func openAt(dir *os.File, name string, flag int, perm uint32) (*os.File, error) {
	conn, err := dir.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd, errno := -1, error(nil)
	err = conn.Control(func(dfd uintptr) {
		errno = ignoringEINTR(func() error {
			var err error
			fd, err = unix.Openat(int(dfd), name, flag|unix.O_CLOEXEC|unix.O_NOFOLLOW, perm)
			return err
		})
	})
	if err == nil {
		err = errno
	}
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir.Name(), name)), nil
}

// openDirAt opens the directory name (one plain element) in dir with one
// openat(2), which refuses a symbolic link at name: nothing outside dir is
// opened.
func openDirAt(dir *os.File, name string) (*os.File, error) {
	if !plainName(name) {
		return nil, &os.PathError{Op: "openat", Path: name, Err: fs.ErrInvalid}
	}
	return openAt(dir, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
}
