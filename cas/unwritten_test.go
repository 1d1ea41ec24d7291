package cas

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestParseUnwritten(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     int64
		ok       bool
	}{
		{"both", "MemTotal:       24000000 kB\nDirty:              1024 kB\nWriteback:            16 kB\nAnonPages: 1 kB\n", 1040 << 10, true},
		{"zero", "Dirty: 0 kB\nWriteback: 0 kB\n", 0, true},
		{"no Writeback", "Dirty: 10 kB\n", 0, false},
		{"empty", "", 0, false},
		{"not a number", "Dirty: x kB\nWriteback: 0 kB\n", 0, false},
		{"negative", "Dirty: -1 kB\nWriteback: 0 kB\n", 0, false},
		{"other unit", "Dirty: 1 MB\nWriteback: 0 kB\n", 0, false},
		{"WritebackTmp is not Writeback", "Dirty: 1 kB\nWritebackTmp: 5 kB\n", 0, false},
	} {
		got, err := parseUnwritten([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: parseUnwritten = %d, %v; want %d, ok %v", tc.name, got, err, tc.want, tc.ok)
		}
	}
	if _, err := os.Stat("/proc/meminfo"); err == nil {
		if n, err := UnwrittenBytes(); err != nil || n < 0 {
			t.Errorf("UnwrittenBytes() = %d, %v", n, err)
		}
	}
}

// The gauge looks at the unwritten bytes at most once every
// barrierGaugeAge, says no above BarrierUnwrittenMax or when it cannot
// look, and looks again once its look is old or the clock went back.
func TestBarrierGauge(t *testing.T) {
	now := time.Unix(1000, 0)
	var looks int
	unwritten, fail := int64(0), false
	g := &barrierGauge{now: func() time.Time { return now }, unwritten: func() (int64, error) {
		looks++
		if fail {
			return 0, errors.New("no meminfo")
		}
		return unwritten, nil
	}}
	step := func(d time.Duration, wantCheap bool, wantLooks int) {
		t.Helper()
		now = now.Add(d)
		if got := g.cheapNow(); got != wantCheap || looks != wantLooks {
			t.Errorf("after %v (%d unwritten, fail %v): cheap %v after %d looks, want %v after %d", d, unwritten, fail, got, looks, wantCheap, wantLooks)
		}
	}
	step(0, true, 1)
	unwritten = BarrierUnwrittenMax + 1
	step(barrierGaugeAge/2, true, 1) // the last look stands
	step(barrierGaugeAge, false, 2)
	unwritten = BarrierUnwrittenMax
	step(time.Millisecond, false, 2)
	step(-time.Hour, true, 3) // the clock went back: look again
	fail = true
	step(barrierGaugeAge, false, 4)
}
