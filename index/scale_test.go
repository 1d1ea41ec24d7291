package index

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/cas"
)

var scaleSizes = flag.String("index.scale", "10000,100000", "with -bench Scale: the index sizes, in parts, comma-separated")

// BenchmarkScale times what maintenance asks of the index at each size of
// -index.scale (10,000 and 100,000 parts unless told; a million takes
// minutes to fill): stats, show of a blob that 50,000 parts (or a tenth of
// them) share (a page and the count, and, as show did, every one of them),
// listing the newest 50, gc's list of the referenced blobs,
// and recording one more part. The parts use 5,000 distinct blobs.
//
//	go test ./index -run '^$' -bench Scale -benchtime 5x -index.scale 10000,100000,1000000
func BenchmarkScale(b *testing.B) { benchmarkScale(b) }

// BenchmarkScalePostgres is BenchmarkScale in a database of the tests'
// private PostgreSQL cluster on loopback.
func BenchmarkScalePostgres(b *testing.B) { b.Run("postgres", benchmarkScale) }

func benchmarkScale(b *testing.B) {
	ctx := context.Background()
	for _, f := range strings.Split(*scaleSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 10 {
			b.Fatalf("-index.scale %q: want sizes of 10 parts or more", *scaleSizes)
		}
		x := MustOpen(b, WithDurability(cas.SyncNone))
		shared := min(50_000, n/10)
		fillScale(b, x, n, shared)
		x.Checkpoint(ctx)
		hot := cas.Blob{Digest: cas.Sum([]byte("shared by many")), Ext: ".txt"}
		for _, op := range []struct {
			name string
			f    func() error
		}{
			{"stats", func() error { _, err := x.Stats(ctx, ""); return err }},
			{"show-shared", func() error {
				if _, err := x.Blob(ctx, hot); err != nil {
					return err
				}
				ps, err := x.SharingFirst(ctx, hot, 11)
				if err == nil && len(ps) != 11 {
					err = fmt.Errorf("%d parts share the blob", len(ps))
				}
				return err
			}},
			{"show-shared-all", func() error {
				if _, err := x.Blob(ctx, hot); err != nil {
					return err
				}
				_, err := x.Sharing(ctx, hot)
				return err
			}},
			{"list-50", func() error { _, err := x.List(ctx, ListOptions{Limit: 50}); return err }},
			{"referenced-blobs", func() error { _, err := x.ReferencedBlobs(ctx); return err }},
		} {
			b.Run(fmt.Sprintf("%d/%s", n, op.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := op.f(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("%d/record-one", n), func(b *testing.B) {
			i := n
			for b.Loop() {
				if _, err := x.Record(ctx, []NewPart{benchPart(i)}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		x.Close()
	}
}

// fillScale records n parts in batches of 5,000, of which shared use one
// blob.
func fillScale(tb testing.TB, x *Index, n, shared int) {
	tb.Helper()
	ctx := context.Background()
	hot := cas.Blob{Digest: cas.Sum([]byte("shared by many")), Ext: ".txt"}
	for i := 0; i < n; i += 5000 {
		ps := make([]NewPart, 0, 5000)
		for j := i; j < i+5000 && j < n; j++ {
			p := benchPart(j)
			if j%(n/shared) == 0 {
				p.Blob = hot
			}
			ps = append(ps, p)
		}
		if _, err := x.Record(ctx, ps); err != nil {
			tb.Fatal(err)
		}
	}
}
