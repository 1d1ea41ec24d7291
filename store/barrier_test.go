package store

import (
	"context"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
)

// BenchmarkOneBarrier: a durable one-part step of 16 KiB of new content,
// "one-barrier" as Write does it (the blob's file synced and renamed, then
// its shard directory synced while the row commits) against "in-turn"
// (directory synced, then the row committed), the two taking turns step by
// step in one run; ns/op is per pair of steps, and each mode reports its
// own mean.
//
//	go test ./store -run '^$' -bench OneBarrier -benchtime 300x -count 3
func BenchmarkOneBarrier(b *testing.B) {
	ctx := context.Background()
	one := MustOpen(b)
	turn := MustOpen(b)
	turn.sequential = true
	var tOne, tTurn int64
	i := 0
	for b.Loop() {
		for k, s := range []*Store{one, turn} {
			if i%2 == 1 {
				s = []*Store{turn, one}[k]
			}
			start := nanotime()
			if _, err := s.Write(ctx, []hook.Item{item("bench", i, text16K(2*i+k))}); err != nil {
				b.Fatal(err)
			}
			if s == one {
				tOne += nanotime() - start
			} else {
				tTurn += nanotime() - start
			}
		}
		i++
	}
	b.ReportMetric(float64(tOne)/float64(b.N), "one-barrier-ns/step")
	b.ReportMetric(float64(tTurn)/float64(b.N), "in-turn-ns/step")
	b.ReportMetric(float64(tOne)/float64(tTurn), "ratio")
}

func nanotime() int64 { return time.Now().UnixNano() }
