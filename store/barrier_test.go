package store

import (
	"context"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
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
	var tOne, tTurn int64
	i := 0
	for b.Loop() {
		for k, s := range []*Store{one, turn} {
			if i%2 == 1 {
				s = []*Store{turn, one}[k]
			}
			start := nanotime()
			it := item("bench", i, text16K(2*i+k))
			var err error
			if s == one {
				_, err = s.Write(ctx, []hook.Item{it})
			} else {
				err = writeInTurn(ctx, s, it)
			}
			if err != nil {
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

// writeInTurn writes one part as a write did before its barriers were
// shared: the blob made durable (its file and shard directory synced),
// then its row committed.
func writeInTurn(ctx context.Context, s *Store, it hook.Item) error {
	e := localOf(s)
	np, data, err := newPart(it)
	if err != nil {
		return err
	}
	return e.guard(ctx, func(ctx context.Context) ([]cas.PutResult, error) {
		r, err := e.blobs.PutBytes(ctx, data, np.Blob.Ext)
		np.Blob = r.Blob
		return []cas.PutResult{r}, err
	}, func(ctx context.Context) error {
		_, err := e.record(ctx, []index.NewPart{np})
		return err
	})
}
