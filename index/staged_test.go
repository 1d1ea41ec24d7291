package index

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// stagedCount counts the staged rows and the parts they hold, through a
// connection of its own, which folds nothing.
func stagedCount(t *testing.T, path string) (rows, parts int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.Query(`SELECT run, parts FROM staged`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		var (
			run  string
			data []byte
		)
		if err := rs.Scan(&run, &data); err != nil {
			t.Fatal(err)
		}
		rows++
		steps, _ := decodeStaged(run, data)
		for _, st := range steps {
			parts += len(st.ps)
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return rows, parts
}

// Steps the committer answered are staged, not recorded: their rows wait
// in staged, a row a step, until a read folds them, through any index
// that may write. The fold records them as they were answered, stamped
// with the time they were written, not the time of the fold, and leaves
// nothing staged.
func TestStagedStepsFoldedByAnyReader(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	x, err := Open(ctx, path, WithDurability(cas.SyncNone), WithDeferredCommit(), WithClock(func() time.Time { return at }))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	// The run's first step is read from its (no) rows and answered, as
	// every later one is.
	var answered []Recorded
	for step := 1; step <= 20; step++ {
		recs, err := x.RecordQueued(ctx, []NewPart{newPart("run", step, "t", "a", fmt.Sprint("content ", step%7))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		answered = append(answered, recs...)
	}
	// Held, so that no fold (the committer's, once idle) runs meanwhile.
	x.foldMu.Lock()
	if err := x.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	rows, parts := stagedCount(t, path)
	var recorded int
	if err := x.db.QueryRow(`SELECT count(*) FROM parts`).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	x.foldMu.Unlock()
	if rows < 1 || parts != 20 || recorded != 0 {
		t.Fatalf("after the commit: %d rows staged holding %d parts, %d parts recorded; want 20 parts staged, none recorded", rows, parts, recorded)
	}

	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	at = at.Add(time.Hour) // the fold's time: no row has it
	for i, rec := range answered {
		p, err := other.Resolve(ctx, keyRef(rec.Key), "run")
		if err != nil {
			t.Fatalf("another index resolves %s: %v", rec.Key, err)
		}
		if p.Version != rec.Version || !p.CreatedAt.Equal(rec.CreatedAt) {
			t.Errorf("step %d: %s v%d made %v; want v%d made %v", i+1, p.Key, p.Version, p.CreatedAt, rec.Version, rec.CreatedAt)
		}
	}
	if rows, _ := stagedCount(t, path); rows != 0 {
		t.Errorf("%d rows still staged after another index read", rows)
	}
	st, err := other.Stats(ctx, "")
	if err != nil || st.Parts != 20 || st.Blobs != 7 {
		t.Errorf("stats after the fold: %d parts, %d blobs, %v; want 20 and 7", st.Parts, st.Blobs, err)
	}
	if n := x.QueueMismatches() + other.QueueMismatches(); n != 0 {
		t.Errorf("%d steps folded otherwise than answered", n)
	}
}

// openQueuedAndReadOnly opens an index that queues its records, as a
// store without syncs does, and another on the same database, read-only.
func openQueuedAndReadOnly(t *testing.T) (path string, x, ro *Index) {
	t.Helper()
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	path = filepath.Join(t.TempDir(), "q.db")
	x = mustOpenQueued(t, path)
	ro, err := Open(context.Background(), path, ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	return path, x, ro
}

// An index opened read-only folds nothing: it sees staged steps once the
// writer folds them, which it does once nothing is queued for
// StagedFoldAfter, with no read asking.
func TestStagedFoldedWhenIdle(t *testing.T) {
	ctx := context.Background()
	path, x, ro := openQueuedAndReadOnly(t)
	x.foldMu.Lock() // no fold until the read-only index has looked
	for step := 1; step <= 10; step++ {
		if _, err := x.RecordQueued(ctx, []NewPart{newPart("run", step, "t", "a", fmt.Sprint(step))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Resolve(ctx, keyRef("run/10_t_a.txt"), "run"); err == nil {
		t.Error("a read-only index sees a step staged and not folded")
	}
	x.foldMu.Unlock()
	start := time.Now()
	deadline := start.Add(30 * time.Second) // for a loaded machine
	for {
		if _, err := ro.Resolve(ctx, keyRef("run/10_t_a.txt"), "run"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never folded its staged steps once idle")
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("a read-only index saw the last step %v after the writer's commit (folds due %v after the queue empties)",
		time.Since(start), StagedFoldAfter)
	if rows, _ := stagedCount(t, path); rows != 0 {
		t.Errorf("%d rows still staged", rows)
	}
}

// A writer that never pauses still folds, once its staged steps are
// StagedFoldAge old: a read-only index sees them while it writes on.
func TestStagedFoldedByAge(t *testing.T) {
	ctx := context.Background()
	_, x, ro := openQueuedAndReadOnly(t)
	if _, err := x.RecordQueued(ctx, []NewPart{newPart("run", 0, "t", "a", "first")}, nil); err != nil {
		t.Fatal(err)
	}
	// Steps queued back to back (a pause of StagedFoldAfter would fold),
	// until the first is seen; 30 s for a loaded machine.
	deadline := time.Now().Add(30 * time.Second)
	start := time.Now()
	for step := 1; ; step++ {
		if _, err := x.RecordQueued(ctx, []NewPart{newPart("run", step, "t", "a", fmt.Sprint(step))}, nil); err != nil {
			t.Fatal(err)
		}
		if step%50 == 0 {
			if _, err := ro.Resolve(ctx, keyRef("run/0_t_a.txt"), "run"); err == nil {
				t.Logf("seen after %v and %d more steps (folds due every %v)", time.Since(start), step, StagedFoldAge)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("a writer that never paused never folded")
		}
	}
}

// A write through any index folds the steps staged before it, in its own
// transaction: gc, which deletes the rows of blobs no part uses, never
// takes a blob whose only part waits staged.
func TestStagedStepsKeepTheirBlobs(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	x := mustOpenQueued(t, path)
	first := newPart("a", 1, "t", "c", "shared content")
	if _, err := x.RecordQueued(ctx, []NewPart{first}, nil); err != nil {
		t.Fatal(err)
	}
	if err := x.FoldStaged(ctx); err != nil {
		t.Fatal(err)
	}
	// The same content in another run: staged, and held there.
	x.foldMu.Lock()
	defer x.foldMu.Unlock()
	second := newPart("b", 1, "t", "c", "shared content")
	if _, err := x.RecordQueued(ctx, []NewPart{second}, nil); err != nil {
		t.Fatal(err)
	}
	if err := x.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	if rows, _ := stagedCount(t, path); rows != 1 {
		t.Fatalf("%d rows staged, want the second part's", rows)
	}

	gc, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	ids, err := gc.BlobIDsInShard(ctx, first.Blob.Digest[0])
	if err != nil || len(ids) != 1 {
		t.Fatalf("blob rows in the shard: %v, %v; want the shared one", ids, err)
	}
	if n, err := gc.DeleteKey(ctx, first.Key, 0); err != nil || n != 1 {
		t.Fatalf("delete %s: %d, %v", first.Key, n, err)
	}
	now := time.Now()
	gone, err := gc.DeleteUnusedRows(ctx, ids, now.Add(time.Hour), now)
	if err != nil || len(gone) != 0 {
		t.Fatalf("gc's delete took %v, %v; want nothing: the staged part uses the blob", gone, err)
	}
	if rows, _ := stagedCount(t, path); rows != 0 {
		t.Errorf("%d rows staged after a write through another index", rows)
	}
	if p, err := gc.Resolve(ctx, keyRef(second.Key), "b"); err != nil || p.Blob != second.Blob {
		t.Errorf("%s after gc: %+v, %v", second.Key, p, err)
	}
}

// A staged row that cannot be read (damaged by hand, say) is dropped by
// the fold, which says so, rather than stopping every later fold; the
// steps beside it are folded.
func TestStagedUnreadableRowDropped(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	x := mustOpenQueued(t, path)
	if _, err := x.RecordQueued(ctx, []NewPart{newPart("run", 1, "t", "a", "one")}, nil); err != nil {
		t.Fatal(err)
	}
	x.foldMu.Lock()
	if err := x.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	if _, err := x.db.ExecContext(ctx, `INSERT INTO staged (run, at, parts) VALUES ('run', 1, 'not json')`); err != nil {
		t.Fatal(err)
	}
	x.foldMu.Unlock()
	if _, err := x.RecordQueued(ctx, []NewPart{newPart("run", 2, "t", "a", "two")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := x.FoldStaged(ctx); err == nil || !strings.Contains(err.Error(), "unreadable") {
		t.Errorf("FoldStaged = %v, want the unreadable row named", err)
	}
	for _, key := range []string{"run/1_t_a.txt", "run/2_t_a.txt"} {
		if _, err := x.Resolve(ctx, keyRef(key), "run"); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
	if rows, _ := stagedCount(t, path); rows != 0 {
		t.Errorf("%d rows still staged", rows)
	}
}

// A staged row is read back as written, and whatever bytes a damaged row
// holds, decoding it fails with an error or gives parts that encode to a
// row that decodes to the same: it never panics or reads past the row.
func FuzzDecodeStaged(f *testing.F) {
	p := newPart("run", 3, "bash", "call-1", "content")
	p.MIME, p.Filename, p.RunTTL = "text/plain; charset=utf-8", "out.txt", time.Hour
	q := newPart("run", 3, "bash", "call-1", "other")
	q.Part, q.Key = 1, "run/3_bash_call-1_1.txt"
	r := newPart("run", 4, "grep", "call-2", "third")
	steps := []stagedStep{
		{at: 7, ps: []NewPart{p, q}, answered: []Recorded{{Key: p.Key, Version: 1}, {Key: q.Key, Version: 2}}},
		{at: -1, ps: []NewPart{r}, answered: []Recorded{{Key: r.Key + "~2", Version: 1}}},
	}
	row := encodeStaged(steps)
	got, err := decodeStaged("run", row)
	if err != nil || !reflect.DeepEqual(got, steps) {
		f.Fatalf("round trip: %+v, %v; want %+v", got, err, steps)
	}
	f.Add(row)
	f.Add(row[:len(row)/2])
	f.Add([]byte{stagedFormat, 0})
	f.Add([]byte{stagedFormat, 1, 0, 0})
	f.Add([]byte("not a row"))
	f.Fuzz(func(t *testing.T, data []byte) {
		steps, err := decodeStaged("run", data)
		if err != nil {
			return
		}
		again, err := decodeStaged("run", encodeStaged(steps))
		if err != nil || !reflect.DeepEqual(again, steps) {
			t.Fatalf("%q decodes to %+v, which encodes to a row that decodes to %+v, %v", data, steps, again, err)
		}
	})
}

// Close folds what its index staged: a read-only index opened after it
// reads every step, though no read of the writer's and no idle time
// came between the writes and the Close.
func TestStagedFoldedAtClose(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	x, err := Open(ctx, path, WithDurability(cas.SyncNone), WithDeferredCommit())
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 30; step++ {
		if _, err := x.RecordQueued(ctx, []NewPart{newPart("run", step, "t", "a", fmt.Sprint(step))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if rows, _ := stagedCount(t, path); rows != 0 {
		t.Errorf("%d rows staged after Close", rows)
	}
	ro, err := Open(ctx, path, ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	st, err := ro.Stats(ctx, "")
	if err != nil || st.Parts != 30 {
		t.Errorf("a read-only index after the writer's Close: %d parts, %v; want 30", st.Parts, err)
	}
}

// A fold in the background takes whole staged rows, in order, until they
// hold stagedFoldChunk parts: a row holds as many parts as its batch had
// of its run, so that a count of rows would not bound how long a chunk
// holds the write lock.
func TestStagedFoldChunkByParts(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	x := mustOpenQueued(t, path)
	step := 0
	for _, n := range []int{100, 100, 100, 50, 300, 10} {
		var st stagedStep
		st.at = time.Now().UnixNano()
		for range n {
			step++
			p := newPart("r", step, "t", "c", fmt.Sprint("part ", step))
			st.ps = append(st.ps, p)
			st.answered = append(st.answered, Recorded{Key: p.Key, Version: 1})
		}
		if _, err := x.db.ExecContext(ctx, insertStagedSQL, "r", st.at, encodeStaged([]stagedStep{st})); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []struct {
		left int
		more bool
	}{{360, true}, {10, true}, {0, false}} {
		more, err := x.foldChunk(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, left := stagedCount(t, path); left != want.left || more != want.more {
			t.Errorf("after chunk %d: %d parts staged, more %v; want %d, %v", i+1, left, more, want.left, want.more)
		}
	}
	if n, err := x.Totals(ctx); err != nil || n.Parts != int64(step) {
		t.Errorf("totals after the chunks: %+v, %v; want %d parts", n, err, step)
	}
}

// A step that fails in a background fold's chunk, folded first without
// savepoints, makes the chunk fold again step by step: that step alone
// is dropped, and said to be, and the steps beside it are recorded once.
func TestStagedFoldChunkStepFails(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	x := mustOpenQueued(t, path)
	if _, err := x.db.ExecContext(ctx, `CREATE TRIGGER boom BEFORE INSERT ON parts WHEN NEW.tool = 'boom'
		BEGIN SELECT RAISE(ABORT, 'no room for this row'); END`); err != nil {
		t.Fatal(err)
	}
	for step, tool := range []string{"t", "boom", "t"} {
		p := newPart("r", step+1, tool, "c", fmt.Sprint("part ", step+1))
		st := stagedStep{at: time.Now().UnixNano(), ps: []NewPart{p}, answered: []Recorded{{Key: p.Key, Version: 1}}}
		if _, err := x.db.ExecContext(ctx, insertStagedSQL, "r", st.at, encodeStaged([]stagedStep{st})); err != nil {
			t.Fatal(err)
		}
	}
	if more, err := x.foldChunk(ctx); err != nil || more {
		t.Fatalf("foldChunk = %v, %v; want no error and nothing more", more, err)
	}
	if err := x.queue.takeLost(); err == nil || !strings.Contains(err.Error(), "no room") || !strings.Contains(err.Error(), "dropped") {
		t.Errorf("after the chunk, the index says %v; want the failed step's error, saying it was dropped", err)
	}
	if rows, _ := stagedCount(t, path); rows != 0 {
		t.Errorf("%d rows still staged", rows)
	}
	if keys, want := listedKeys(t, x), []string{"r/1_t_c.txt", "r/3_t_c.txt"}; !slices.Equal(keys, want) {
		t.Errorf("parts = %q, want %q", keys, want)
	}
}

// The committer waits for a background fold's chunk in its turn, before
// the batch's statements: the wait does not count in the pace that
// bounds the queue, or writers would wait for room the committer has.
func TestCommitterPaceWithoutFoldWait(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	x := mustOpenQueued(t, filepath.Join(t.TempDir(), "q.db"))
	const parts, hold = 10, 400 * time.Millisecond
	// A chunk under way: its turn, and its transaction's write lock.
	x.writeTurn.Lock()
	conn, err := x.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	for i := range parts {
		if _, err := x.RecordQueued(ctx, []NewPart{newPart("r", i+1, "t", "c", fmt.Sprint("part ", i))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(hold)
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	x.writeTurn.Unlock()
	if err := x.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	q := &x.queue
	q.mu.Lock()
	pace := q.perPart
	q.mu.Unlock()
	// Counted, the wait alone would move the pace an eighth of the way to
	// hold/parts: 5 ms.
	if pace <= 0 || pace >= hold/parts/16 {
		t.Errorf("committer's pace %v a part after its batch waited %v for its turn, want under %v", pace, hold, hold/parts/16)
	}
}
