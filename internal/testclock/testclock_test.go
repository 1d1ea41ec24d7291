package testclock

import (
	"sync"
	"testing"
	"time"
)

// The clock reads what it was set to, moves by what is added, and can be
// read and moved from goroutines at once (run with -race).
func TestClock(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				c.Add(time.Second)
				c.Now()
			}
		})
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(400*time.Second); !got.Equal(want) {
		t.Errorf("after 400 one-second moves Now = %v, want %v", got, want)
	}
	c.Set(start)
	if got := c.Now(); !got.Equal(start) {
		t.Errorf("after Set Now = %v, want %v", got, start)
	}
}
