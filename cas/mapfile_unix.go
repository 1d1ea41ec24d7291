//go:build unix

package cas

import (
	"os"
	"syscall"
)

// mapFile maps n bytes of f from off, read only, and returns them with
// the function that unmaps them.
func mapFile(f *os.File, off, n int64) ([]byte, func(), error) {
	start := off &^ int64(os.Getpagesize()-1)
	m, err := syscall.Mmap(int(f.Fd()), start, int(off-start+n), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return m[off-start:], func() { syscall.Munmap(m) }, nil
}
