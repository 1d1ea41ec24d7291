package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/quiesce"
)

// A one-part write whose blob fails (a full disk, say) commits no row,
// though its statements ran beside the blob's write, and says why; the
// store writes again after. In every durability.
func TestWriteOneBlobFails(t *testing.T) {
	for _, mode := range []string{"full", DurabilityRecentKeysMayBeLost, "none"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			failed := fmt.Errorf("injected: %w", cas.ErrDiskFull)
			var fail atomic.Bool
			fail.Store(true)
			opts, err := DurabilityOptions(mode)
			if err != nil {
				t.Fatal(err)
			}
			s := MustOpen(t, append(opts, withFaults(func(point string) error {
				if point == "write:blob" && fail.Load() {
					return failed
				}
				return nil
			}))...)
			_, err = s.Write(ctx, []hook.Item{item("r", 1, text16K(1))})
			if !errors.Is(err, cas.ErrDiskFull) {
				t.Fatalf("Write with its blob failing = %v, want ErrDiskFull", err)
			}
			if ps, err := s.List(ctx, ListOptions{AllVersions: true}); err != nil || len(ps) != 0 {
				t.Fatalf("parts after the failed write: %d, %v; want none", len(ps), err)
			}
			fail.Store(false)
			st, err := s.Write(ctx, []hook.Item{item("r", 1, text16K(1))})
			if err != nil {
				t.Fatal(err)
			}
			if st[0].Version != 1 {
				t.Errorf("the write after the failed one is version %d, want 1", st[0].Version)
			}
			if c, err := s.Read(ctx, "", st[0].Key); err != nil || string(c.Data) != text16K(1) {
				t.Errorf("Read(%s) = %v", st[0].Key, err)
			}
			// Without syncs, the rows wait for a shared commit instead (see
			// writeDeferred): no statements run beside the blob.
			if n := int64(total(s, "write:early")); mode != "none" && n != 2 {
				t.Errorf("%d writes ran their statements early, want 2", n)
			}
		})
	}
}

// One-part writes queued behind a commit are committed together, their
// statements run before every blob is in place; the one whose blob fails
// fails alone, and the others' rows are committed.
func TestGroupCommitOneBlobFails(t *testing.T) {
	ctx := context.Background()
	const writers = 6
	failed := errors.New("injected failure of one blob")
	var blobs atomic.Int32
	var s *Store
	first := true
	var firstMu sync.Mutex
	s = MustOpen(t, withFaults(func(point string) error {
		switch point {
		case "write:blob":
			if blobs.Add(1) == 3 {
				return failed
			}
		case "write:commit":
			firstMu.Lock()
			isFirst := first
			first = false
			firstMu.Unlock()
			if !isFirst {
				return nil
			}
			waitQueued(s, writers)
		}
		return nil
	}))
	var wg sync.WaitGroup
	got := make([][]hook.Stored, writers)
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			got[i], errs[i] = s.Write(ctx, []hook.Item{item(fmt.Sprint("run", i), 1, fmt.Sprint("content ", i))})
		})
	}
	wg.Wait()
	var nFailed int
	for i := range writers {
		if errors.Is(errs[i], failed) {
			nFailed++
			continue
		}
		if errs[i] != nil {
			t.Errorf("writer %d: %v", i, errs[i])
			continue
		}
		c, err := s.Read(ctx, "", got[i][0].Key)
		if err != nil || string(c.Data) != fmt.Sprint("content ", i) {
			t.Errorf("writer %d: Read(%s) = %v", i, got[i][0].Key, err)
		}
	}
	if nFailed != 1 {
		t.Errorf("%d writes failed, want 1", nFailed)
	}
	ps, err := s.List(ctx, ListOptions{AllVersions: true})
	if err != nil || len(ps) != writers-1 {
		t.Errorf("%d parts recorded (%v), want %d", len(ps), err, writers-1)
	}
	batches := counted(s, "commit:batch")
	if len(batches) == 0 || batches[0] != writers {
		t.Errorf("transactions of %v writes, want the first of all %d", batches, writers)
	}
}

func init() {
	// poolwriter DIR: write two steps, wait until the store's temp pool is
	// filled, print READY and the temp files in blobs/, and wait to be
	// killed.
	lockRoles["poolwriter"] = func(a []string) error {
		ctx := context.Background()
		s, err := Open(ctx, a[0])
		if err != nil {
			return err
		}
		for step := range 2 {
			if _, err := s.Write(ctx, []hook.Item{item("w", step, text16K(step))}); err != nil {
				return err
			}
		}
		quiesce.Wait(localOf(s).blobs)
		fmt.Println("READY", len(blobsTemps(a[0])))
		select {}
	}
}

// blobsTemps lists the temp files in blobs/ itself.
func blobsTemps(dir string) []string {
	des, _ := os.ReadDir(filepath.Join(dir, cas.BlobsDir))
	var out []string
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".tmp-") {
			out = append(out, de.Name())
		}
	}
	return out
}

// A store's temp pool while it is open is no problem to verify; a writer
// killed with a full pool leaves its empty temp files, which verify then
// reports and gc removes once past the grace period, as any other.
func TestTempPoolOfKilledWriter(t *testing.T) {
	ctx := context.Background()
	dir := newStoreDir(t)
	cmd, sc := startTalkingChild(t, "poolwriter", dir)
	pooled := 0
	if !sc.Scan() {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the writer said nothing")
	}
	if _, err := fmt.Sscanf(sc.Text(), "READY %d", &pooled); err != nil || pooled < 1 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the writer said %q, want READY and at least one pooled file", sc.Text())
	}
	verify := func() VerifyResult {
		t.Helper()
		v, err := Open(ctx, dir, ReadOnly())
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		res, err := v.Verify(ctx, VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := verify(); !res.OK || len(res.Temp) != 0 {
		t.Errorf("verify beside a live writer's pool: ok %v, temp %v; want ok and none", res.OK, res.Temp)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	left := blobsTemps(dir)
	if len(left) != pooled {
		t.Fatalf("%d temp files left by the killed writer, want its pool of %d", len(left), pooled)
	}
	if res := verify(); len(res.Temp) != pooled {
		t.Errorf("verify after the kill reports %d temp files, want %d", len(res.Temp), pooled)
	}
	g, err := Open(ctx, dir, Maintenance(), WithClock(func() time.Time { return time.Now().Add(2 * DefaultGrace) }))
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.GC(ctx, GCOptions{Grace: DefaultGrace})
	g.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedTemp != pooled || res.RemovedBlobs != 0 {
		t.Errorf("gc removed %d temp files and %d blobs, want %d and 0", res.RemovedTemp, res.RemovedBlobs, pooled)
	}
	if left := blobsTemps(dir); len(left) != 0 {
		t.Errorf("temp files after gc: %q", left)
	}
	if res := verify(); !res.OK || len(res.Temp) != 0 {
		t.Errorf("verify after gc: ok %v, temp %v", res.OK, res.Temp)
	}
}

// A store writing alone runs a write's statements beside its blob's write;
// once another store writes to the same index, it waits for the blob
// first, so that the other is not kept waiting on its syncs; and runs them
// early again once the other is closed.
func TestStatementsEarlyOnlyAlone(t *testing.T) {
	old := writersSeenFor
	writersSeenFor = 0
	t.Cleanup(func() { writersSeenFor = old })
	ctx := context.Background()
	a := MustOpen(t)
	write := func(s *Store, step int) {
		t.Helper()
		if _, err := s.Write(ctx, []hook.Item{item(fmt.Sprint("run", step), step, text16K(step))}); err != nil {
			t.Fatal(err)
		}
	}
	write(a, 1)
	if n := int64(total(a, "write:early")); n != 1 {
		t.Fatalf("alone: %d early writes, want 1", n)
	}
	b, err := Open(ctx, a.Dir())
	if err != nil {
		t.Fatal(err)
	}
	write(b, 2)
	write(a, 3)
	if n := int64(total(a, "write:early")); n != 1 {
		t.Errorf("beside another writer: %d early writes, want still 1", n)
	}
	if n := int64(total(b, "write:early")); n != 0 {
		t.Errorf("the other writer: %d early writes, want 0", n)
	}
	b.Close()
	write(a, 4)
	if n := int64(total(a, "write:early")); n != 2 {
		t.Errorf("alone again: %d early writes, want 2", n)
	}
	for step := 1; step <= 4; step++ {
		if _, err := a.Read(ctx, "", fmt.Sprintf("run%d/%d_t_c.txt", step, step)); err != nil {
			t.Errorf("step %d: %v", step, err)
		}
	}
}

func init() {
	// readywriter DIR: write one step, then stop for good in a second
	// write once its statements have run in its open transaction, its
	// blob not yet written, printing INTX.
	lockRoles["readywriter"] = func(a []string) error {
		ctx := context.Background()
		var stop atomic.Bool
		s, err := Open(ctx, a[0], withFaults(func(point string) error {
			if point == "write:ready" && stop.Load() {
				fmt.Println("INTX")
				select {} // until killed
			}
			return nil
		}))
		if err != nil {
			return err
		}
		if _, err := s.Write(ctx, []hook.Item{item("w", 1, text16K(1))}); err != nil {
			return err
		}
		stop.Store(true)
		_, err = s.Write(ctx, []hook.Item{item("w", 2, text16K(2))})
		return err
	}
}

// A writer killed with its statements run and its commit waiting for the
// blob leaves no row of that write; the index is whole, verify passes, and
// the store writes the step again.
func TestKilledBeforeTheCommit(t *testing.T) {
	ctx := context.Background()
	dir := newStoreDir(t)
	cmd, sc := startTalkingChild(t, "readywriter", dir)
	if !sc.Scan() || sc.Text() != "INTX" {
		t.Fatalf("the writer said %q, want INTX", sc.Text())
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	s, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ps, err := s.List(ctx, ListOptions{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Key != "w/1_t_c.txt" {
		t.Fatalf("parts after the kill: %v, want only the first write's", partKeys(ps))
	}
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || len(res.IndexProblems) > 0 {
		t.Errorf("verify after the kill: ok %v, index problems %v", res.OK, res.IndexProblems)
	}
	st, err := s.Write(ctx, []hook.Item{item("w", 2, text16K(2))})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Version != 1 {
		t.Errorf("the step written again is version %d, want 1", st[0].Version)
	}
	if c, err := s.Read(ctx, "", st[0].Key); err != nil || string(c.Data) != text16K(2) {
		t.Errorf("Read(%s) = %v", st[0].Key, err)
	}
}

// newStoreDir makes a store in a temp directory, closed, for child
// processes to open.
func newStoreDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(context.Background(), dir, WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return dir
}

// startTalkingChild starts the test binary in a role and returns a scanner
// of what it prints; the child is killed when the test ends, however it
// ends.
func startTalkingChild(t *testing.T, role string, args ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := childCmd(role, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

// A one-part write has the blob's temp file made again once its syncs are
// done, not left for the next write to start (see cas.RefillTempPool).
// (Without syncs, a blob is written in place, with no temp file.)
func TestWriteOneRefillsTheTempPool(t *testing.T) {
	for _, mode := range []string{"full", DurabilityRecentKeysMayBeLost} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			opts, err := DurabilityOptions(mode)
			if err != nil {
				t.Fatal(err)
			}
			s := MustOpen(t, opts...)
			// The pool makes nothing before the second write that finds
			// it empty, then one file.
			for i := range 2 {
				if _, err := s.Write(ctx, []hook.Item{item("r", i, text16K(i))}); err != nil {
					t.Fatal(err)
				}
			}
			quiesce.Wait(localOf(s).blobs)
			des, err := os.ReadDir(filepath.Join(s.Dir(), cas.BlobsDir))
			if err != nil {
				t.Fatal(err)
			}
			pooled := 0
			for _, de := range des {
				if strings.HasPrefix(de.Name(), ".tmp-") {
					pooled++
				}
			}
			if pooled != 1 {
				t.Errorf("%d temp files in the pool after two writes, want 1", pooled)
			}
		})
	}
}
