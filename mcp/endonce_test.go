package mcp

import (
	"sync"
	"testing"
)

func TestEndOnce(t *testing.T) {
	var (
		mu    sync.Mutex
		ended bool
		runs  int
	)
	var wg sync.WaitGroup
	firsts := make(chan bool, 8)
	for range 8 {
		wg.Go(func() { firsts <- endOnce(&mu, &ended, func() { runs++ }) })
	}
	wg.Wait()
	close(firsts)
	n := 0
	for first := range firsts {
		if first {
			n++
		}
	}
	if n != 1 || runs != 1 || !ended {
		t.Errorf("8 endOnce calls: %d reported first, end ran %d times, ended %v; want 1, 1, true", n, runs, ended)
	}
}
