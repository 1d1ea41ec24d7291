package index

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
)

// uniqueStep is step i of run as a hook step of unique 4 KiB text
// records it: one part, new content.
func uniqueStep(run string, i int) NewPart {
	return NewPart{
		Key: fmt.Sprintf("%s/%d_Bash_toolu_01%022d.txt", run, i, i), Run: run, Step: i, Tool: "Bash",
		CallID: fmt.Sprintf("toolu_01%022d", i), Part: -1, Kind: catalog.KindText, MIME: "text/plain",
		Chars: 4096, Bytes: 4096,
		Blob: cas.Blob{Digest: cas.Sum([]byte(fmt.Sprint("unique ", i))), Ext: ".txt"},
	}
}

// BenchmarkRecordStep records one-part steps of new content, as a hook
// step of unique text does, one run writing (or ten taking turns), on an
// index of 1,000 parts. Run it on tmpfs to see the CPU, not the disk:
//
//	TMPDIR=/dev/shm go test ./index -run '^$' -bench RecordStep -benchtime 2000x
func BenchmarkRecordStep(b *testing.B) {
	ctx := context.Background()
	for _, d := range []cas.Durability{cas.SyncNone, cas.SyncFull} {
		for _, runs := range []int{1, 10} {
			b.Run(fmt.Sprintf("%s/%druns", d, runs), func(b *testing.B) {
				x := MustOpen(b, WithDurability(d))
				part := func(i int) NewPart { return uniqueStep(fmt.Sprint("run", i%runs), i) }
				i := 0
				for ; i < 1000; i++ {
					if _, err := x.Record(ctx, []NewPart{part(i)}); err != nil {
						b.Fatal(err)
					}
				}
				for b.Loop() {
					if _, err := x.Record(ctx, []NewPart{part(i)}); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
	// Without syncs, as a store records: steps share one commit.
	b.Run("none-deferred", func(b *testing.B) {
		x := MustOpen(b, WithDurability(cas.SyncNone), WithDeferredCommit())
		i := 0
		for b.Loop() {
			p := uniqueStep("run", i)
			if _, err := x.RecordDeferred(ctx, []NewPart{p}, nil); err != nil {
				b.Fatal(err)
			}
			i++
		}
		if err := x.CommitDeferred(); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkFoldStaged stages 1,000 one-part steps of new content, as a
// store without syncs does, then times the fold that records them: what
// the first read after them costs, per part. "new" folds into a new
// index each time; "in use" into one that holds 20,000 parts already and
// grows, whose pages the fold changes rather than adds (a savepoint's
// journal copies only the former).
//
//	TMPDIR=/dev/shm go test ./index -run '^$' -bench FoldStaged -benchtime 5x
func BenchmarkFoldStaged(b *testing.B) {
	ctx := context.Background()
	const steps = 1000
	stageAndFold := func(b *testing.B, x *Index, from int) {
		b.StopTimer()
		for i := range steps {
			if _, err := x.RecordQueued(ctx, []NewPart{uniqueStep("run", from+i)}, nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := x.CommitDeferred(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := x.FoldStaged(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			x := MustOpen(b, WithDurability(cas.SyncNone), WithDeferredCommit())
			b.StartTimer()
			stageAndFold(b, x, 0)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*steps), "µs/part")
	})
	b.Run("in use", func(b *testing.B) {
		x := MustOpen(b, WithDurability(cas.SyncNone), WithDeferredCommit())
		next := 0
		for range 20 {
			stageAndFold(b, x, next)
			next += steps
		}
		b.ResetTimer()
		for b.Loop() {
			stageAndFold(b, x, next)
			next += steps
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*steps), "µs/part")
	})
}

// BenchmarkRecordQueuedNewRun records, without syncs, the first step of a
// new run each time, under a context that can be cancelled (as a caller's
// usually is): the writer reads what the index knows of the run before it
// answers.
//
//	TMPDIR=/dev/shm go test ./index -run '^$' -bench RecordQueuedNewRun -benchtime 2000x
func BenchmarkRecordQueuedNewRun(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	x := MustOpen(b, WithDurability(cas.SyncNone), WithDeferredCommit())
	i := 0
	for b.Loop() {
		if _, err := x.RecordQueued(ctx, []NewPart{uniqueStep(fmt.Sprint("run", i), i)}, nil); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if err := x.CommitDeferred(); err != nil {
		b.Fatal(err)
	}
}
