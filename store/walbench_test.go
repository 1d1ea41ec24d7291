package store

import (
	"context"
	"encoding/binary"
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
//	go test ./store -run '^$' -bench WALPerStep -benchtime 40x
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
	log, err := os.ReadFile(wal)
	if err != nil || len(log) < 32 {
		b.Fatal(err, len(log))
	}
	// Past the automatic checkpoint the log starts over and its size says
	// nothing: the figure would be too low.
	page := int(binary.BigEndian.Uint32(log[8:12]))
	if frames := (len(log) - 32) / (page + 24); frames >= 900 {
		b.Fatalf("%d steps logged %d pages, near the automatic checkpoint: run fewer steps", b.N, frames)
	}
	b.ReportMetric(float64(len(log))/float64(b.N), "walB/step")
}
