// Package procstat reads what the process knows of itself: its peak
// memory and the CPU time it used, for the benchmarks and the tests that
// bound them.
package procstat

import (
	"os"
	"strconv"
	"strings"
)

// PeakRSSKiB returns the process's peak resident set size in KiB: VmHWM
// from /proc/self/status on Linux, getrusage's maximum elsewhere, or -1
// when neither tells (on Windows, which has no getrusage).
func PeakRSSKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return rusagePeakKiB()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}
