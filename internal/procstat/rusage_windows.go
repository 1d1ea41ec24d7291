package procstat

import (
	"time"

	"golang.org/x/sys/windows"
)

// CPUTime returns the CPU time the process has used so far, in user and
// kernel mode together: Windows has no getrusage, and GetProcessTimes
// tells the same; 0 when it cannot tell.
func CPUTime() time.Duration {
	var created, exited, kernel, user windows.Filetime
	if windows.GetProcessTimes(windows.CurrentProcess(), &created, &exited, &kernel, &user) != nil {
		return 0
	}
	// FILETIME durations count 100 ns intervals.
	ticks := func(t windows.Filetime) int64 { return int64(t.HighDateTime)<<32 | int64(t.LowDateTime) }
	return time.Duration(ticks(kernel)+ticks(user)) * 100
}

// rusagePeakKiB is -1 on Windows, which has no getrusage: the peak working
// set is psapi's GetProcessMemoryInfo, which golang.org/x/sys/windows does
// not wrap, and a benchmark there reports no peak.
func rusagePeakKiB() int64 { return -1 }
