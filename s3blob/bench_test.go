package s3blob

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/versitygw"
)

// BenchmarkBackends compares the local directory with the object store on
// loopback (versitygw, posix backend): a put of new content, a put that
// finds the content stored, a read from the cache, and a read that fetches.
func BenchmarkBackends(b *testing.B) {
	srv := versitygw.Start(b)
	for _, size := range []int{16 << 10, 1 << 20} {
		backends := []struct {
			name string
			open func(b *testing.B) (cas.Backend, func(cas.Blob))
		}{
			{"local", func(b *testing.B) (cas.Backend, func(cas.Blob)) {
				s, err := cas.Open(b.Context(), b.TempDir(), cas.WithCreate())
				if err != nil {
					b.Fatal(err)
				}
				return s, nil
			}},
			{"s3", func(b *testing.B) (cas.Backend, func(cas.Blob)) {
				be := openOn(b, srv, WithPartSize(DefaultPartSize))
				return be, func(blob cas.Blob) { os.Remove(be.Path(blob)) }
			}},
		}
		for _, bk := range backends {
			name := fmt.Sprintf("%s/%dKiB", bk.name, size>>10)
			data := randomData(uint64(size), size)
			b.Run(name+"/put-new", func(b *testing.B) {
				be, _ := bk.open(b)
				defer be.Close()
				b.SetBytes(int64(size))
				for i := 0; b.Loop(); i++ {
					binary.LittleEndian.PutUint64(data, uint64(i))
					if _, err := be.Put(b.Context(), bytes.NewReader(data), ".bin"); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/put-dedup", func(b *testing.B) {
				be, _ := bk.open(b)
				defer be.Close()
				if _, err := be.Put(b.Context(), bytes.NewReader(data), ".bin"); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				for b.Loop() {
					if res, err := be.Put(b.Context(), bytes.NewReader(data), ".bin"); err != nil || !res.Existed {
						b.Fatal(res, err)
					}
				}
			})
			b.Run(name+"/read", func(b *testing.B) {
				be, _ := bk.open(b)
				defer be.Close()
				res, err := be.Put(b.Context(), bytes.NewReader(data), ".bin")
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				for b.Loop() {
					if _, err := cas.ReadBlob(b.Context(), be, res.Blob); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/read-fetch", func(b *testing.B) {
				be, evict := bk.open(b)
				defer be.Close()
				if evict == nil {
					b.Skip("the local directory has no cache")
				}
				res, err := be.Put(b.Context(), bytes.NewReader(data), ".bin")
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				for b.Loop() {
					evict(res.Blob)
					if _, err := cas.ReadBlob(b.Context(), be, res.Blob); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
