package main

import (
	"bytes"
	"testing"
	"time"
)

// slowSink takes what reaches a terminal at a few hundred KiB a second, as
// a terminal emulator drawing it does.
type slowSink struct{ seen chan struct{} }

func (s slowSink) Write(p []byte) (int, error) {
	select {
	case s.seen <- struct{}{}:
	default:
	}
	time.Sleep(10 * time.Millisecond)
	return len(p), nil
}

// TestInterruptGetTerminal: a plain get of a 50 MiB text part to a real
// terminal stops at Ctrl-C, exit 130, instead of writing it all.
func TestInterruptGetTerminal(t *testing.T) {
	sink := slowSink{make(chan struct{}, 1)}
	_, tty := openPTYTo(t, sink)
	dir := putParts(t, &repeatReader{'x', 50 << 20})
	cmd := casctl(t, "--store", dir, "get", "big/0_t_c.txt")
	cmd.Stdout = tty
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	select {
	case <-sink.seen:
	case <-time.After(30 * time.Second):
		t.Fatalf("nothing reached the terminal: %s", stderr.String())
	}
	code, msg := interrupt(t, cmd, &stderr)
	if code != exitInterrupted || msg != "casctl: get: interrupted\n" {
		t.Errorf("get to a terminal, then SIGINT: exit %d, %q; want 130, %q", code, msg, "casctl: get: interrupted\n")
	}
}
