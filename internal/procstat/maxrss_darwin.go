package procstat

// maxrssPerKiB is the units of getrusage's ru_maxrss in a KiB: on macOS
// it counts bytes.
const maxrssPerKiB = 1024
