package cas

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// haveSyncFS says whether syncfs flushes a file system in one call.
const haveSyncFS = true

// syncfs flushes the whole file system holding f to stable storage, data and
// metadata, and reports write-back errors (Linux 5.8 and later).
func syncfs(f *os.File) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.Syncfs(int(fd)) }); err != nil {
		return err
	}
	return serr
}

// datasync flushes f's bytes, and the metadata needed to read them, to
// stable storage, as fdatasync(2) does: unlike fsync, it does not wait for
// a change of modification time alone.
func datasync(f file) error {
	of, ok := f.(*os.File)
	if !ok {
		return f.Sync()
	}
	raw, err := of.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = ignoringEINTR(func() error { return unix.Fdatasync(int(fd)) })
	}); err != nil {
		return err
	}
	return serr
}

// identify returns which file f is: its device, inode and birth time, where
// the file system records the birth time (statx's btime).
func identify(f file) (fileID, bool) {
	of, ok := f.(*os.File)
	if !ok {
		return fileID{}, false
	}
	raw, err := of.SyscallConn()
	if err != nil {
		return fileID{}, false
	}
	var st unix.Statx_t
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.Statx(int(fd), "", unix.AT_EMPTY_PATH, unix.STATX_BTIME|unix.STATX_INO, &st)
	}); err != nil || serr != nil || st.Mask&(unix.STATX_BTIME|unix.STATX_INO) != unix.STATX_BTIME|unix.STATX_INO {
		return fileID{}, false
	}
	return fileID{
		dev:  uint64(st.Dev_major)<<32 | uint64(st.Dev_minor),
		ino:  st.Ino,
		born: time.Unix(st.Btime.Sec, int64(st.Btime.Nsec)),
	}, true
}
