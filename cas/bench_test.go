package cas

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// The benchmarks below come in pairs: each store operation beside a bare
// baseline doing the same file-system work with the os package alone, so that
// one `go test -bench` run gives the ratio on the same machine at the same
// moment:
//
//	go test ./cas -run '^$' -bench . -benchtime 2000x

var benchSizes = []int{4 << 10, 16 << 10, 64 << 10, 1 << 20}

// uniqueContent returns size bytes that differ from any earlier call's.
func uniqueContent(base []byte, i int) []byte {
	binary.LittleEndian.PutUint64(base, uint64(i))
	binary.LittleEndian.PutUint64(base[len(base)-8:], uint64(i)^0x9e3779b97f4a7c15)
	return base
}

func BenchmarkPut(b *testing.B) {
	ctx := context.Background()
	for _, d := range []Durability{SyncFull, SyncNone} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%dKiB", d, size>>10), func(b *testing.B) {
				s := MustOpen(b, WithDurability(d))
				data := pattern(size, 9)
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					if _, err := s.PutBytes(ctx, uniqueContent(data, i), ".txt"); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
			})
		}
	}
}

// BenchmarkBare is the floor for BenchmarkPut: temp file in a shard
// directory, write, fsync (full), close, rename, fsync the directory (full).
func BenchmarkBare(b *testing.B) {
	for _, d := range []Durability{SyncFull, SyncNone} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%dKiB", d, size>>10), func(b *testing.B) {
				dir := b.TempDir()
				for i := range 256 {
					os.Mkdir(filepath.Join(dir, fmt.Sprintf("%02x", i)), 0o755)
				}
				data := pattern(size, 9)
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					content := uniqueContent(data, i)
					shard := filepath.Join(dir, fmt.Sprintf("%02x", content[0]^byte(i>>8)))
					if err := bareWrite(shard, fmt.Sprintf("%d.txt", i), content, d == SyncFull); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
			})
		}
	}
}

func bareWrite(dir, name string, data []byte, durable bool) error {
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if durable {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	if durable {
		d, err := os.Open(dir)
		if err != nil {
			return err
		}
		defer d.Close()
		return d.Sync()
	}
	return nil
}

// BenchmarkPutHit puts content already stored, beside BenchmarkPut's miss of
// the same size: full/64KiB. A young blob (born within settleTime) is
// synced by every durable hit, since its writer may not have synced its
// name yet; an old one is not.
func BenchmarkPutHit(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{64 << 10} {
		for _, age := range []string{"young", "old"} {
			b.Run(fmt.Sprintf("full/%dKiB/%s", size>>10, age), func(b *testing.B) {
				var opts []Option
				if age == "old" {
					opts = append(opts, WithClock(func() time.Time { return time.Now().Add(2 * settleTime) }))
				}
				s := MustOpen(b, opts...)
				data := pattern(size, 5)
				if _, err := s.PutBytes(ctx, data, ".txt"); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				b.ResetTimer()
				for b.Loop() {
					res, err := s.PutBytes(ctx, data, ".txt")
					if err != nil || !res.Existed {
						b.Fatal(err, res.Existed)
					}
				}
			})
		}
	}
}

// BenchmarkPutBatch stores 1,000 new 4 KiB blobs per operation.
func BenchmarkPutBatch(b *testing.B) {
	ctx := context.Background()
	for _, d := range []Durability{SyncFull, SyncNone} {
		b.Run(fmt.Sprintf("%s/1000x4KiB", d), func(b *testing.B) {
			s := MustOpen(b, WithDurability(d))
			const n = 1000
			items := make([]Item, n)
			for i := range items {
				items[i] = Item{Data: pattern(4096, 1), Ext: ".txt"}
			}
			b.SetBytes(n * 4096)
			b.ResetTimer()
			for round := 0; b.Loop(); round++ {
				for i := range items {
					uniqueContent(items[i].Data, round*n+i)
				}
				if _, err := s.PutBatch(ctx, items); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "parts/s")
		})
	}
}

// BenchmarkPutBatchBacklog times a durable batch put while the file system
// holds 256 MiB that another writer left unwritten, written afresh before
// each put, untimed: with the file-system barrier (what a batch took
// whatever was unwritten) and with each file's own sync (what it takes
// while the barrier is dear), in turn, for a step's few parts and for a
// bulk load. It reports each one's mean time and their ratio.
func BenchmarkPutBatchBacklog(b *testing.B) {
	if !haveSyncFS {
		b.Skipf("no file-system barrier (syncfs) on %s: nothing to compare the own syncs with", runtime.GOOS)
	}
	ctx := context.Background()
	backlog := make([]byte, 256<<20)
	for i := range backlog {
		backlog[i] = byte(i * 7)
	}
	for _, n := range []int{3, 1000} {
		b.Run(fmt.Sprintf("%dx4KiB", n), func(b *testing.B) {
			// The same store for both: only the answer to "is a barrier
			// cheap" differs.
			s := MustOpen(b)
			var unwritten int64
			s.gauge.unwritten = func() (int64, error) { return unwritten, nil }
			other := b.TempDir()
			items := make([]Item, n)
			for i := range items {
				items[i] = Item{Data: pattern(4096, 1), Ext: ".txt"}
			}
			var took [2]time.Duration
			ops := 0
			for b.Loop() {
				for how := range 2 {
					b.StopTimer()
					// A new file each time: one rewritten in place may be
					// flushed as it is truncated.
					name := filepath.Join(other, fmt.Sprint("backlog-", ops, "-", how))
					if err := os.WriteFile(name, backlog, 0o644); err != nil {
						b.Fatal(err)
					}
					for i := range items {
						uniqueContent(items[i].Data, (2*ops+how)*n+i)
					}
					unwritten = int64(how) << 40
					s.gauge.at = time.Time{}
					b.StartTimer()
					t0 := time.Now()
					if _, err := s.PutBatch(ctx, items); err != nil {
						b.Fatal(err)
					}
					took[how] += time.Since(t0)
					b.StopTimer()
					syncAll()
					os.Remove(name)
					b.StartTimer()
				}
				ops++
			}
			b.ReportMetric(float64(took[0].Microseconds())/1000/float64(ops), "barrier-ms")
			b.ReportMetric(float64(took[1].Microseconds())/1000/float64(ops), "own-syncs-ms")
			b.ReportMetric(float64(took[0])/float64(took[1]), "barrier/own")
		})
	}
}
