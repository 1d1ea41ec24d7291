package store

import (
	"math"

	"golang.org/x/sys/windows"
)

// freeBytes returns the bytes the user may still write on the volume
// holding dir: Windows has no statfs, and GetDiskFreeSpaceEx tells the
// bytes free to the caller, after its disk quota, as Bavail does on Unix.
func freeBytes(dir string) (int64, bool) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, false
	}
	var avail, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &free); err != nil {
		return 0, false
	}
	return int64(min(avail, math.MaxInt64)), true
}
