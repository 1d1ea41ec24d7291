//go:build unix

package s3blob

import (
	"os"
	"syscall"
)

// openNoFollow opens the file at path with flag, never through a symbolic
// link at its last element: O_NOFOLLOW makes the open itself fail there.
func openNoFollow(path string, flag int) (*os.File, error) {
	return os.OpenFile(path, flag|syscall.O_NOFOLLOW, 0)
}
