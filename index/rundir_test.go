package index

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/testclock"
)

// openDirTest opens, at a new path, a queued index on a clock the test
// moves, past the runs it reads alone, and a plain index on the same
// database; both close when the test ends.
func openDirTest(t *testing.T) (x, other *Index, clock *testclock.Clock, path string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "q.db")
	clock = testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	x, err := Open(context.Background(), path, WithDurability(cas.SyncNone), WithDeferredCommit(), WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	x.queue.dir.met.Store(runDirAfter) // past the runs read alone
	other, err = Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return x, other, clock, path
}

// answered records one part through x's queue and returns its answer.
func answered(t *testing.T, x *Index, p NewPart) Recorded {
	t.Helper()
	recs, err := x.RecordQueued(context.Background(), []NewPart{p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return recs[0]
}

// A writer reads the directory of runs instead of each new run: a run
// with rows (another index's, committed or staged, or this index's own,
// once it forgot it) is read and answered as Record would; a run another
// index starts is seen once the directory is runDirFresh old, and not
// before, which shows the writer did not read that run itself.
func TestRunDirTellsNewRuns(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	x, other, clock, path := openDirTest(t)
	stager := mustOpenQueued(t, path)

	mustRecord(t, other, newPart("before", 1, "t", "a", "one"))
	if r := answered(t, x, newPart("new", 1, "t", "a", "one")); r.Version != 1 || r.SameAs != "" {
		t.Fatalf("a new run's part = %+v, want version 1, nothing the same", r)
	}
	// The directory read names "before": its rows are read.
	if r := answered(t, x, newPart("before", 1, "t", "a", "two")); r.Version != 2 {
		t.Errorf("a part under a key another index recorded before = version %d, want 2", r.Version)
	}

	// Past runDirFresh, the directory is read again: the runs started since, and the
	// runs another index staged steps of, are read before they are answered.
	mustRecord(t, other, newPart("later", 1, "t", "a", "one"))
	if _, err := stager.RecordQueued(ctx, []NewPart{newPart("staged", 1, "t", "a", "one")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := stager.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	// Its fold when idle would fold every index's staged steps, and count
	// this index's mismatch as its own.
	stager.foldMu.Lock()
	defer stager.foldMu.Unlock()
	clock.Add(runDirFresh)
	if r := answered(t, x, newPart("later", 1, "t", "a", "two")); r.Version != 2 {
		t.Errorf("a run started before the directory was read again = version %d, want 2", r.Version)
	}
	if r := answered(t, x, newPart("staged", 1, "t", "a", "two")); r.Version != 2 {
		t.Errorf("a run with staged steps = version %d, want 2", r.Version)
	}

	// Within runDirFresh of that read, a run another index starts is taken
	// for a new one.
	mustRecord(t, other, newPart("meanwhile", 1, "t", "a", "one"))
	if r := answered(t, x, newPart("meanwhile", 1, "t", "a", "two")); r.Version != 1 {
		t.Errorf("a run started within runDirFresh of the directory's read = version %d, want 1 (read from the directory)", r.Version)
	}
	if err := x.FoldStaged(ctx); err != nil {
		t.Fatal(err)
	}
	if n := x.QueueMismatches(); n != 1 {
		t.Errorf("%d mismatches after the fold, want 1", n)
	}

	// This index's own run, once forgotten (a delete does that), is read
	// again, although the directory was read before the run had rows.
	if r := answered(t, x, newPart("mine", 1, "t", "a", "one")); r.Version != 1 {
		t.Fatalf("own new run = version %d, want 1", r.Version)
	}
	if err := x.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	if _, err := x.DeleteKey(ctx, "new/1_t_a.txt", 0); err != nil {
		t.Fatal(err)
	}
	if r := answered(t, x, newPart("mine", 1, "t", "a", "two")); r.Version != 2 {
		t.Errorf("own run after a delete = version %d, want 2", r.Version)
	}
	if err := x.FoldStaged(ctx); err != nil {
		t.Fatal(err)
	}
	if n := x.QueueMismatches(); n != 1 {
		t.Errorf("%d mismatches, want only the one within runDirFresh", n)
	}
}

// Past its bound of runs, the index keeps no directory and reads each new
// run itself: when the store has more at the first read, or once more are
// added.
func TestRunDirTooManyRuns(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	for _, bound := range []int{2, 4} {
		x, plain, clock, _ := openDirTest(t)
		for _, run := range []string{"a", "b", "c"} {
			mustRecord(t, plain, newPart(run, 1, "t", "a", "one"))
		}
		x.queue.dir.max = bound
		if r := answered(t, x, newPart("new", 1, "t", "a", "one")); r.Version != 1 {
			t.Fatalf("bound %d: new run = version %d, want 1", bound, r.Version)
		}
		if x.queue.dir.off != (bound < 3) {
			t.Fatalf("bound %d, 3 runs: directory off = %v", bound, x.queue.dir.off)
		}
		if bound > 3 {
			for _, run := range []string{"d", "e"} {
				mustRecord(t, plain, newPart(run, 1, "t", "a", "one"))
			}
			clock.Add(runDirFresh)
			if r := answered(t, x, newPart("d", 1, "t", "a", "two")); r.Version != 2 {
				t.Fatalf("bound %d: a run with rows = version %d, want 2", bound, r.Version)
			}
			if !x.queue.dir.off {
				t.Fatalf("bound %d: the directory is kept past its bound", bound)
			}
		}
		// Another index's run, started after the last lookup, is read at once.
		mustRecord(t, plain, newPart("f", 1, "t", "a", "one"))
		if r := answered(t, x, newPart("f", 1, "t", "a", "two")); r.Version != 2 {
			t.Errorf("bound %d: a run with rows = version %d, want 2", bound, r.Version)
		}
	}
}

// While a writer reads the directory, another goes on with the one read
// before, even past runDirFresh; once the index forgot runs, that one is
// of no use, and it waits for the read.
func TestRunDirReadBesideWriters(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	x, other, clock, _ := openDirTest(t)
	answered(t, x, newPart("first", 1, "t", "a", "one")) // reads the directory
	mustRecord(t, other, newPart("theirs", 1, "t", "a", "one"))
	clock.Add(2 * runDirFresh)

	d := &x.queue.dir
	d.reading.Lock() // a read under way
	if r := answered(t, x, newPart("theirs", 1, "t", "a", "two")); r.Version != 1 {
		t.Errorf("beside a read, a run started after the directory before = version %d, want 1 (from that directory)", r.Version)
	}
	d.reading.Unlock()

	mustRecord(t, other, newPart("again", 1, "t", "a", "one"))
	d.stale()
	d.reading.Lock()
	got := make(chan Recorded, 1)
	go func() {
		recs, err := x.RecordQueued(ctx, []NewPart{newPart("again", 1, "t", "a", "two")}, nil)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- recs[0]
	}()
	select {
	case r := <-got:
		t.Fatalf("answered %+v while the only directory was forgotten and read by another", r)
	case <-time.After(100 * time.Millisecond):
	}
	d.reading.Unlock()
	select {
	case r := <-got:
		if r.Version != 2 {
			t.Errorf("after the read = version %d, want 2", r.Version)
		}
	case <-time.After(time.Minute):
		t.Fatal("no answer a minute after the read ended")
	}
}

// An index reads its first runDirAfter runs alone, without the directory:
// a process that writes a step or two does not read a store's runs.
func TestRunDirNotForAFewRuns(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	path := filepath.Join(t.TempDir(), "q.db")
	x := mustOpenQueued(t, path)
	for i := range runDirAfter + 1 {
		if r := answered(t, x, newPart(fmt.Sprint("run-", i), 1, "t", "a", "one")); r.Version != 1 {
			t.Fatalf("run %d = version %d, want 1", i, r.Version)
		}
		x.queue.dir.mu.RLock()
		read := x.queue.dir.names != nil
		x.queue.dir.mu.RUnlock()
		if read != (i == runDirAfter) {
			t.Errorf("after %d runs met, directory read = %v", i+1, read)
		}
	}
}
