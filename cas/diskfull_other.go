//go:build !windows

package cas

import (
	"errors"
	"syscall"
)

// isDiskFull reports whether err says the file system or the user's quota
// has no space left.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
