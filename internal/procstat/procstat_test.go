package procstat

import "testing"

// Touching 32 MiB raises the peak by about as much.
func TestPeakRSSKiB(t *testing.T) {
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
	_ = buf[len(buf)-1]
}
