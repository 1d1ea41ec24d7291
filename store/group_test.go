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
	"github.com/toolcas/toolcas/index"
)

// groupTest is four one-part writes begun together (each held, its bytes
// written, until all have written theirs), with the group's barrier replaced by
// check, which is given the barrier's number (from 1) and then takes the
// file system's barrier unless it returns an error.
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
	)
	g.s = MustOpen(t, withFaults(func(point string) error {
		if point != "write:blob" {
			return nil
		}
		mu.Lock()
		round := met
		if arrived++; arrived%groupWriters == 0 {
			close(met)
			met = make(chan struct{})
		}
		mu.Unlock()
		<-round
		return nil
	}))
	if !g.s.groupable(1) {
		t.Skip("no one-call barrier here (PostgreSQL, or not Linux)")
	}
	for i := range groupWriters {
		g.texts = append(g.texts, fmt.Sprintf("group write %d\n%s", i, text16K(i)))
	}
	var n int
	g.s.group.barrier = func() error {
		n++
		if err := check(g, n); err != nil {
			return err
		}
		return g.s.blobs.Barrier()
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
		if _, err := os.Stat(g.s.blobs.Path(cas.Blob{Digest: cas.Sum([]byte(text)), Ext: ".txt"})); err == nil {
			n++
		}
	}
	return n
}

// rows returns how many parts another connection sees committed.
func (g *groupTest) rows(t *testing.T) int {
	ps, err := g.s.List(context.Background(), index.ListOptions{AllVersions: true})
	if err != nil {
		t.Error(err)
	}
	return len(ps)
}

// Four one-part writes begun together take two barriers in all: the first
// makes their bytes durable before any is renamed into place or has a
// committed row, the second comes after their rows' commit, which syncs
// no log, and before any write returns. Each reads back after.
func TestGroupSharesBarriers(t *testing.T) {
	ctx := context.Background()
	var g *groupTest
	g = newGroupTest(t, func(g *groupTest, n int) error {
		switch n {
		case 1:
			if named, rows := g.named(), g.rows(t); named != 0 || rows != 0 {
				t.Errorf("at the first barrier: %d blobs named and %d rows committed, want none", named, rows)
			}
			// The statements of every write, begun once its bytes were
			// written, join the first's transaction while this barrier
			// runs: it waits for them, as a slow barrier would.
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				g.s.commits.mu.Lock()
				handed, queued := g.s.commits.handed, len(g.s.commits.pending)
				g.s.commits.mu.Unlock()
				if handed == groupWriters && queued == 0 {
					break
				}
				time.Sleep(time.Millisecond)
			}
		case 2:
			if named, rows := g.named(), g.rows(t); named != groupWriters || rows != groupWriters {
				t.Errorf("at the second barrier: %d blobs named and %d rows committed, want %d and %d",
					named, rows, groupWriters, groupWriters)
			}
			if r := g.returned.Load(); r != 0 {
				t.Errorf("%d writes returned before the barrier after their commit", r)
			}
		}
		return nil
	})
	before := g.s.Barriers()
	got, errs := g.write()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if b := g.s.Barriers() - before; b != 2 {
		t.Errorf("%d writes begun together took %d barriers, want 2", groupWriters, b)
	}
	if g.s.group.barriers != 2 {
		t.Errorf("the group took %d barriers, want 2", g.s.group.barriers)
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

// A barrier of the group that fails fails every write that waited for it,
// and leaves no row: the first before any blob is named (no blob, no temp
// file stays), the second after the rows' commit (they are deleted
// again). The store writes the same content again after.
func TestGroupBarrierFails(t *testing.T) {
	for _, failing := range []int{1, 2} {
		t.Run(fmt.Sprint("barrier ", failing), func(t *testing.T) {
			ctx := context.Background()
			failed := errors.New("injected barrier failure")
			g := newGroupTest(t, func(_ *groupTest, n int) error {
				if n == failing {
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
			if failing == 1 {
				if named := g.named(); named != 0 {
					t.Errorf("%d blobs named after the first barrier failed, want none", named)
				}
			}
			res, err := g.s.Verify(ctx, VerifyOptions{})
			if err != nil || len(res.Corrupt) > 0 || len(res.Missing) > 0 || len(res.Temp) > 0 {
				t.Errorf("verify after the failed barrier: %+v, %v", res, err)
			}
			got, errs := g.write()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("write %d after the failure: %v", i, err)
				}
				if c, err := g.s.Read(ctx, "", got[i][0].Key); err != nil || string(c.Data) != g.texts[i] {
					t.Errorf("Read(%s) = %v", got[i][0].Key, err)
				}
			}
		})
	}
}

// A write alone in the group takes no barrier of the group's: it syncs
// its own blob, name and log, three barriers, as a lone write does.
func TestGroupAloneSyncsItsOwn(t *testing.T) {
	s := MustOpen(t)
	if !s.groupable(1) {
		t.Skip("no one-call barrier here (PostgreSQL, or not Linux)")
	}
	before := s.Barriers()
	mustWrite(t, s, item("r", 1, text16K(1)))
	if b := s.Barriers() - before; b != 3 || s.group.barriers != 0 {
		t.Errorf("a lone write took %d barriers, %d of them the group's; want 3, none", b, s.group.barriers)
	}
}
