package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// Child roles of the lock tests; each gets the arguments after the role.
var lockRoles = map[string]func(args []string) error{
	// slowput DIR: Put whatever stdin brings, at stdin's pace.
	"slowput": func(a []string) error {
		ctx := context.Background()
		s, err := Open(ctx, a[0])
		if err != nil {
			return err
		}
		defer s.Close()
		res, err := s.Put(ctx, StreamPart{Key: hook.Key{Run: "slow", Step: 1, Tool: "t", CallID: "c", Part: -1}}, os.Stdin)
		if err != nil {
			return err
		}
		fmt.Println("PUT", res.Key, res.Digest)
		return nil
	},
	// gchold DIR: run gc, and once it holds the locks say GC_LOCKED and
	// wait for stdin to close before going on.
	"gchold": func(a []string) error {
		ctx := context.Background()
		held := false
		s, err := Open(ctx, a[0], withFaults(func(p string) error {
			if p == "gc:sweep" && !held {
				held = true
				fmt.Println("GC_LOCKED")
				io.Copy(io.Discard, os.Stdin)
			}
			return nil
		}))
		if err != nil {
			return err
		}
		defer s.Close()
		_, err = s.GC(ctx, GCOptions{Grace: 0})
		return err
	},
	// writeonce DIR MS: one write with a lock timeout of MS milliseconds;
	// it prints what happened and exits 0 either way.
	"writeonce": func(a []string) error {
		ctx := context.Background()
		ms, _ := strconv.Atoi(a[1])
		s, err := Open(ctx, a[0], WithLockTimeout(time.Duration(ms)*time.Millisecond))
		if err != nil {
			return err
		}
		defer s.Close()
		start := time.Now()
		_, err = s.Write(ctx, []hook.Item{item("once", os.Getpid(), fmt.Sprint("from ", os.Getpid()))})
		if err != nil {
			fmt.Printf("WRITE_ERR locked=%v after=%v: %v\n", errors.Is(err, ErrLocked), time.Since(start).Round(time.Millisecond), err)
			return nil
		}
		fmt.Println("WRITE_OK")
		return nil
	},
	// busywriter DIR SEED STOP: write batches back to back, durably, until
	// the file STOP exists, so that a few of them keep gc.lock shared all
	// the time.
	"busywriter": func(a []string) error {
		ctx := context.Background()
		s, err := Open(ctx, a[0])
		if err != nil {
			return err
		}
		defer s.Close()
		seed, _ := strconv.Atoi(a[1])
		until := loopEndOf(fmt.Sprint(raceDeadline.Milliseconds()), a[2])
		body := content(uint64(seed), 256<<10)
		n := 0
		for ; ; n++ {
			if stop, err := until.done(n); stop {
				if err != nil {
					return err
				}
				break
			}
			// Distinct content made cheaply, so that the gap between two
			// writes is short.
			items := make([]hook.Item, 8)
			for i := range items {
				head := fmt.Sprintf("%d/%d/%d\n", seed, n, i)
				items[i] = item(fmt.Sprintf("busy-%d", seed), n*8+i, head+string(body[len(head):]))
			}
			if _, err := s.Write(ctx, items); err != nil {
				return err
			}
			if n == 0 {
				fmt.Println("STARTED")
			}
		}
		fmt.Println("WRITES", n)
		return nil
	},
}

// waitLine reads r until a line starting with prefix, or fails the test
// after d.
func waitLine(t *testing.T, r io.Reader, prefix string, d time.Duration) {
	t.Helper()
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), prefix) {
				found <- true
				io.Copy(io.Discard, r)
				return
			}
		}
		found <- false
	}()
	select {
	case ok := <-found:
		if !ok {
			t.Fatalf("child ended without saying %s", prefix)
		}
	case <-time.After(d):
		t.Fatalf("no %s from the child in %v", prefix, d)
	}
}

// waitExit waits for a child, killing it and failing the test if it does
// not end within d: a hang is the failure these tests look for.
func waitExit(t *testing.T, cmd *exec.Cmd, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		t.Fatalf("child %d still running after %v: it hangs", cmd.Process.Pid, d)
		return nil
	}
}

// TestLockSlowProducer: a put whose producer trickles its content through a
// pipe holds no lock while it waits for it. gc with no grace period runs
// meanwhile, and leaves the put's temp file alone because the put holds its
// lock; the put then completes and reads back whole.
func TestLockSlowProducer(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	data := content(7, 3<<20)
	cmd := childCmd("slowput", s.Dir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// More than cas holds in memory, so that the put streams to a temp file.
	if _, err := stdin.Write(data[:2<<20]); err != nil {
		t.Fatal(err)
	}
	temp := pollTemp(t, s, 1<<20)
	// The producer is stalled mid-stream: gc must neither wait for it nor
	// delete its temp file.
	res, err := s.GC(ctx, GCOptions{Grace: 0, LockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("gc while a put streams: %v", err)
	}
	if res.InUseTemp != 1 || res.RemovedTemp != 0 {
		t.Errorf("gc = %+v, want the streaming put's temp file kept as in use", res)
	}
	if _, err := os.Stat(temp); err != nil {
		t.Fatalf("gc --grace 0s deleted the temp file of a put in progress: %v", err)
	}
	mustWrite(t, s, item("other", 1, "a write while the producer stalls"))
	if _, err := stdin.Write(data[2<<20:]); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := waitExit(t, cmd, time.Minute); err != nil {
		t.Fatalf("slow put: %v: %s", err, out.String())
	}
	if !strings.Contains(out.String(), "PUT slow/") {
		t.Fatalf("slow put said %q", out.String())
	}
	c, err := s.Read(ctx, "slow", "slow/1_t_c.txt")
	if err != nil || !bytes.Equal(c.Data, data) {
		t.Fatalf("read back the slow put: %v (%d bytes)", err, len(c.Data))
	}
}

// pollTemp waits for a temp file of at least size bytes under blobs/.
func pollTemp(t *testing.T, s *Store, size int64) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		m, _ := filepath.Glob(filepath.Join(s.Dir(), "blobs", ".tmp-*"))
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && fi.Size() >= size {
				return p
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no temp file of the streaming put appeared")
	return ""
}

// TestLockStoppedGC: a gc stopped (SIGSTOP) while it holds the store's
// locks makes writers wait only until their deadline: writer processes with
// a short lock timeout, a write with a context deadline, and the hook's
// Offload all fail with ErrLocked naming gc's pid, and a second gc gives up
// the same way. Once gc goes on, writes succeed again.
func TestLockStoppedGC(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("a lock's holder is named from /proc/locks, which %s does not have", runtime.GOOS)
	}
	ctx := context.Background()
	s := MustOpen(t)
	mustWrite(t, s, item("before", 1, "written before gc"))
	gc := childCmd("gchold", s.Dir())
	stdin, _ := gc.StdinPipe()
	stdout, _ := gc.StdoutPipe()
	gc.Stderr = os.Stderr
	if err := gc.Start(); err != nil {
		t.Fatal(err)
	}
	defer gc.Process.Kill()
	waitLine(t, stdout, "GC_LOCKED", 30*time.Second)
	pid := gc.Process.Pid
	if err := stopProcess(pid); err != nil {
		t.Fatal(err)
	}
	defer continueProcess(pid)
	wantPID := fmt.Sprintf("pid %d", pid)

	// Writer processes with a lock timeout of their own.
	var writers []*exec.Cmd
	for range 3 {
		writers = append(writers, startChild(t, "writeonce", s.Dir(), "300"))
	}
	for i, w := range writers {
		if err := waitExit(t, w, 30*time.Second); err != nil {
			t.Fatalf("writer %d: %v: %s", i, err, w.Stdout)
		}
		got := fmt.Sprint(w.Stdout)
		if !strings.Contains(got, "WRITE_ERR locked=true") || !strings.Contains(got, wantPID) {
			t.Errorf("writer %d against a stopped gc said %q, want ErrLocked naming %s", i, got, wantPID)
		}
	}

	// The caller's deadline, through the hook.
	h, err := hook.New(s, policy.MustStrategies(policy.Default(policy.Always)))
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = h.Offload(dctx, hook.Step{Run: "hooked", Number: 1}, []hook.Result{{Tool: "t", CallID: "c", Parts: []hook.Part{hook.Text(strings.Repeat("long ", 10))}}})
	if !errors.Is(err, hook.ErrLocked) || !strings.Contains(err.Error(), wantPID) {
		t.Errorf("Offload against a stopped gc = %v, want hook.ErrLocked naming %s", err, wantPID)
	}
	// The store's default deadline, with a context that has none; a
	// streamed put stages its content first and fails the same way.
	short := MustOpenDir(t, s.Dir(), WithLockTimeout(200*time.Millisecond))
	if _, err := short.Write(ctx, []hook.Item{item("x", 1, "x")}); !errors.Is(err, ErrLocked) {
		t.Errorf("Write with a 200ms lock timeout = %v, want ErrLocked", err)
	}
	if _, err := short.Put(ctx, StreamPart{Key: hook.Key{Run: "x", Step: 2, Tool: "t", CallID: "c", Part: -1}}, genReader(3, 2<<20)); !errors.Is(err, ErrLocked) {
		t.Errorf("Put with a 200ms lock timeout = %v, want ErrLocked", err)
	}
	// A second gc gives up too, naming the first.
	if _, err := s.GC(ctx, GCOptions{Grace: 0, LockTimeout: 200 * time.Millisecond}); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), wantPID) {
		t.Errorf("gc against a stopped gc = %v, want ErrLocked naming %s", err, wantPID)
	}

	continueProcess(pid)
	stdin.Close()
	if err := waitExit(t, gc, 30*time.Second); err != nil {
		t.Fatalf("gc once resumed: %v", err)
	}
	if _, err := short.Write(ctx, []hook.Item{item("after", 1, "after gc")}); err != nil {
		t.Errorf("write once gc is done: %v", err)
	}
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || !res.OK || len(res.Temp) > 0 {
		t.Errorf("verify after: %+v, %v", res, err)
	}
}

// TestLockBusyWritersLetGCIn: five writer processes writing back to back
// keep gc.lock shared without a gap (without gc.intent gc waits for ever,
// see the next test); gc still gets in, five times in a row, because
// writers take no new share while gc waits.
func TestLockBusyWritersLetGCIn(t *testing.T) {
	waits, err := busyWritersAgainstGC(t, false, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range waits {
		t.Logf("gc try %d: done in %v", i+1, w.Round(time.Millisecond))
	}
}

// TestLockBusyWritersStarveGCWithoutIntent runs the same attack with gc not
// taking gc.intent, and shows that gc.intent is what lets gc in. It is
// skipped unless TOOLCAS_SHOW_RACE=1, since it shows a failure on purpose.
func TestLockBusyWritersStarveGCWithoutIntent(t *testing.T) {
	if os.Getenv("TOOLCAS_SHOW_RACE") == "" {
		t.Skip("set TOOLCAS_SHOW_RACE=1 to see the starvation gc.intent prevents")
	}
	waits, err := busyWritersAgainstGC(t, true, 3*time.Second)
	if err == nil {
		t.Fatalf("without gc.intent gc still got in: %v", waits)
	}
	t.Logf("without gc.intent, as expected: %v (after %d tries that got in)", err, len(waits))
}

// busyWritersAgainstGC starts five busy writer processes and runs gc five
// times with the given lock timeout, returning how long each try took, or
// the first failure.
func busyWritersAgainstGC(t *testing.T, noIntent bool, timeout time.Duration) ([]time.Duration, error) {
	// Without gc.intent, gc's chance is a moment with no writer between two
	// writes: five writers make it rare enough that gc starves.
	const writersN = 5
	ctx := context.Background()
	s := MustOpen(t)
	if noIntent {
		s = MustOpenDir(t, s.Dir(), withoutIntent())
	}
	// The writers write until gc's tries are over.
	stop := filepath.Join(t.TempDir(), "stop")
	var writers []*exec.Cmd
	for i := range writersN {
		w := childCmd("busywriter", s.Dir(), strconv.Itoa(i+1), stop)
		out, _ := w.StdoutPipe()
		w.Stderr = os.Stderr
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer w.Process.Kill()
		writers = append(writers, w)
		waitLine(t, out, "STARTED", 30*time.Second)
	}
	exited := make(chan error, len(writers))
	for _, w := range writers {
		go func() { exited <- w.Wait() }()
	}
	defer func() {
		os.WriteFile(stop, nil, 0o644)
		for range writers {
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("a busy writer: %v", err)
				}
			case <-time.After(time.Minute):
				t.Errorf("a busy writer still writes a minute after it was told to stop")
				return
			}
		}
	}()
	var waits []time.Duration
	for try := range 5 {
		t0 := time.Now()
		if _, err := s.GC(ctx, GCOptions{Grace: time.Hour, LockTimeout: timeout}); err != nil {
			return waits, fmt.Errorf("gc try %d against busy writers: %w", try+1, err)
		}
		waits = append(waits, time.Since(t0))
	}
	select {
	case err := <-exited:
		exited <- err // for the wait above
		t.Fatalf("a busy writer stopped before gc's tries ended (%v): the attack did not happen", err)
	default:
	}
	return waits, nil
}

// MustOpenDir opens the store at dir, closing it when the test ends.
func MustOpenDir(tb testing.TB, dir string, opts ...Option) *Store {
	tb.Helper()
	s, err := Open(context.Background(), dir, append([]Option{barrierAlwaysCheap}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// A store keeps its lock files open between writes; when one is removed
// or replaced behind it (a restore, a sync tool), its next write takes its
// share on the file now at that path, which is the one gc locks, and so
// still waits for a gc holding it.
func TestLockFilesReplaced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := MustOpenDir(t, dir, WithCreate(), WithLockTimeout(100*time.Millisecond))
	mustWrite(t, s, item("r", 1, "before"))
	for _, name := range []string{LockFile, "gc.intent"} {
		p := filepath.Join(dir, name)
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(dir, LockFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := flockNB(f, lockEX); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, []hook.Item{item("r", 2, "while gc holds the new lock file")}); !errors.Is(err, ErrLocked) {
		t.Errorf("Write while gc holds the replaced gc.lock = %v, want ErrLocked", err)
	}
	if err := flockNB(f, lockUN); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, item("r", 3, "after"))
}
