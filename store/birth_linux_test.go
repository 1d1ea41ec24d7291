package store

import (
	"testing"

	"golang.org/x/sys/unix"
)

// blobFileTold reports whether the file system under s records birth
// times, so that its blob store can tell a file it synced from one made
// later at the same inode.
func blobFileTold(t *testing.T, s *Store) bool {
	t.Helper()
	var st unix.Statx_t
	want := uint32(unix.STATX_BTIME | unix.STATX_INO)
	return unix.Statx(unix.AT_FDCWD, s.Dir(), 0, int(want), &st) == nil && st.Mask&want == want
}
