package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
)

// groupTest is four one-part writes begun together (each held, its bytes
// written and its statements handed over, until all have), with the
// group's barrier replaced by check, which is given the barrier's number
// (from 1) and then takes the file system's barrier unless it returns an
// error.
type groupTest struct {
	s        *Store
	texts    []string
	returned atomic.Int32
}

const groupWriters = 4

func newGroupTest(t *testing.T, check func(g *groupTest, n int) error) *groupTest {
	t.Helper()
	g := &groupTest{}
	// Each round of writes meets at its blobs' writes.
	var (
		mu      sync.Mutex
		arrived int
		met     = make(chan struct{})
		// n counts the group's barriers; check looks at each as it is
		// taken.
		n int
	)
	g.s = MustOpen(t, withFaults(func(point string) error {
		if point == "group:barrier" {
			n++
			return check(g, n)
		}
		if point != "write:blob" {
			return nil
		}
		mu.Lock()
		round := met
		if arrived++; arrived%groupWriters == 0 {
			// Each write has started its statements' goroutine; on a busy
			// machine one may not have run yet, and the group waits for
			// it only so long.
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				handed := total(g.s, "commit:handed")
				if handed == arrived {
					break
				}
			}
			close(met)
			met = make(chan struct{})
		}
		mu.Unlock()
		<-round
		return nil
	}))
	if !localOf(g.s).groupable(1) {
		t.Skip("no one-call barrier here (PostgreSQL, or not Linux)")
	}
	for i := range groupWriters {
		g.texts = append(g.texts, fmt.Sprintf("group write %d\n%s", i, text16K(i)))
	}
	return g
}

// write runs the four writes and returns what each returned.
func (g *groupTest) write() ([][]hook.Stored, []error) {
	ctx := context.Background()
	got := make([][]hook.Stored, groupWriters)
	errs := make([]error, groupWriters)
	var wg sync.WaitGroup
	for i := range groupWriters {
		wg.Go(func() {
			got[i], errs[i] = g.s.Write(ctx, []hook.Item{item(fmt.Sprint("run", i), 1, g.texts[i])})
			g.returned.Add(1)
		})
	}
	wg.Wait()
	return got, errs
}

// named returns how many of the writes' blobs are in place under their
// names.
func (g *groupTest) named() int {
	n := 0
	for _, text := range g.texts {
		if _, err := os.Stat(localOf(g.s).blobs.Path(cas.Blob{Digest: cas.Sum([]byte(text)), Ext: ".txt"})); err == nil {
			n++
		}
	}
	return n
}

// rows returns how many parts another connection sees committed.
func (g *groupTest) rows(t *testing.T) int {
	ps, err := g.s.List(context.Background(), ListOptions{AllVersions: true})
	if err != nil {
		t.Error(err)
	}
	return len(ps)
}

// Four one-part writes begun together take one barrier in all, after
// their rows' one commit, which syncs no log: every blob is named and
// every row committed when it begins, and no write has returned. Each
// reads back after.
func TestGroupSharesBarriers(t *testing.T) {
	ctx := context.Background()
	g := newGroupTest(t, func(g *groupTest, n int) error {
		if named, rows := g.named(), g.rows(t); named != groupWriters || rows != groupWriters {
			t.Errorf("at barrier %d: %d blobs named and %d rows committed, want %d and %d",
				n, named, rows, groupWriters, groupWriters)
		}
		if r := g.returned.Load(); r != 0 {
			t.Errorf("%d writes returned before the barrier after their commit", r)
		}
		return nil
	})
	before, commits := g.s.Barriers(), localOf(g.s).commitSyncs.Load()
	got, errs := g.write()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if b := g.s.Barriers() - before; b != 1 {
		t.Errorf("%d writes begun together took %d barriers, want 1", groupWriters, b)
	}
	if total(g.s, "group:barrier") != 1 {
		t.Errorf("the group took %d barriers, want 1", total(g.s, "group:barrier"))
	}
	if c := localOf(g.s).commitSyncs.Load() - commits; c != 0 {
		t.Errorf("the group's commits synced the log %d times, want none", c)
	}
	batches := counted(g.s, "commit:batch")
	if len(batches) != 1 || batches[0] != groupWriters {
		t.Errorf("the writes committed in transactions of %v, want one of %d", batches, groupWriters)
	}
	for i := range groupWriters {
		c, err := g.s.Read(ctx, "", got[i][0].Key)
		if err != nil || string(c.Data) != g.texts[i] {
			t.Errorf("Read(%s) = %v", got[i][0].Key, err)
		}
	}
	res, err := g.s.Verify(ctx, VerifyOptions{})
	if err != nil || !res.OK || len(res.Temp) > 0 {
		t.Errorf("verify after the group's writes: %+v, %v", res, err)
	}
}

// The group's barrier failing fails every write that waited for it, and
// leaves no row: they are deleted again after the commit. The store
// writes the same content again after.
func TestGroupBarrierFails(t *testing.T) {
	ctx := context.Background()
	failed := errors.New("injected barrier failure")
	fail := true
	g := newGroupTest(t, func(_ *groupTest, n int) error {
		if fail {
			return failed
		}
		return nil
	})
	_, errs := g.write()
	for i, err := range errs {
		if !errors.Is(err, failed) {
			t.Errorf("write %d = %v, want the barrier's error", i, err)
		}
	}
	if rows := g.rows(t); rows != 0 {
		t.Errorf("%d rows after the failed barrier, want none", rows)
	}
	// Their blobs were named before the barrier: the marker stays for
	// the next Open to check them.
	localOf(g.s).marker.mu.Lock()
	keep := localOf(g.s).marker.keep
	localOf(g.s).marker.mu.Unlock()
	if !keep {
		t.Error("the marker is not kept after the failed barrier")
	}
	res, err := g.s.Verify(ctx, VerifyOptions{})
	if err != nil || len(res.Corrupt) > 0 || len(res.Missing) > 0 || len(res.Temp) > 0 {
		t.Errorf("verify after the failed barrier: %+v, %v", res, err)
	}
	fail = false
	got, errs := g.write()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d after the failure: %v", i, err)
		}
		if c, err := g.s.Read(ctx, "", got[i][0].Key); err != nil || string(c.Data) != g.texts[i] {
			t.Errorf("Read(%s) = %v", got[i][0].Key, err)
		}
	}
}

// A write alone in the group takes no barrier of the group's: it syncs
// its own blob, name and log, three barriers, as a lone write does.
func TestGroupAloneSyncsItsOwn(t *testing.T) {
	s := MustOpen(t)
	if !localOf(s).groupable(1) {
		t.Skip("no one-call barrier here (PostgreSQL, or not Linux)")
	}
	before := s.Barriers()
	mustWrite(t, s, item("r", 1, text16K(1)))
	if b := s.Barriers() - before; b != 3 || total(s, "group:barrier") != 0 {
		t.Errorf("a lone write took %d barriers, %d of them the group's; want 3, none", b, total(s, "group:barrier"))
	}
}

// While one barrier for the file system would wait for much that others
// left unwritten, writes begun together take none of the group's: each
// syncs its own blob before naming it, and its log, and every one reads
// back after. Once the barrier is cheap again, they share one.
func TestGroupOffWhileBarrierDear(t *testing.T) {
	ctx := context.Background()
	var cheap atomic.Bool
	s := MustOpen(t, withBarrierCheap(cheap.Load))
	if !localOf(s).blobs.CanBarrier() || s.ix.IsPostgres() {
		t.Skip("no one-call barrier here (PostgreSQL, or not Linux)")
	}
	write := func(round int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, groupWriters)
		got := make([][]hook.Stored, groupWriters)
		texts := make([]string, groupWriters)
		for i := range groupWriters {
			texts[i] = fmt.Sprintf("round %d write %d\n%s", round, i, text16K(i))
			wg.Go(func() { got[i], errs[i] = s.Write(ctx, []hook.Item{item(fmt.Sprint("run", i), round, texts[i])}) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, write %d: %v", round, i, err)
			}
			if c, err := s.Read(ctx, "", got[i][0].Key); err != nil || string(c.Data) != texts[i] {
				t.Errorf("round %d: Read(%s) = %v", round, got[i][0].Key, err)
			}
		}
	}
	before, commits := s.Barriers(), localOf(s).commitSyncs.Load()
	write(1)
	if total(s, "group:barrier") != 0 {
		t.Errorf("the group took %d barriers while they were dear, want none", total(s, "group:barrier"))
	}
	// Each write: its blob's sync, its shard directory's, and a commit
	// that syncs the log (some commits may hold several writes' rows).
	if b, c := s.Barriers()-before, localOf(s).commitSyncs.Load()-commits; b < 2*groupWriters || c < 1 {
		t.Errorf("while barriers were dear, %d writes took %d syncs of blobs and directories and %d synced commits; want at least %d and 1",
			groupWriters, b, c, 2*groupWriters)
	}
	cheap.Store(true)
	// Not every write begun together need meet the others in time for
	// the group (no write here waits for the others, as newGroupTest's
	// do): rounds until one shares a barrier.
	for round := 2; round < 50 && total(s, "group:barrier") == 0; round++ {
		write(round)
	}
	if total(s, "group:barrier") == 0 {
		t.Error("once barriers were cheap again, no writes begun together shared one in 48 rounds")
	}
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || !res.OK {
		t.Errorf("verify: %+v, %v", res, err)
	}
}
