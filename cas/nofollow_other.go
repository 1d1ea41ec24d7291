//go:build !unix

package cas

import "github.com/toolcas/toolcas/internal/nofollow"

// openNoFollow opens rel in fsys with flag, never through a symbolic link
// at its last element. There is no O_NOFOLLOW here (Windows), and os.Root
// follows a link that stays inside the root: the file is opened, then
// nofollow.Verify refuses it when the name is a link or no longer names
// the file opened.
func openNoFollow(fsys fileSystem, rel string, flag int) (file, error) {
	f, err := fsys.OpenFile(rel, flag, 0)
	if err != nil {
		return nil, err
	}
	if err := nofollow.Verify(rel, f, fsys.Lstat); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
