package s3blob

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/versitygw"
)

// A store's records beside its blobs: missing until created, created once
// (a second CreateMeta keeps the first), refused over 64 KiB, and only at
// the store's top level, never under blobs/.
func TestMeta(t *testing.T) {
	ctx := t.Context()
	be := openOn(t, versitygw.Start(t))
	if _, err := be.ReadMeta(ctx, "index.json"); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("ReadMeta of no record = %v, want ErrNotFound", err)
	}
	for i, data := range []string{`{"url": "first"}`, `{"url": "second"}`} {
		wrote, err := be.CreateMeta(ctx, "index.json", []byte(data))
		if err != nil || wrote != (i == 0) {
			t.Errorf("CreateMeta #%d = %v, %v; want wrote %v", i+1, wrote, err, i == 0)
		}
	}
	if b, err := be.ReadMeta(ctx, "index.json"); err != nil || string(b) != `{"url": "first"}` {
		t.Errorf("ReadMeta = %q, %v; want the first record", b, err)
	}
	if _, err := be.CreateMeta(ctx, "big.json", []byte(strings.Repeat("x", maxMeta+1))); err == nil {
		t.Error("CreateMeta of 64 KiB + 1 succeeded")
	}
	for _, name := range []string{"", "blobs", "blobs/3f/x.txt", "a/b", "..", `a\b`} {
		if _, err := be.ReadMeta(ctx, name); err == nil || errors.Is(err, cas.ErrNotFound) {
			t.Errorf("ReadMeta(%q) = %v, want a refusal", name, err)
		}
		if _, err := be.CreateMeta(ctx, name, []byte("x")); err == nil {
			t.Errorf("CreateMeta(%q) succeeded", name)
		}
	}
}
