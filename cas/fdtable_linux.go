package cas

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// fdTableSize is how many descriptors the process's table holds once a
// store opens (see growFDTable): a store keeps a descriptor for each of
// its 256 shard directories it uses, beside the index's files.
const fdTableSize = 1024

var growFDTableOnce sync.Once

// growFDTable makes the process's descriptor table hold fdTableSize
// descriptors, once: with a descriptor at fdTableSize-1 or above, dup'ed
// from one of the directory dir and closed at once (F_DUPFD takes the lowest free one, so no
// descriptor in use is touched). Linux grows a table that several threads
// share, as a Go program's, by doubling it, and waits for an RCU grace
// period each time it does: a store filling its shard directories' cache
// from 64 descriptors to 512 paid three, milliseconds each, inside the
// first writes of a process (the real trace's first replay in a process
// spent 18-36 ms in openat, its second 3.5 ms). Grown once, at open, the
// table costs one wait there. Where the limit on descriptors is lower,
// nothing is done.
func growFDTable(dir string) {
	growFDTableOnce.Do(func() {
		f, err := os.Open(dir)
		if err != nil {
			return
		}
		defer f.Close()
		conn, err := f.SyscallConn()
		if err != nil {
			return
		}
		conn.Control(func(fd uintptr) {
			if high, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, fdTableSize-1); err == nil {
				unix.Close(high)
			}
		})
	})
}
