package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
)

func TestReserveFor(t *testing.T) {
	for _, tc := range []struct {
		index, want int64
	}{
		{0, MinReserve},
		{100 << 10, MinReserve},
		{8 * MinReserve, MinReserve},
		{8*MinReserve + 8, MinReserve + 1},
		{2 << 20, 256 << 10},
		{8 << 20, DefaultReserve},
		{1 << 40, DefaultReserve},
	} {
		if got := reserveFor(tc.index); got != tc.want {
			t.Errorf("reserveFor(%d) = %d, want %d", tc.index, got, tc.want)
		}
	}
}

// reserveSize returns the size of the reserve file under dir, -1 when there
// is none.
func reserveSize(t *testing.T, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, ReserveFile))
	if err != nil {
		return -1
	}
	return fi.Size()
}

// TestReserveGrowsWithIndex: a new store keeps the smallest reserve; as its
// index grows, open, gc and prune make the reserve again at an eighth of the
// index; a reserve larger than that (an older store's) is cut down, and
// WithReserve sets the size whatever the index.
func TestReserveGrowsWithIndex(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := MustOpenDir(t, dir, WithCreate(), WithDurability(cas.SyncNone))
	if got := reserveSize(t, dir); got != MinReserve {
		t.Fatalf("a new store's reserve: %d bytes, want %d", got, MinReserve)
	}
	// An older store's reserve of DefaultReserve is cut down when it opens.
	if err := os.Truncate(filepath.Join(dir, ReserveFile), DefaultReserve); err != nil {
		t.Fatal(err)
	}
	MustOpenDir(t, dir)
	if got := reserveSize(t, dir); got != MinReserve {
		t.Fatalf("a reserve of %d bytes once the store opened: %d bytes, want %d", DefaultReserve, got, MinReserve)
	}
	write := func(run string, n int) {
		items := make([]hook.Item, n)
		for i := range items {
			items[i] = hook.Item{Key: hook.Key{Run: run, Step: i, Tool: "bash", CallID: fmt.Sprintf("call_%s_%d", run, i), Part: -1, Ext: ".txt"},
				Part: hook.Text(fmt.Sprintf("%s %d %s", run, i, content(uint64(i), 200)))}
		}
		mustWrite(t, s, items...)
	}
	last := int64(MinReserve)
	for round, remake := range []struct {
		name string
		do   func() error
	}{
		{"open", func() error {
			o, err := Open(ctx, dir)
			if err == nil {
				err = o.Close()
			}
			return err
		}},
		{"gc", func() error { _, err := s.GC(ctx, GCOptions{}); return err }},
		{"prune", func() error {
			_, err := s.Prune(ctx, index.PruneOptions{Run: "none such"})
			return err
		}},
	} {
		for i := range 8 {
			write(fmt.Sprintf("r%d-%d", round, i), 250)
		}
		if err := s.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		if got := reserveSize(t, dir); got != last {
			t.Errorf("before %s: a reserve of %d bytes, want it left at %d until something makes it again", remake.name, got, last)
		}
		if err := remake.do(); err != nil {
			t.Fatal(err)
		}
		ix := indexFileBytes(dir)
		got := reserveSize(t, dir)
		if want := reserveFor(ix); got != want || got <= last {
			t.Errorf("after %s, index of %d bytes: a reserve of %d bytes, want %d, more than the %d before", remake.name, ix, got, want, last)
		}
		t.Logf("after %s: index of %d bytes, reserve of %d", remake.name, ix, got)
		last = got
	}
	// A reserve set by hand keeps its size.
	MustOpenDir(t, dir, WithReserve(300<<10))
	if got := reserveSize(t, dir); got != 300<<10 {
		t.Errorf("WithReserve(%d): a reserve of %d bytes", 300<<10, got)
	}
}
