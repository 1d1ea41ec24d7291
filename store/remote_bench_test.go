package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// BenchmarkRemoteWrite measures one-part writes of 16 KiB of unique text to
// a store on S3 and PostgreSQL (versitygw and PostgreSQL on loopback), with
// the blob leases and without them, to show what a lease costs a write.
func BenchmarkRemoteWrite(b *testing.B) {
	e := startRemote(b)
	body := strings.Repeat("x", 16<<10)
	for _, bc := range []struct {
		name string
		opts []Option
	}{{"lease", nil}, {"nolease", []Option{withoutGCLock()}}} {
		b.Run(bc.name, func(b *testing.B) {
			s := mustOpenRemote(b, e, bc.opts...)
			b.SetBytes(int64(len(body)))
			n := 0
			for b.Loop() {
				n++
				if _, err := s.Write(b.Context(), []hook.Item{item(bc.name, n, fmt.Sprint(n, body))}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
