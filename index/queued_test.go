package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// mustOpenQueued opens an index that queues its records, as a store
// without syncs does.
func mustOpenQueued(tb testing.TB, path string) *Index {
	tb.Helper()
	x, err := Open(context.Background(), path, WithDurability(cas.SyncNone), WithDeferredCommit())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { x.Close() })
	return x
}

// What RecordQueued answers, at once or once recorded, is what Record
// gives the same steps in an index of its own: keys (key~N when another
// call holds a key), versions and same-content keys, through deletes that
// make it forget what it knew.
func TestRecordQueuedAnswersAsRecorded(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once: RecordQueued is RecordDeferred there")
	}
	ctx := context.Background()
	queued := mustOpenQueued(t, filepath.Join(t.TempDir(), "q.db"))
	plain := MustOpen(t)
	rng := rand.New(rand.NewPCG(7, 11))
	runs := []string{"alpha", "beta", "gamma"}
	contents := []string{"one", "two", "three", "four", "five", "six"}
	part := func() NewPart {
		run := runs[rng.IntN(len(runs))]
		p := newPart(run, rng.IntN(6), "bash", fmt.Sprintf("c%d", rng.IntN(3)), contents[rng.IntN(len(contents))])
		if rng.IntN(8) == 0 {
			// Another call under the key of this one: it gets key~N.
			p.CallID += "-other"
		}
		return p
	}
	for i := range 600 {
		if i%97 == 96 {
			// A delete: every run known is forgotten, and a key whose
			// rows are gone starts again at version 1.
			key := part().Key
			for _, x := range []*Index{queued, plain} {
				if _, err := x.DeleteKey(ctx, key, 0); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		ps := []NewPart{part()}
		if rng.IntN(5) == 0 {
			// A result of two parts: the same call's, with keys _0 and _1.
			second := ps[0]
			content := contents[rng.IntN(len(contents))]
			second.Blob = cas.Blob{Digest: cas.Sum([]byte(content)), Ext: ".txt"}
			second.Chars, second.Bytes = int64(len(content)), int64(len(content))
			base := ps[0].Key[:len(ps[0].Key)-len(".txt")]
			ps[0].Part, ps[0].Key = 0, base+"_0.txt"
			second.Part, second.Key = 1, base+"_1.txt"
			ps = append(ps, second)
		}
		got, err := queued.RecordQueued(ctx, slices.Clone(ps), nil)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		want, err := plain.Record(ctx, slices.Clone(ps))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		for j := range want {
			if got[j].Key != want[j].Key || got[j].Version != want[j].Version || got[j].SameAs != want[j].SameAs {
				t.Fatalf("step %d, part %d: RecordQueued = %s v%d same as %q, want %s v%d same as %q", i, j,
					got[j].Key, got[j].Version, got[j].SameAs, want[j].Key, want[j].Version, want[j].SameAs)
			}
		}
	}
	if err := queued.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	listed := func(x *Index) []string {
		ps, err := x.List(ctx, ListOptions{AllVersions: true})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s v%d %s", p.Key, p.Version, p.Blob))
		}
		slices.Sort(out)
		return out
	}
	if q, p := listed(queued), listed(plain); !slices.Equal(q, p) {
		t.Errorf("queued index holds %d rows, the plain one %d:\n%q\n%q", len(q), len(p), q, p)
	}
	// Steps staged were folded by the reads: as answered, and counted.
	if n := queued.QueueMismatches(); n != 0 {
		t.Errorf("%d steps recorded otherwise than answered, want 0", n)
	}
	qt, err := queued.Totals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := plain.Totals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	qt.IndexBytes, pt.IndexBytes = 0, 0 // the files' sizes differ
	if !reflect.DeepEqual(qt, pt) {
		t.Errorf("queued index's totals %+v, the plain one's %+v", qt, pt)
	}
}

// A step of a run the index knows is answered while the committer cannot
// record it (the open transaction held), and reads through the index see
// it once they can; a run's first step waits for its statements.
func TestRecordQueuedAnswersBeforeRecording(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	x := mustOpenQueued(t, filepath.Join(t.TempDir(), "q.db"))
	if _, err := x.RecordQueued(ctx, []NewPart{newPart("run", 1, "t", "a", "first")}, nil); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	recs, early := recordHeld(t, x, newPart("run", 2, "t", "b", "first"), func(err error) { committed <- err }, 30*time.Second)
	if !early {
		t.Error("RecordQueued waited for the committer on a run the index knows")
	}
	if len(recs) != 1 || recs[0].Key != "run/2_t_b.txt" || recs[0].Version != 1 || recs[0].SameAs != "run/1_t_a.txt" {
		t.Errorf("answer = %+v, want run/2_t_b.txt v1 same as run/1_t_a.txt", recs)
	}
	p, err := x.Resolve(ctx, keyRef("run/2_t_b.txt"), "run")
	if err != nil || p.Version != 1 || !p.CreatedAt.Equal(recs[0].CreatedAt) {
		t.Errorf("Resolve = %+v, %v: want the part queued, stamped %v", p, err, recs[0].CreatedAt)
	}
	if err := x.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Errorf("committed(%v), want nil", err)
	}

	// A run with no rows is answered at once too: the writer reads its
	// committed rows (none) itself.
	recs, early = recordHeld(t, x, newPart("new run", 1, "t", "a", "first"), nil, 30*time.Second)
	if !early {
		t.Error("RecordQueued waited for the committer on a run with no rows")
	}
	if len(recs) != 1 || recs[0].Key != "new run/1_t_a.txt" || recs[0].Version != 1 || recs[0].SameAs != "" {
		t.Errorf("answer = %+v, want new run/1_t_a.txt v1", recs)
	}

	// A key another call of the run holds waits for its statements, which
	// choose key~2.
	other := newPart("run", 2, "t", "b", "other")
	other.CallID = "b-other"
	if recs, early = recordHeld(t, x, other, nil, 50*time.Millisecond); early {
		t.Errorf("a step whose key another call holds returned %+v before it was recorded", recs)
	}
	if len(recs) != 1 || recs[0].Key != "run/2_t_b~2.txt" {
		t.Errorf("answer = %+v, want run/2_t_b~2.txt", recs)
	}
}

// recordHeld calls RecordQueued for p while the committer cannot record
// (the open transaction's lock held), and says whether it returned within
// wait; it lets the committer go, and returns the answer, either way.
func recordHeld(t *testing.T, x *Index, p NewPart, committed func(error), wait time.Duration) (recs []Recorded, early bool) {
	t.Helper()
	x.deferred.mu.Lock()
	answered := make(chan []Recorded, 1)
	go func() {
		recs, err := x.RecordQueued(context.Background(), []NewPart{p}, committed)
		if err != nil {
			t.Error(err)
		}
		answered <- recs
	}()
	select {
	case recs = <-answered:
		early = true
	case <-time.After(wait):
	}
	x.deferred.mu.Unlock()
	if !early {
		recs = <-answered
	}
	return recs, early
}

// A step another index records in the same run meanwhile can make a step
// answered for be recorded otherwise: the fold that records the staged
// step counts it and forgets the run, and the run's next step is answered
// only once it was read again. The rows stay as Record would make them.
func TestRecordQueuedMismatch(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	x := mustOpenQueued(t, path)
	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := x.RecordQueued(ctx, []NewPart{newPart("run", 1, "t", "a", "first")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := x.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	taken := newPart("run", 2, "t", "b", "theirs")
	taken.CallID = "b-other"
	if _, err := other.Record(ctx, []NewPart{taken}); err != nil {
		t.Fatal(err)
	}
	recs, err := x.RecordQueued(ctx, []NewPart{newPart("run", 2, "t", "b", "ours")}, nil)
	if err != nil || recs[0].Key != "run/2_t_b.txt" {
		t.Fatalf("answer = %+v, %v: want run/2_t_b.txt, as this index knows the run", recs, err)
	}
	if err := x.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	if n := x.QueueMismatches(); n != 0 {
		t.Errorf("%d mismatches before the step's statements ran, want 0", n)
	}
	if err := x.FoldStaged(ctx); err != nil {
		t.Fatal(err)
	}
	if n := x.QueueMismatches(); n != 1 {
		t.Errorf("%d mismatches, want 1", n)
	}
	p, err := x.Resolve(ctx, keyRef("run/2_t_b~2.txt"), "run")
	if err != nil || p.CallID != "b" {
		t.Errorf("run/2_t_b~2.txt = %+v, %v: want this index's part, recorded as Record would", p, err)
	}
	// The run is read again before anything of it is answered.
	recs, err = x.RecordQueued(ctx, []NewPart{newPart("run", 2, "t", "b", "ours again")}, nil)
	if err != nil || recs[0].Key != "run/2_t_b~2.txt" || recs[0].Version != 2 {
		t.Errorf("next answer = %+v, %v: want run/2_t_b~2.txt v2", recs, err)
	}
	if err := x.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	if n := x.QueueMismatches(); n != 1 {
		t.Errorf("%d mismatches after the run was read again, want 1", n)
	}
}

// Another index on the same database sees a step answered for once its
// transaction commits, without a read or a flush through the writer.
func TestRecordQueuedSeenByOthers(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	x := mustOpenQueued(t, path)
	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for step := 1; step <= 50; step++ {
		if _, err := x.RecordQueued(ctx, []NewPart{newPart("run", step, "t", "a", fmt.Sprint(step))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A deadline for a loaded machine; the bound itself is the benchmark's.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := other.Resolve(ctx, keyRef("run/50_t_a.txt"), "run")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("another index does not see the last step: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// listedKeys returns the key of the newest version of every part x lists,
// sorted.
func listedKeys(t *testing.T, x *Index) []string {
	t.Helper()
	ps, err := x.List(context.Background(), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, p := range ps {
		keys = append(keys, p.Key)
	}
	slices.Sort(keys)
	return keys
}

// keyRef is a reference by key.
func keyRef(key string) Ref { return Ref{Kind: RefKey, Key: key} }

// A staged step whose statements fail when it is folded is taken back
// alone: the fold's caller is told once, and the steps before and after
// it are recorded. Its writer was told it committed (it had, staged).
func TestRecordQueuedLateFailure(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	x := mustOpenQueued(t, filepath.Join(t.TempDir(), "q.db"))
	if _, err := x.RecordQueued(ctx, []NewPart{newPart("run", 1, "t", "a", "first")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := x.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	// A stand-in for a statement that fails once its writer had its
	// answer (a full disk, say).
	if _, err := x.db.ExecContext(ctx, `CREATE TRIGGER boom BEFORE INSERT ON parts WHEN NEW.tool = 'boom'
		BEGIN SELECT RAISE(ABORT, 'no room for this row'); END`); err != nil {
		t.Fatal(err)
	}
	told := make(chan error, 1)
	recs, err := x.RecordQueued(ctx, []NewPart{newPart("run", 2, "boom", "b", "second")}, func(err error) { told <- err })
	if err != nil || len(recs) != 1 || recs[0].Key != "run/2_boom_b.txt" {
		t.Fatalf("answer = %+v, %v: want run/2_boom_b.txt, answered before its statements", recs, err)
	}
	if err := x.CommitDeferred(); err != nil {
		t.Errorf("CommitDeferred after the staged step = %v, want nil: it is staged", err)
	}
	select {
	case err := <-told:
		if err != nil {
			t.Errorf("the staged step's callback got %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the staged step's callback was never called")
	}
	if _, err := x.RecordQueued(ctx, []NewPart{newPart("run", 3, "t", "c", "third")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := x.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	if err := x.FoldStaged(ctx); err == nil || !strings.Contains(err.Error(), "no room") ||
		!strings.Contains(err.Error(), "dropped") {
		t.Errorf("FoldStaged = %v, want the failed step's statement's error, saying it was dropped", err)
	}
	if err := x.CommitDeferred(); err != nil {
		t.Errorf("the failure was told twice: %v", err)
	}
	keys := listedKeys(t, x)
	want := []string{"run/1_t_a.txt", "run/3_t_c.txt"}
	if !slices.Equal(keys, want) {
		t.Errorf("parts = %q, want %q", keys, want)
	}
}

// Two indexes (two processes, as SQLite sees them) queue steps into one
// database, each at a quarter of the pace its committer can record them:
// each committer gets the write lock in turn, so that neither's rows wait
// long for their commit. A committer that kept its transaction open while
// steps trickled in held the lock nearly always, and the other, whose
// waits SQLite spaces out to 100 ms, waited for it for seconds.
func TestRecordQueuedCommittersTakeTurns(t *testing.T) {
	if onPostgres(t) {
		t.Skip("an index in PostgreSQL records at once")
	}
	ctx := context.Background()
	// What a step costs its committer here (much more under the race
	// detector): the writers leave it three times as much to spare.
	alone := mustOpenQueued(t, filepath.Join(t.TempDir(), "alone.db"))
	start := time.Now()
	for step := 1; step <= 200; step++ {
		if _, err := alone.RecordDeferred(ctx, []NewPart{newPart("run", step, "t", "a", fmt.Sprint(step))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := alone.CommitDeferred(); err != nil {
		t.Fatal(err)
	}
	pace := max(300*time.Microsecond, 4*time.Since(start)/200)
	path := filepath.Join(t.TempDir(), "q.db")
	xs := []*Index{mustOpenQueued(t, path), mustOpenQueued(t, path)}
	// A deadline for a loaded machine, or the race detector: here a step
	// commits 10 to 35 ms after it was queued (up to 90 ms under the race
	// detector beside two busy loops), and a committer starved of the lock
	// waited 1 to 3 s.
	const within = time.Second
	var (
		mu    sync.Mutex
		worst [2]time.Duration
		steps [2]int
		lags  [2][]time.Duration
	)
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for i, x := range xs {
		wg.Go(func() {
			run := fmt.Sprint("run", i)
			for step := 1; time.Now().Before(stop); step++ {
				queued := time.Now()
				_, err := x.RecordQueued(ctx, []NewPart{newPart(run, step, "t", "a", fmt.Sprint(run, step))}, func(err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("%s step %d: %v", run, step, err)
					}
					worst[i] = max(worst[i], time.Since(queued))
					lags[i] = append(lags[i], time.Since(queued))
					steps[i]++
				})
				if err != nil {
					t.Error(err)
					return
				}
				// What a writer does between steps (its blobs, the agent).
				time.Sleep(pace)
			}
			if err := x.CommitDeferred(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i := range xs {
		if steps[i] == 0 || worst[i] > within {
			t.Errorf("index %d: %d steps committed, the slowest %v after it was queued, want within %v", i, steps[i], worst[i], within)
		}
	}
	for i := range lags {
		slices.Sort(lags[i])
		n := len(lags[i])
		t.Logf("index %d: p50 %v p90 %v p99 %v p999 %v", i, lags[i][n/2], lags[i][n*9/10], lags[i][n*99/100], lags[i][n*999/1000])
	}
	t.Logf("a step every %v; steps committed %v; the slowest commit after its queuing: %v", pace, steps, worst)
}
