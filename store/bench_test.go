package store

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// The hook's overhead: offloading one 16 KiB text result through the hook
// into the CAS store (blob, row, pointer), beside a direct cas put of the
// same bytes, in one run (building the text is in both):
//
//	go test ./store -run '^$' -bench 'Offload|CASPut' -benchtime 1000x

// text16K returns 16 KiB of text that differs for every i: its first 16
// bytes are i in hex (a byte-wise fold of i repeated every 26 values, so
// that most "unique" writes were dedup hits).
func text16K(i int) string {
	return fmt.Sprintf("%016x", i) + strings.Repeat("0123456789abcdef", 1023)
}

func BenchmarkOffload16KiB(b *testing.B) {
	ctx := context.Background()
	for _, d := range []cas.Durability{cas.SyncFull, cas.SyncNone} {
		b.Run(d.String(), func(b *testing.B) {
			s := MustOpen(b, WithDurability(d))
			h, err := hook.New(s, policy.MustStrategies(policy.Default(policy.OverChars(1000))))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(16 << 10)
			i := 0
			for b.Loop() {
				out, err := h.Offload(ctx, hook.Step{Run: "bench", Number: i},
					[]hook.Result{{Tool: "read_file", CallID: fmt.Sprint("c", i), Parts: []hook.Part{hook.Text(text16K(i))}}})
				if err != nil || !hook.IsPointer(out[0]) {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func BenchmarkCASPut16KiB(b *testing.B) {
	ctx := context.Background()
	for _, d := range []cas.Durability{cas.SyncFull, cas.SyncNone} {
		b.Run(d.String(), func(b *testing.B) {
			c, err := cas.Open(ctx, b.TempDir(), cas.WithCreate(), cas.WithDurability(d))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetBytes(16 << 10)
			i := 0
			for b.Loop() {
				if _, err := c.PutBytes(ctx, []byte(text16K(i)), ".txt"); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
