package quiesce

import "testing"

type worker struct{ waited int }

func TestWait(t *testing.T) {
	Register(func(w *worker) { w.waited++ })
	w := &worker{}
	Wait(w)
	Wait(w)
	if w.waited != 2 {
		t.Errorf("Wait called the registered wait %d times, want 2", w.waited)
	}
	// A type with no wait: nothing to do, no panic.
	Wait(3)
	Wait(nil)
}
