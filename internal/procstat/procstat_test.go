package procstat

import (
	"runtime"
	"testing"
	"time"
)

// touched keeps every buffer TestPeakRSSKiB touched, so that each run of
// it (with -count) raises the peak anew instead of reusing freed memory.
var touched [][]byte

// Touching 32 MiB raises the peak by about as much.
func TestPeakRSSKiB(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("PeakRSSKiB: no peak resident set size on windows (no getrusage)")
	}
	before := PeakRSSKiB()
	if before <= 0 {
		t.Fatalf("PeakRSSKiB() = %d, want a size", before)
	}
	buf := make([]byte, 32<<20)
	for i := range buf {
		if i%4096 == 0 {
			buf[i] = 1
		}
	}
	after := PeakRSSKiB()
	if after-before < 24<<10 {
		t.Errorf("peak went from %d KiB to %d KiB after touching 32 MiB", before, after)
	}
	touched = append(touched, buf)
}

// Spinning adds CPU time (polled with a deadline: on a busy machine the
// spinning goroutine gets less than all of a core); sleeping adds almost
// none.
func TestCPUTime(t *testing.T) {
	before := CPUTime()
	if before <= 0 {
		t.Fatalf("CPUTime() = %v, want a time", before)
	}
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for CPUTime()-before < 30*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("10 s of spinning added %v of CPU time, want 30 ms", CPUTime()-before)
		}
		for range 10000 {
			x++
		}
	}
	spun := CPUTime()
	time.Sleep(50 * time.Millisecond)
	if slept := CPUTime() - spun; slept > 25*time.Millisecond {
		t.Errorf("50 ms asleep added %v of CPU time, want under 25 ms", slept)
	}
	_ = x
}
