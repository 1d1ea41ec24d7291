package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
)

// TestRepair damages a store on purpose (a flipped byte, a truncated blob, a
// deleted blob shared by two keys), repairs it, and checks that gc runs
// after, the lost keys are gone and named, and that writing a quarantined
// blob's content again heals every key that uses it.
func TestRepair(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	flip := strings.Repeat("flip me ", 100)
	cut := strings.Repeat("truncate me ", 100)
	gone := strings.Repeat("delete me ", 100)
	st := mustWrite(t, s,
		item("r", 1, flip),
		item("r", 2, cut),
		item("r", 3, gone),
		item("q", 3, gone),
		item("r", 5, "fine"),
	)
	damage(t, st[0].Path, func(b []byte) []byte { b[7] ^= 0x20; return b })
	damage(t, st[1].Path, func(b []byte) []byte { return b[:10] })
	os.Chmod(st[2].Path, 0o644)
	if err := os.Remove(st[2].Path); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(ctx, GCOptions{}); !errors.Is(err, ErrMissingBlobs) {
		t.Fatalf("gc on a damaged store: %v, want ErrMissingBlobs", err)
	}

	// A dry run says what would happen and changes nothing.
	dry, err := s.Repair(ctx, RepairOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Lost) != 1 || len(dry.Quarantined) != 2 || !dry.DryRun {
		t.Fatalf("dry run: %+v", dry)
	}
	if _, err := os.Stat(st[0].Path); err != nil {
		t.Fatalf("dry run moved a blob: %v", err)
	}
	if _, err := s.Read(ctx, "", "q/3_t_c.txt"); errors.Is(err, hook.ErrNotFound) {
		t.Fatal("dry run dropped a row")
	}

	res, err := s.Repair(ctx, RepairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Lost) != 1 || !slices.Equal(res.Lost[0].Keys, []string{"r/3_t_c.txt", "q/3_t_c.txt"}) {
		t.Errorf("lost = %+v, want the two keys of the deleted blob", res.Lost)
	}
	if len(res.Quarantined) != 2 {
		t.Fatalf("quarantined = %+v", res.Quarantined)
	}
	for _, q := range res.Quarantined {
		if filepath.Dir(q.To) != filepath.Join(s.Dir(), QuarantineDir) {
			t.Errorf("quarantined to %s", q.To)
		}
		if _, err := os.Lstat(q.To); err != nil {
			t.Error(err)
		}
		if _, err := os.Lstat(q.Path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still in place: %v", q.Path, err)
		}
	}
	for _, key := range []string{"r/3_t_c.txt", "q/3_t_c.txt"} {
		if _, err := s.Read(ctx, "", key); !errors.Is(err, hook.ErrNotFound) {
			t.Errorf("read %s after repair: %v, want not found", key, err)
		}
	}

	v, err := s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK || len(v.Missing) != 0 || len(v.Corrupt) != 0 || len(v.Quarantined) != 2 {
		t.Fatalf("verify after repair: %+v", v)
	}
	if _, err := s.GC(ctx, GCOptions{}); err != nil {
		t.Fatalf("gc after repair: %v", err)
	}
	again, err := s.Repair(ctx, RepairOptions{})
	if err != nil || len(again.Lost)+len(again.Quarantined) != 0 {
		t.Fatalf("second repair: %+v, %v", again, err)
	}

	// The same content, written again under another key, heals the keys
	// whose blob was quarantined.
	if _, err := s.Read(ctx, "", "r/1_t_c.txt"); err == nil {
		t.Fatal("a quarantined part reads")
	}
	mustWrite(t, s, item("heal", 1, flip))
	c, err := s.Read(ctx, "", "r/1_t_c.txt")
	if err != nil || string(c.Data) != flip {
		t.Fatalf("healed part: %v", err)
	}
	// And through the streaming put.
	if _, err := s.Put(ctx, StreamPart{Key: hook.Key{Run: "heal", Step: 2, Tool: "t", Part: -1}}, strings.NewReader(cut)); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Read(ctx, "", "r/2_t_c.txt"); err != nil || string(c.Data) != cut {
		t.Fatalf("healed part: %v", err)
	}
	v, err = s.Verify(ctx, VerifyOptions{})
	if err != nil || !v.OK || len(v.Quarantined) != 0 {
		t.Fatalf("verify after healing: %+v, %v", v, err)
	}
}

// TestWriteReplacesCorruptBlob checks that a write never trusts a file
// already at a blob's name: identical content written over a corrupt file
// replaces it, through the in-memory and the streaming paths.
func TestWriteReplacesCorruptBlob(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	small := strings.Repeat("small ", 100)
	large := bytes.Repeat([]byte("large blob, streamed to a temp file\n"), (3<<20)/36)
	st := mustWrite(t, s, item("r", 1, small))
	big, err := s.Put(ctx, StreamPart{Key: hook.Key{Run: "r", Step: 2, Tool: "t", Part: -1}}, bytes.NewReader(large))
	if err != nil {
		t.Fatal(err)
	}
	damage(t, st[0].Path, func(b []byte) []byte { b[0] ^= 1; return b })
	damage(t, big.Path, func(b []byte) []byte { b[len(b)/2] ^= 1; return b })

	w := mustWrite(t, s, item("r", 3, small))
	if w[0].Dedup {
		t.Error("a write over a corrupt file says dedup")
	}
	p, err := s.Put(ctx, StreamPart{Key: hook.Key{Run: "r", Step: 4, Tool: "t", Part: -1}}, bytes.NewReader(large))
	if err != nil {
		t.Fatal(err)
	}
	if p.Dedup {
		t.Error("a streamed write over a corrupt file says dedup")
	}
	for _, b := range []cas.Blob{{Digest: st[0].Digest, Ext: ".txt"}, {Digest: big.Digest, Ext: ".txt"}} {
		if err := localOf(s).blobs.Verify(ctx, b); err != nil {
			t.Errorf("after rewrite: %v", err)
		}
	}
}

// A shard directory replaced by a link to a copy elsewhere: the store
// reads nothing through the link, so verify calls the shard damaged and
// its blobs missing. Repair reads them through the link, checks them, and
// puts them back in a shard of its own, dropping no row: it never drops
// a row whose bytes it can read and check.
func TestRepairRescuesBlobsBehindALink(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	st := mustWrite(t, s, item("r", 1, "behind the link"), item("r", 2, "elsewhere"))
	shard := filepath.Dir(st[0].Path)
	moved := filepath.Join(t.TempDir(), "moved-shard")
	if err := os.Rename(shard, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, shard); err != nil {
		t.Fatal(err)
	}
	s = MustOpenDir(t, s.Dir())
	v, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || v.OK {
		t.Fatalf("verify with a shard behind a link = %+v, %v", v, err)
	}
	rep, err := s.Repair(ctx, RepairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Lost) != 0 || len(rep.Salvaged) == 0 {
		t.Fatalf("repair: %d lost, %d salvaged; want the blobs behind the link salvaged", len(rep.Lost), len(rep.Salvaged))
	}
	for i, text := range []string{"behind the link", "elsewhere"} {
		got, err := s.Read(ctx, "r", st[i].Key)
		if err != nil || string(got.Data) != text {
			t.Errorf("read %s after repair = %v", st[i].Key, err)
		}
	}
	if fi, err := os.Lstat(shard); err != nil || !fi.IsDir() {
		t.Errorf("the shard after repair: %v, %v; want a directory of its own", fi, err)
	}
	if v, err := s.Verify(ctx, VerifyOptions{}); err != nil || !v.OK {
		t.Fatalf("verify after repair = %+v, %v", v, err)
	}
}
