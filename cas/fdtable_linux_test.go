package cas

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fdSize reads the process's descriptor table size, as Linux reports it.
func fdSize(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "FDSize:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no FDSize in /proc/self/status")
	return 0
}

// A store opened for writing grows the descriptor table to fdTableSize
// in the background, once, and leaves no descriptor open for it.
func TestGrowFDTable(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < fdTableSize {
		t.Skipf("the limit on descriptors is %d: growFDTable does nothing under %d", lim.Cur, fdTableSize)
	}
	open := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := open()
	s, err := Open(t.Context(), t.TempDir(), WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(30 * time.Second) // for a loaded machine
	for fdSize(t) < fdTableSize {
		if time.Now().After(deadline) {
			t.Fatalf("the descriptor table holds %d after a store opened, want %d", fdSize(t), fdTableSize)
		}
		time.Sleep(time.Millisecond)
	}
	// The store's own descriptors (its root) are open; the one dup'ed
	// high is not.
	if after := open(); after > before+2 {
		t.Errorf("%d descriptors open before the store opened, %d after", before, after)
	}
}
