package cas

import (
	"errors"
	"syscall"

	"golang.org/x/sys/windows"
)

// isDiskFull reports whether err says the volume or the user's quota has
// no space left: Windows says so with its own error codes, which
// syscall.ENOSPC does not match; ENOSPC and EDQUOT still count, for the
// errors made to look like Unix's (tests inject them).
func isDiskFull(err error) bool {
	return errors.Is(err, windows.ERROR_DISK_FULL) || errors.Is(err, windows.ERROR_HANDLE_DISK_FULL) ||
		errors.Is(err, windows.ERROR_DISK_QUOTA_EXCEEDED) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
