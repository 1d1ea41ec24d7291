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

// writebackErr reports a write-back error of f's data since f was opened,
// however the data reached the disk (a syncfs, the kernel's own flusher)
// and whoever else was told of the error: sync_file_range(2) waits for the
// data's write-back and reports the errors the file's descriptor has not
// seen (errseq tracking, older than syncfs's own error reporting, which
// came with Linux 5.8), without a journal commit or a cache flush of
// its own, so that on a file the last barrier left clean it costs one
// system call. A file a test wraps answers for itself (writebackChecker).
func writebackErr(f file) error {
	of, ok := f.(*os.File)
	if !ok {
		if c, ok := f.(writebackChecker); ok {
			return c.writebackErr()
		}
		return nil
	}
	raw, err := of.SyscallConn()
	if err != nil {
		return err
	}
	const flags = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = ignoringEINTR(func() error { return unix.SyncFileRange(int(fd), 0, 0, flags) })
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "sync_file_range", Path: of.Name(), Err: serr}
	}
	return nil
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
