//go:build unix && !darwin

package procstat

// maxrssPerKiB is the units of getrusage's ru_maxrss in a KiB: on Linux
// and the BSDs it counts KiB.
const maxrssPerKiB = 1
