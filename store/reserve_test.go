package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
)

func TestReserveFor(t *testing.T) {
	for _, tc := range []struct {
		index, want int64
	}{
		{0, MinReserve},
		{100 << 10, MinReserve},
		{8 * MinReserve, MinReserve},
		{8*MinReserve + 8, 2 * MinReserve},
		{2 << 20, 256 << 10},
		{2<<20 + 8, 512 << 10},
		{5 << 20, DefaultReserve},
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
// index grows past 512 KiB, 1 MiB and 2 MiB, open, gc and prune make the
// reserve again at the next power of two over an eighth of the index; a
// reserve larger than that (an older store's) is cut down, and WithReserve
// sets the size whatever the index.
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
		runs int // of 250 parts, to write first
		do   func() error
	}{
		{"open", 16, func() error {
			o, err := Open(ctx, dir)
			if err == nil {
				err = o.Close()
			}
			return err
		}},
		{"gc", 16, func() error { _, err := s.GC(ctx, GCOptions{}); return err }},
		{"prune", 32, func() error {
			_, err := s.Prune(ctx, PruneOptions{Run: "none such"})
			return err
		}},
	} {
		for i := range remake.runs {
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
	// A few more parts and an open leave the reserve file as it is: it is
	// made again only when the index doubles.
	before, err := os.Stat(filepath.Join(dir, ReserveFile))
	if err != nil {
		t.Fatal(err)
	}
	write("more", 50)
	MustOpenDir(t, dir)
	after, err := os.Stat(filepath.Join(dir, ReserveFile))
	if err != nil || !os.SameFile(before, after) || after.Size() != last {
		t.Errorf("the reserve after a few more parts and an open: %v, %v; want the same file of %d bytes", after, err, last)
	}
	// A reserve set by hand keeps its size.
	MustOpenDir(t, dir, WithReserve(300<<10))
	if got := reserveSize(t, dir); got != 300<<10 {
		t.Errorf("WithReserve(%d): a reserve of %d bytes", 300<<10, got)
	}
}
