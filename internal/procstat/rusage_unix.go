//go:build unix

package procstat

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time the process has used so far, in user and
// system mode together, from getrusage; 0 when it cannot tell.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rusagePeakKiB returns getrusage's peak resident set size in KiB, or -1
// when getrusage fails: where there is no /proc/self/status to read.
func rusagePeakKiB() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return int64(ru.Maxrss) / maxrssPerKiB
}
