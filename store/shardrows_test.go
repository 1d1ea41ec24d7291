package store

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// TestShardRows asks for every shard's rows, in order and out of it, from
// two goroutines at once as verify does (one starting reads ahead, one
// taking them): each shard's rows are its own, whatever was read ahead.
func TestShardRows(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	var items []hook.Item
	for i := range 600 {
		items = append(items, item("r", i, fmt.Sprint("rows ", i)))
	}
	mustWrite(t, s, items...)
	want := map[byte]int{}
	for sh := range 256 {
		rows, err := s.ix.BlobsInShard(ctx, byte(sh))
		if err != nil {
			t.Fatal(err)
		}
		want[byte(sh)] = len(rows)
	}
	for _, order := range [][]int{ascending(), descending()} {
		r, err := newShardRows(ctx, s.ix)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, sh := range order {
				r.start(ctx, sh)
			}
		}()
		total := 0
		for _, sh := range order {
			rows, err := r.get(ctx, byte(sh))
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range rows {
				if row.Blob.Digest[0] != byte(sh) {
					t.Fatalf("shard %02x: a row of shard %02x", sh, row.Blob.Digest[0])
				}
			}
			if len(rows) != want[byte(sh)] {
				t.Errorf("shard %02x: %d rows, want %d", sh, len(rows), want[byte(sh)])
			}
			total += len(rows)
		}
		wg.Wait()
		if total != 600 {
			t.Errorf("%d rows in all, want 600", total)
		}
		r.mu.Lock()
		if len(r.pending) > 2 {
			t.Errorf("%d reads left pending, want at most 2", len(r.pending))
		}
		r.mu.Unlock()
	}
}

func ascending() []int {
	out := make([]int, 256)
	for i := range out {
		out[i] = i
	}
	return out
}

func descending() []int {
	out := ascending()
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
