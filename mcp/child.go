package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// child is an upstream server running as a process of ours. It is started
// so that it cannot outlive the proxy: in its own process group, which
// stop signals as a whole, and, on Linux, with a parent-death signal, so
// that even a proxy killed with SIGKILL takes it down.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *tailBuffer
	done   chan struct{} // closed once the process is reaped
	err    error         // what Wait returned; set before done closes
	grace  time.Duration

	stopOnce sync.Once
}

// startChild starts cmd. The goroutine that starts it stays locked to its
// OS thread until the process ends, because Linux delivers the parent-death
// signal when the thread that forked the child exits, not the process.
func startChild(cmd *exec.Cmd, stderr io.Writer, grace time.Duration) (*child, error) {
	setDeathSignal(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, stdout: out, stderr: &tailBuffer{max: 2048}, done: make(chan struct{}), grace: grace}
	if stderr == nil {
		stderr = io.Discard
	}
	cmd.Stderr = io.MultiWriter(stderr, c.stderr)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with this goroutine, after the
		// process has ended.
		if err := cmd.Start(); err != nil {
			started <- err
			close(c.done)
			return
		}
		started <- nil
		c.err = cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// Pid returns the process id.
func (c *child) Pid() int { return c.cmd.Process.Pid }

// exited reports whether the process has ended, and how.
func (c *child) exited() (bool, string) {
	select {
	case <-c.done:
		return true, describeExit(c.err)
	default:
		return false, ""
	}
}

func describeExit(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("was killed by signal %s", ws.Signal())
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	if err != nil {
		return fmt.Sprintf("ended: %v", err)
	}
	return "exited with status 0"
}

// stop ends the process as the MCP stdio transport asks: close its stdin,
// wait, then SIGTERM its process group, wait, then SIGKILL it. It returns
// once the process is reaped.
func (c *child) stop() {
	c.stopOnce.Do(func() {
		c.stdin.Close()
		if c.wait(c.grace) {
			return
		}
		c.signalGroup(syscall.SIGTERM)
		if c.wait(c.grace) {
			return
		}
		c.signalGroup(syscall.SIGKILL)
		<-c.done
	})
	<-c.done
}

func (c *child) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// signalGroup signals the child's process group, so that a wrapper (npx,
// a shell) and what it started end together.
func (c *child) signalGroup(sig syscall.Signal) {
	if exited, _ := c.exited(); exited {
		return
	}
	if err := signalGroup(c.cmd.Process.Pid, sig); err != nil {
		c.cmd.Process.Signal(sig)
	}
}

// describe says how the process ended (or that it still runs), and the
// end of what it wrote to its stderr.
func (c *child) describe() string {
	how := "closed the connection"
	if exited, h := c.exited(); exited {
		how = h
	}
	return how + c.stderrNote()
}

// stderrNote quotes the end of the child's stderr, for an error message.
func (c *child) stderrNote() string {
	if s := c.stderr.String(); s != "" {
		return fmt.Sprintf("; its stderr ends with: %q", s)
	}
	return ""
}

// childExitWait is how long a child that closed its stdout has to exit
// before the proxy says it closed the connection.
const childExitWait = time.Second

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := bytes.TrimSpace(t.buf)
	if i := bytes.LastIndexByte(s, '\n'); i >= 0 && len(s)-i < 400 {
		// The last few lines are what says why.
		lines := bytes.Split(s, []byte("\n"))
		if len(lines) > 3 {
			s = bytes.Join(lines[len(lines)-3:], []byte("\n"))
		}
	}
	if len(s) > 400 {
		s = s[len(s)-400:]
	}
	return string(s)
}
