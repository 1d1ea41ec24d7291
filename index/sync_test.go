package index

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/toolcas/toolcas/cas"
)

// The log is synced on every commit unless the index is told that recent
// commits may be lost on a power cut, or that nothing need be durable.
func TestSynchronousMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{
		{"full", nil, 2},
		{"none", []Option{WithDurability(cas.SyncNone)}, 1},
		{"recent may be lost", []Option{RecentKeysMayBeLostOnPowerCut()}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			x, err := Open(ctx, filepath.Join(t.TempDir(), "index.db"), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			var got int
			if err := x.db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("synchronous = %d, want %d", got, tc.want)
			}
		})
	}
}
