package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
)

// BenchmarkOneBarrier measures what one barrier for blob and row could
// save on a durable one-part step of 16 KiB: "sequential" is the write
// path (the blob durable, then the row committed), "overlapped" issues
// the blob's write and syncs and the row's commit at once and waits for
// both, as a store that dropped, on open, rows whose blob did not survive
// could. It is a measurement only; the store does not overlap them.
//
//	go test ./store -run '^$' -bench OneBarrier -benchtime 300x -count 3
func BenchmarkOneBarrier(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []string{"sequential", "overlapped"} {
		b.Run(mode, func(b *testing.B) {
			s := MustOpen(b)
			i := 0
			for b.Loop() {
				data := text16K(i)
				k := hook.Key{Run: "bench", Step: i, Tool: "t", CallID: fmt.Sprint("c", i), Part: -1, Ext: ".txt"}
				np := newPart(k, hook.Text(data), []byte(data))
				np.Blob = cas.Blob{Digest: cas.Sum([]byte(data)), Ext: ".txt"}
				if mode == "sequential" {
					if _, err := s.blobs.PutBytes(ctx, []byte(data), ".txt"); err != nil {
						b.Fatal(err)
					}
					if _, err := s.index.Record(ctx, []index.NewPart{np}); err != nil {
						b.Fatal(err)
					}
				} else {
					errc := make(chan error, 1)
					go func() {
						_, err := s.blobs.PutBytes(ctx, []byte(data), ".txt")
						errc <- err
					}()
					_, err := s.index.Record(ctx, []index.NewPart{np})
					if err2 := <-errc; err == nil {
						err = err2
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				i++
			}
		})
	}
}
