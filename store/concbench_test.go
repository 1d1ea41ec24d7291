package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// BenchmarkWriteConcurrent16KiB: four runs writing at once in one process,
// each step one 16 KiB text part, durable; ns/op is per step of any run.
//
//	go test ./store -run '^$' -bench WriteConcurrent -benchtime 400x
func BenchmarkWriteConcurrent16KiB(b *testing.B) {
	ctx := context.Background()
	s := MustOpen(b)
	var next atomic.Int64
	b.SetParallelism(2) // with 2 cores: four writers
	b.SetBytes(16 << 10)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		run := fmt.Sprint("run", next.Add(1))
		i := 0
		for pb.Next() {
			n := int(next.Add(1))
			if _, err := s.Write(ctx, []hook.Item{item(run, i, text16K(n))}); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/float64(max(len(counted(s, "commit:batch")), 1)), "steps/commit")
	b.ReportMetric(float64(s.Barriers())/float64(b.N), "barriers/step")
}
