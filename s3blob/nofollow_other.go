//go:build !unix

package s3blob

import (
	"os"

	"github.com/toolcas/toolcas/internal/nofollow"
)

// openNoFollow opens the file at path with flag, never through a symbolic
// link at its last element. There is no O_NOFOLLOW here (Windows): the file
// is opened, then nofollow.Verify refuses it when the name is a link or no
// longer names the file opened.
func openNoFollow(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, err
	}
	if err := nofollow.Verify(path, f, os.Lstat); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
