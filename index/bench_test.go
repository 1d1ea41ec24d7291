package index

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
)

// go test ./index -run '^$' -bench . -benchtime 2s

func benchPart(i int) NewPart {
	content := fmt.Sprint("content ", i%5000)
	return NewPart{
		Key: fmt.Sprintf("run-%d/%d_read_file_call-%d.txt", i%100, i, i), Run: fmt.Sprint("run-", i%100),
		Step: i, Tool: []string{"read_file", "grep", "list_dir", "run_tests"}[i%4], CallID: fmt.Sprint("call-", i),
		Part: -1, Kind: catalog.KindText, MIME: "text/plain", Chars: 4096, Bytes: 4096,
		Blob: cas.Blob{Digest: cas.Sum([]byte(content)), Ext: ".txt"},
	}
}

func BenchmarkRecord(b *testing.B) {
	ctx := context.Background()
	for _, d := range []cas.Durability{cas.SyncFull, cas.SyncNone} {
		for _, batch := range []int{1, 1000} {
			b.Run(fmt.Sprintf("%s/%dpertx", d, batch), func(b *testing.B) {
				x := MustOpen(b, WithDurability(d))
				ps := make([]NewPart, batch)
				n := 0
				for b.Loop() {
					for j := range ps {
						ps[j] = benchPart(n)
						n++
					}
					if _, err := x.Record(ctx, ps); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "parts/s")
			})
		}
	}
}

// fill records n parts in batches of 1,000.
func fill(tb testing.TB, x *Index, n int) {
	tb.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 1000 {
		ps := make([]NewPart, 0, 1000)
		for j := i; j < i+1000 && j < n; j++ {
			ps = append(ps, benchPart(j))
		}
		if _, err := x.Record(ctx, ps); err != nil {
			tb.Fatal(err)
		}
	}
}

func BenchmarkResolveKey(b *testing.B) {
	ctx := context.Background()
	x := MustOpen(b, WithDurability(cas.SyncNone))
	fill(b, x, 100_000)
	refs := make([]Ref, 1000)
	for i := range refs {
		k := benchPart(i * 97).Key
		refs[i] = Ref{Kind: RefKey, Key: k, text: k}
	}
	i := 0
	for b.Loop() {
		if _, err := x.Resolve(ctx, refs[i%len(refs)], ""); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkStats100k(b *testing.B) {
	ctx := context.Background()
	x := MustOpen(b, WithDurability(cas.SyncNone))
	fill(b, x, 100_000)
	x.Checkpoint(ctx)
	var s Stats
	for b.Loop() {
		var err error
		if s, err = x.Stats(ctx, ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(s.IndexBytes)/float64(s.Parts), "indexB/part")
}

// BenchmarkRecordPostgres records as BenchmarkRecord does, durably, in a
// database of the tests' private PostgreSQL cluster on loopback.
func BenchmarkRecordPostgres(b *testing.B) {
	ctx := context.Background()
	b.Run("postgres", func(b *testing.B) {
		for _, batch := range []int{1, 1000} {
			b.Run(fmt.Sprintf("%dpertx", batch), func(b *testing.B) {
				x := MustOpen(b)
				ps := make([]NewPart, batch)
				n := 0
				for b.Loop() {
					for j := range ps {
						ps[j] = benchPart(n)
						n++
					}
					if _, err := x.Record(ctx, ps); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "parts/s")
			})
		}
	})
}
