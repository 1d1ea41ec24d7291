package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
)

// gc marks without gc.lock: a writer with a short lock timeout writes while
// gc walks the blob files, both for a dry run and for a real one; and a
// blob that the mark found unused, and that a writer uses again before the
// sweep, keeps its file and its row.
func TestGCMarksWithoutTheLock(t *testing.T) {
	for _, dry := range []bool{true, false} {
		t.Run(fmt.Sprint("dry run ", dry), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			later := func() time.Time { return time.Now().Add(2 * DefaultGrace) }
			var writer *Store
			wrote := 0
			walks, shards := 0, 0
			inject := func(point string) error {
				var it hook.Item
				switch {
				case point == "gc:walk" && walks == 0:
					// Something new while gc walks the files.
					walks++
					it = item("other", 1, "written during the walk")
				case point == "gc:unreferenced":
					// The garbage blob's content again, once the mark has
					// read the rows of every shard (a shard at a time).
					if shards++; shards != 256 {
						return nil
					}
					it = item("again", 1, "garbage")
				default:
					return nil
				}
				if _, err := writer.Write(ctx, []hook.Item{it}); err != nil {
					return fmt.Errorf("write during the mark: %w", err)
				}
				wrote++
				return nil
			}
			s := MustOpenDir(t, dir, WithCreate(), WithClock(later), withFaults(inject))
			writer = MustOpenDir(t, dir, WithLockTimeout(100*time.Millisecond))
			mustWrite(t, writer, item("kept", 1, "kept"))
			mustWrite(t, writer, item("gone", 1, "garbage"))
			if _, err := writer.Prune(ctx, PruneOptions{Run: "gone"}); err != nil {
				t.Fatal(err)
			}
			res, err := s.GC(ctx, GCOptions{DryRun: dry})
			if err != nil {
				t.Fatalf("gc: %v", err)
			}
			if wrote != 2 {
				t.Fatalf("%d writes during the mark, want 2", wrote)
			}
			if dry && res.RemovedBlobs != 1 {
				t.Errorf("dry run would remove %d blobs, want the one unused when it marked", res.RemovedBlobs)
			}
			if !dry && res.RemovedBlobs != 0 {
				t.Errorf("gc removed %d blobs, want none: the garbage was used again before the sweep", res.RemovedBlobs)
			}
			ps, err := writer.List(ctx, ListOptions{Run: "again"})
			if err != nil || len(ps) != 1 {
				t.Fatalf("run again: %v, %v", ps, err)
			}
			if _, err := writer.Read(ctx, "again", ps[0].Key); err != nil {
				t.Errorf("read back the part written during the mark: %v", err)
			}
		})
	}
}
