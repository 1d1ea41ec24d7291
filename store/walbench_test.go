package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// BenchmarkWALPerStep measures the index's write-ahead log bytes per
// durable one-part step (one 16 KiB text part): every page a step changes
// is appended to the log whole, so the figure counts pages times the page
// size. The store holds 1,000 parts first, and the log starts empty. Run it
// with fewer steps than fill the log's automatic checkpoint (1,000 pages):
//
//	go test ./store -run '^$' -bench WALPerStep -benchtime 100x
func BenchmarkWALPerStep(b *testing.B) {
	ctx := context.Background()
	s := MustOpen(b)
	for i := range 1000 {
		if _, err := s.Write(ctx, []hook.Item{item(fmt.Sprint("run", i%10), i, text16K(i))}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Checkpoint(ctx); err != nil {
		b.Fatal(err)
	}
	wal := filepath.Join(s.Dir(), IndexFile+"-wal")
	i := 1000
	for b.Loop() {
		if _, err := s.Write(ctx, []hook.Item{item(fmt.Sprint("run", i%10), i, text16K(i))}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	fi, err := os.Stat(wal)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(fi.Size())/float64(b.N), "walB/step")
}
