package store

import (
	"context"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
)

// Barriers counts what each durability costs a one-part step of new
// content: the blob file, its shard directory and the index's log in full;
// the log not in the mode that gives that up; nothing with durability off;
// and a dedup hit syncs no blob.
func TestBarriersPerStep(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		opts      []Option
		new, same int64
	}{
		{"full", nil, 3, 1},
		{DurabilityRecentKeysMayBeLost, []Option{RecentKeysMayBeLostOnPowerCut()}, 2, 0},
		{"none", []Option{WithDurability(cas.SyncNone)}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := MustOpen(t, tc.opts...)
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
			if got := s.Barriers() - before; got != tc.same {
				t.Errorf("dedup hit: %d barriers, want %d", got, tc.same)
			}
		})
	}
}
