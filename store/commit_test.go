package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
)

// Writes that arrive while one commits are committed together, in one
// transaction, and each gets its own rows back.
func TestGroupCommit(t *testing.T) {
	t.Run("shared", func(t *testing.T) { testGroupCommit(t, nil) })
	// A shared transaction that fails: each write is recorded alone.
	t.Run("shared fails", func(t *testing.T) {
		testGroupCommit(t, errors.New("injected failure of a shared transaction"))
	})
	// A shared transaction whose commit may have happened: no write is
	// recorded again, each is told.
	t.Run("shared commit unknown", func(t *testing.T) {
		testGroupCommit(t, fmt.Errorf("injected lost answer: %w", index.ErrCommitUnknown))
	})
}

func testGroupCommit(t *testing.T, sharedErr error) {
	unknown := errors.Is(sharedErr, index.ErrCommitUnknown)
	ctx := context.Background()
	const writers = 6
	hold := make(chan struct{})
	var s *Store
	first := true
	shared := 0
	s = MustOpen(t, withFaults(func(point string) error {
		if point == "write:shared" {
			shared++
			if sharedErr != nil {
				return sharedErr
			}
		}
		if point != "write:commit" || !first {
			return nil
		}
		first = false
		// The first committer waits until every other write has queued.
		if waitQueued(s, writers) {
			close(hold)
		}
		return nil
	}))
	var wg sync.WaitGroup
	got := make([][]hook.Stored, writers)
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = s.Write(ctx, []hook.Item{
				item(fmt.Sprint("run", i), 1, fmt.Sprint("content ", i)),
				item(fmt.Sprint("run", i), 2, "shared content"),
			})
		}()
	}
	wg.Wait()
	select {
	case <-hold:
	default:
		t.Fatal("the writes never queued behind the first")
	}
	told := 0
	for i := range writers {
		if unknown && errors.Is(errs[i], index.ErrCommitUnknown) {
			told++
			continue
		}
		if errs[i] != nil {
			t.Fatalf("write %d: %v", i, errs[i])
		}
		if len(got[i]) != 2 || got[i][0].Key != fmt.Sprintf("run%d/1_t_c.txt", i) || got[i][1].Version != 1 {
			t.Errorf("write %d got %+v", i, got[i])
		}
		for _, st := range got[i] {
			c, err := s.Read(ctx, fmt.Sprint("run", i), st.Key)
			if err != nil || (st.Key == got[i][0].Key && string(c.Data) != fmt.Sprint("content ", i)) {
				t.Errorf("read back %s: %v", st.Key, err)
			}
		}
	}
	batches := counted(s, "commit:batch")
	if len(batches) >= writers || shared == 0 {
		t.Errorf("%d batches for %d writes (%v), %d shared: none was shared", len(batches), writers, batches, shared)
	}
	if unknown && told == 0 {
		t.Error("a shared commit with no answer: every write was recorded again, none was told")
	}
}

// waitQueued waits, polling with a deadline, until n writes are queued
// for the committer, and reports whether they were.
func waitQueued(s *Store, n int) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		localOf(s).commits.mu.Lock()
		queued := len(localOf(s).commits.pending)
		localOf(s).commits.mu.Unlock()
		if queued == n {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// Writes that arrive while the first write's blob is still being written
// join its transaction: one commit for all, once every blob is in place.
// One whose blob fails then fails alone, and the others are recorded.
func TestWritesJoinWhileTheFirstBlobIsWritten(t *testing.T) {
	t.Run("all", func(t *testing.T) { testWritesJoin(t, -1) })
	t.Run("one blob fails", func(t *testing.T) { testWritesJoin(t, 2) })
}

func testWritesJoin(t *testing.T, failing int) {
	ctx := context.Background()
	const writers = 4
	failed := errors.New("injected failure of one blob")
	release := make(chan struct{})
	firstBlob := make(chan struct{})
	var (
		mu      sync.Mutex
		blobs   int
		joined  = make(chan struct{}, writers)
		readies int
	)
	s := MustOpen(t, withFaults(func(point string) error {
		switch point {
		case "write:blob":
			mu.Lock()
			n := blobs
			blobs++
			mu.Unlock()
			switch {
			case n == 0:
				close(firstBlob)
				<-release
			case n == failing:
				return failed
			}
		case "write:joined":
			joined <- struct{}{}
		case "write:ready":
			mu.Lock()
			readies++
			mu.Unlock()
		}
		return nil
	}))
	if !localOf(s).statementsEarly(16) {
		t.Fatal("a store writing alone does not run its statements while its blob is written: nothing can join")
	}
	var wg sync.WaitGroup
	got := make([][]hook.Stored, writers)
	errs := make([]error, writers)
	write := func(i int) {
		got[i], errs[i] = s.Write(ctx, []hook.Item{item(fmt.Sprint("run", i), 1, fmt.Sprint("content ", i))})
	}
	wg.Go(func() { write(0) })
	<-firstBlob
	// The first write is the one committing before the others start: its
	// blob is held, so it is the first blob of the transaction.
	if !waitCommitting(s) {
		close(release)
		wg.Wait()
		t.Fatal("the first write never began to commit")
	}
	// The others, one at a time, each joining before the next starts.
	for i := 1; i < writers; i++ {
		wg.Go(func() { write(i) })
		select {
		case <-joined:
		case <-time.After(30 * time.Second):
			close(release)
			wg.Wait()
			t.Fatalf("write %d did not join the first write's transaction", i)
		}
	}
	mu.Lock()
	if readies != 0 {
		t.Errorf("%d writes asked whether their blob was ready before the first blob was, want 0", readies)
	}
	mu.Unlock()
	close(release)
	wg.Wait()
	// Which write's blob fails depends on the order the blobs reach the
	// disk: exactly one fails, with the injected error, and has no row.
	failedRun := ""
	for i := range writers {
		if errors.Is(errs[i], failed) && failing >= 0 && failedRun == "" {
			failedRun = fmt.Sprint("run", i)
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
	nFailed := 0
	if failing >= 0 {
		nFailed = 1
		if failedRun == "" {
			t.Error("no write failed, want the one whose blob failed")
		}
	}
	ps, err := s.List(ctx, ListOptions{AllVersions: true})
	if err != nil || len(ps) != writers-nFailed {
		t.Errorf("%d parts recorded (%v), want %d", len(ps), err, writers-nFailed)
	}
	for _, p := range ps {
		if p.Run == failedRun {
			t.Errorf("the write whose blob failed has a row: %s", p.Key)
		}
	}
	batches := counted(s, "commit:batch")
	if len(batches) != 1 || batches[0] != writers {
		t.Errorf("transactions of %v writes, want one of all %d", batches, writers)
	}
}

// waitCommitting waits until a write is committing in s, and reports
// whether one did before a deadline.
func waitCommitting(s *Store) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		localOf(s).commits.mu.Lock()
		busy := localOf(s).commits.busy
		localOf(s).commits.mu.Unlock()
		if busy {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}
