package store

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
)

// Barriers counts what each durability costs a one-part step of new
// content: the blob file, its shard directory and the index's log in full;
// the log not in the mode that gives that up; nothing with durability off.
// A dedup hit on a blob born a moment ago syncs the blob and its shard
// (its writer may not have synced the name yet), unless this store synced
// that file itself; one on an old blob syncs no blob.
func TestBarriersPerStep(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name                 string
		opts                 []Option
		new, own, other, old int64
	}{
		{"full", nil, 3, 1, 3, 1},
		{DurabilityRecentKeysMayBeLost, []Option{RecentKeysMayBeLostOnPowerCut()}, 2, 0, 2, 0},
		{"none", []Option{WithDurability(cas.SyncNone)}, 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var later atomic.Int64
			clock := func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
			s := MustOpen(t, append(tc.opts, WithClock(clock))...)
			before := s.Barriers()
			if _, err := s.Write(ctx, []hook.Item{item("r", 1, text16K(1))}); err != nil {
				t.Fatal(err)
			}
			if got := s.Barriers() - before; got != tc.new {
				t.Errorf("new content: %d barriers, want %d", got, tc.new)
			}
			before = s.Barriers()
			if _, err := s.Write(ctx, []hook.Item{item("r", 2, text16K(1))}); err != nil {
				t.Fatal(err)
			}
			own := tc.own
			if !blobFileTold(t, s) {
				own = tc.other
			}
			if got := s.Barriers() - before; got != own {
				t.Errorf("dedup hit on a blob this store synced: %d barriers, want %d", got, own)
			}
			// Another store, as another process would, syncs the young blob.
			other := MustOpenDir(t, s.Dir(), append(tc.opts, WithClock(clock))...)
			before = other.Barriers()
			if _, err := other.Write(ctx, []hook.Item{item("r", 4, text16K(1))}); err != nil {
				t.Fatal(err)
			}
			if got := other.Barriers() - before; got != tc.other {
				t.Errorf("dedup hit on a blob another store wrote: %d barriers, want %d", got, tc.other)
			}
			later.Store(int64(2 * time.Minute))
			before = s.Barriers()
			if _, err := s.Write(ctx, []hook.Item{item("r", 3, text16K(1))}); err != nil {
				t.Fatal(err)
			}
			if got := s.Barriers() - before; got != tc.old {
				t.Errorf("dedup hit on an old blob: %d barriers, want %d", got, tc.old)
			}
		})
	}
}
