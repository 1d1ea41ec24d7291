package main

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a real pseudo-terminal and returns its two ends.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	return openPTYTo(t, io.Discard)
}

// openPTYTo is openPTY, with what reaches the terminal copied to sink.
func openPTYTo(t *testing.T, sink io.Writer) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("pty number: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open pty: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	// Whatever reaches the terminal is drained, so no write blocks.
	go io.Copy(sink, m)
	return m, s
}

// TestTerminalPty runs get and put with a real terminal, as a person at one
// does, with casctl's own terminal check: get refuses to write an image to
// it, put refuses to wait on it.
func TestTerminalPty(t *testing.T) {
	_, tty := openPTY(t)
	dir := t.TempDir()
	ctx := context.Background()
	img := filepath.Join(dir, "shot.png")
	var buf bytes.Buffer
	png.Encode(&buf, image.NewGray(image.Rect(0, 0, 2, 2)))
	os.WriteFile(img, buf.Bytes(), 0o644)
	casctl := func(stdin io.Reader, stdout io.Writer, args ...string) (int, string) {
		var errb bytes.Buffer
		code := run(ctx, append([]string{"--store", filepath.Join(dir, "s")}, args...), stdin, stdout, &errb)
		return code, errb.String()
	}
	if code, msg := casctl(strings.NewReader(""), io.Discard, "init"); code != 0 {
		t.Fatal(msg)
	}
	if code, msg := casctl(strings.NewReader(""), io.Discard, "put", "--tool", "screenshot", "--run", "r", img); code != 0 {
		t.Fatal(msg)
	}
	code, msg := casctl(strings.NewReader(""), tty, "get", "r/0_screenshot_call0.png")
	if code != 1 || !strings.Contains(msg, "stdout is a terminal: redirect it") {
		t.Errorf("get of an image to a terminal: exit %d, %q", code, msg)
	}
	var out bytes.Buffer
	if code, msg := casctl(strings.NewReader(""), &out, "get", "r/0_screenshot_call0.png"); code != 0 || !bytes.Equal(out.Bytes(), buf.Bytes()) {
		t.Errorf("get of an image to a pipe: exit %d, %q, %d bytes", code, msg, out.Len())
	}
	// A terminal as stdin: put returns at once instead of waiting for input.
	code, msg = casctl(tty, io.Discard, "put", "--tool", "x")
	if code != 2 || !strings.Contains(msg, "stdin is a terminal") {
		t.Errorf("put from a terminal: exit %d, %q", code, msg)
	}
}
