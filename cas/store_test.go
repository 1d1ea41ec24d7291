package cas

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// MustOpen opens a new store in a temp directory, closed when the test ends.
func MustOpen(tb testing.TB, opts ...Option) *Store {
	tb.Helper()
	s, err := Open(context.Background(), tb.TempDir(), append([]Option{WithCreate()}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, d := range []Durability{SyncFull, SyncNone} {
		t.Run(d.String(), func(t *testing.T) {
			s := MustOpen(t, WithDurability(d))
			for _, size := range []int{0, 1, 4096, memLimit, memLimit + 1, 3*memLimit + 17} {
				data := pattern(size, byte(size))
				res, err := s.Put(ctx, bytes.NewReader(data), ".txt")
				if err != nil {
					t.Fatalf("Put(%d bytes): %v", size, err)
				}
				if res.Existed {
					t.Errorf("Put(%d bytes).Existed = true on first put", size)
				}
				if want := Sum(data); res.Blob.Digest != want {
					t.Errorf("Put(%d bytes).Digest = %v, want %v", size, res.Blob.Digest, want)
				}
				if res.Size != int64(size) {
					t.Errorf("Put(%d bytes).Size = %d", size, res.Size)
				}
				got, err := s.ReadAll(ctx, res.Blob)
				if err != nil {
					t.Fatalf("ReadAll: %v", err)
				}
				if !bytes.Equal(got, data) {
					t.Errorf("ReadAll(%d bytes) returned %d different bytes", size, len(got))
				}
				fi, err := os.Stat(s.Path(res.Blob))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() != int64(size) {
					t.Errorf("file size = %d, want %d", fi.Size(), size)
				}
				if want := filepath.Join(s.Dir(), "blobs", res.Blob.Digest.Hex()[:2], res.Blob.Digest.Hex()+".txt"); s.Path(res.Blob) != want {
					t.Errorf("Path = %s, want %s", s.Path(res.Blob), want)
				}
			}
			assertNoTemps(t, s)
		})
	}
}

func TestPutTwiceStoresOnce(t *testing.T) {
	ctx := context.Background()
	now := time.Now().Add(-time.Hour)
	s := MustOpen(t, WithClock(func() time.Time { return now }))
	for _, size := range []int{100, 2 * memLimit} {
		data := pattern(size, 7)
		first, err := s.Put(ctx, bytes.NewReader(data), ".txt")
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(10 * time.Minute)
		second, err := s.Put(ctx, bytes.NewReader(data), ".txt")
		if err != nil {
			t.Fatal(err)
		}
		if first.Existed || !second.Existed {
			t.Errorf("size %d: Existed = %v then %v, want false then true", size, first.Existed, second.Existed)
		}
		if first.Blob != second.Blob {
			t.Errorf("size %d: blobs differ: %v, %v", size, first.Blob, second.Blob)
		}
		fi, err := os.Stat(s.Path(second.Blob))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(now) {
			t.Errorf("size %d: mtime after dedup hit = %v, want refreshed to %v", size, fi.ModTime(), now)
		}
	}
	// Same bytes, another type: another file.
	other, err := s.PutBytes(ctx, pattern(100, 7), ".json")
	if err != nil {
		t.Fatal(err)
	}
	if other.Existed {
		t.Error("same bytes with another extension reported Existed")
	}
	n := countBlobs(t, s)
	if n != 3 {
		t.Errorf("store holds %d blobs, want 3", n)
	}
	assertNoTemps(t, s)
}

func TestPutReplacesDamagedFile(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		size   int
		damage func([]byte) []byte
	}{
		{"truncated", 5000, func(b []byte) []byte { return b[:len(b)/2] }},
		{"empty", 5000, func(b []byte) []byte { return nil }},
		{"flipped", 5000, func(b []byte) []byte { c := bytes.Clone(b); c[10] ^= 1; return c }},
		{"truncated stream", 2*memLimit + 5, func(b []byte) []byte { return b[:memLimit] }},
		{"flipped stream", 2*memLimit + 5, func(b []byte) []byte { c := bytes.Clone(b); c[len(c)-1] ^= 0x80; return c }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := MustOpen(t)
			data := pattern(tc.size, 3)
			b := Blob{Digest: Sum(data), Ext: ".txt"}
			if err := os.WriteFile(s.Path(b), tc.damage(data), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := s.Put(ctx, bytes.NewReader(data), ".txt")
			if err != nil {
				t.Fatal(err)
			}
			if res.Existed {
				t.Error("Put over a damaged file reported Existed")
			}
			got, err := s.ReadAll(ctx, b)
			if err != nil {
				t.Fatalf("ReadAll after repair: %v", err)
			}
			if !bytes.Equal(got, data) {
				t.Error("ReadAll after repair returned wrong bytes")
			}
			assertNoTemps(t, s)
		})
	}
}

func TestCorruptBlobs(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	put := func(seed byte) Blob {
		res, err := s.PutBytes(ctx, pattern(3000, seed), ".txt")
		if err != nil {
			t.Fatal(err)
		}
		return res.Blob
	}
	flipped, truncated, good := put(1), put(2), put(3)
	rewrite(t, s.Path(flipped), func(b []byte) []byte { b[100] ^= 0x01; return b })
	rewrite(t, s.Path(truncated), func(b []byte) []byte { return b[:1000] })
	// A valid blob copied under another blob's name.
	misnamed := Blob{Digest: Sum([]byte("something else")), Ext: ".txt"}
	src, _ := os.ReadFile(s.Path(good))
	if err := os.WriteFile(s.Path(misnamed), src, 0o444); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		blob Blob
	}{{"flipped byte", flipped}, {"truncated", truncated}, {"misnamed", misnamed}} {
		err := s.Verify(ctx, tc.blob)
		var ce *CorruptError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
			t.Errorf("%s: Verify = %v, want a CorruptError", tc.name, err)
		}
		if got, err := s.ReadAll(ctx, tc.blob); err == nil || got != nil {
			t.Errorf("%s: ReadAll = %d bytes, %v; want no bytes and an error", tc.name, len(got), err)
		} else if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: ReadAll error = %v, want ErrCorrupt", tc.name, err)
		}
		r, err := s.Open(ctx, tc.blob)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(r); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: streaming read error = %v, want ErrCorrupt at the end", tc.name, err)
		}
		r.Close()
	}
	if ce := new(CorruptError); errors.As(s.Verify(ctx, misnamed), &ce) && ce.Got != good.Digest {
		t.Errorf("misnamed blob: Got = %v, want %v", ce.Got, good.Digest)
	}
	if err := s.Verify(ctx, good); err != nil {
		t.Errorf("Verify(good) = %v", err)
	}
	missing := Blob{Digest: Sum([]byte("never stored")), Ext: ".txt"}
	if err := s.Verify(ctx, missing); !errors.Is(err, ErrNotFound) {
		t.Errorf("Verify(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.ReadAll(ctx, missing); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReadAll(missing) = %v, want ErrNotFound", err)
	}
}

func TestNonRegularBlobRefused(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret"), 0o644)
	link := Blob{Digest: Sum([]byte("secret")), Ext: ".txt"}
	if err := os.Symlink(outside, s.Path(link)); err != nil {
		t.Fatal(err)
	}
	dir := Blob{Digest: Sum([]byte("dir")), Ext: ".txt"}
	if err := os.Mkdir(s.Path(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []Blob{link, dir} {
		if got, err := s.ReadAll(ctx, b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ReadAll(%s) = %q, %v; want ErrCorrupt", b, got, err)
		}
		if err := s.Verify(ctx, b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Verify(%s) = %v, want ErrCorrupt", b, err)
		}
	}
	// A put of the symlinked content replaces the link with a real blob.
	if _, err := s.PutBytes(ctx, []byte("secret"), ".txt"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(s.Path(link))
	if err != nil || !fi.Mode().IsRegular() {
		t.Errorf("after put, %s is %v, %v; want a regular file", link, fi.Mode(), err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret" {
		t.Errorf("file outside the store changed to %q", b)
	}
	// A put onto a directory fails with an error naming it, and leaves no temp.
	if _, err := s.PutBytes(ctx, []byte("dir"), ".txt"); err == nil || !strings.Contains(err.Error(), dir.FileName()) {
		t.Errorf("put onto a directory: %v, want an error naming %s", err, dir.FileName())
	}
	assertNoTemps(t, s)
}

func TestWalk(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	var want []Blob
	for i := range 20 {
		res, err := s.PutBytes(ctx, pattern(100, byte(i)), ".txt")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res.Blob)
	}
	b0 := want[0]
	os.WriteFile(filepath.Join(s.Dir(), "blobs", b0.Shard(), ".tmp-123"), []byte("partial"), 0o644)
	os.WriteFile(filepath.Join(s.Dir(), "blobs", ".tmp-456"), []byte("partial"), 0o644)
	os.WriteFile(filepath.Join(s.Dir(), "blobs", b0.Shard(), "notes.txt"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(s.Dir(), "blobs", "README"), []byte("x"), 0o644)
	// A valid blob name in the wrong shard.
	wrongShard := "00"
	if b0.Shard() == "00" {
		wrongShard = "01"
	}
	os.WriteFile(filepath.Join(s.Dir(), "blobs", wrongShard, b0.FileName()), pattern(100, 0), 0o644)

	got := map[Blob]bool{}
	var temps, strays []string
	err := s.Walk(ctx, func(e Entry) error {
		switch e.Kind {
		case EntryBlob:
			got[e.Blob] = true
			if e.Size != 100 {
				t.Errorf("blob %s size %d, want 100", e.Blob, e.Size)
			}
		case EntryTemp:
			temps = append(temps, e.RelPath)
		case EntryStray:
			strays = append(strays, e.RelPath+": "+e.Problem)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("walk found %d blobs, want %d", len(got), len(want))
	}
	for _, b := range want {
		if !got[b] {
			t.Errorf("walk missed %s", b)
		}
	}
	if len(temps) != 2 {
		t.Errorf("temps = %q, want the two temp files", temps)
	}
	if len(strays) != 3 {
		t.Errorf("strays = %q, want notes.txt, README and the misplaced blob", strays)
	}
	for _, tmp := range temps {
		if err := s.RemoveTemp(ctx, tmp); err != nil {
			t.Error(err)
		}
	}
	if err := s.RemoveTemp(ctx, "blobs/"+b0.Shard()+"/"+b0.FileName()); err == nil {
		t.Error("RemoveTemp accepted a blob's name")
	}
	if err := s.RemoveTemp(ctx, "index.db"); err == nil {
		t.Error("RemoveTemp accepted index.db")
	}
	assertNoTemps(t, s)
}

func TestWalkFailsClosed(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	s.PutBytes(ctx, []byte("x"), ".txt")
	broken := errors.New("injected listing failure")
	s.fs = &faultFS{fileSystem: s.fs, readDirErr: broken, readDirName: "blobs/" + Sum([]byte("x")).Hex()[:2]}
	n := 0
	err := s.Walk(ctx, func(Entry) error { n++; return nil })
	if !errors.Is(err, broken) {
		t.Errorf("Walk = %v, want the listing error", err)
	}
}

func TestLocateAndRemove(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	data := []byte("same bytes")
	s.PutBytes(ctx, data, ".txt")
	s.PutBytes(ctx, data, ".md")
	blobs, err := s.locate(ctx, Sum(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(blobs) != 2 {
		t.Fatalf("locate = %v, want two blobs", blobs)
	}
	for _, b := range blobs {
		if err := s.Remove(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Remove(ctx, blobs[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Remove = %v, want ErrNotFound", err)
	}
	if blobs, _ := s.locate(ctx, Sum(data)); len(blobs) != 0 {
		t.Errorf("locate after remove = %v", blobs)
	}
}

// TestDiscard: a blob set aside is gone from its name at once, stays on
// disk under a temp name (a stray until unlinked) and goes with
// RemoveDiscarded, which unlinks nothing else; a put of the same content
// after it writes the blob again.
func TestDiscard(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	data := []byte("bytes gc sets aside")
	r, err := s.PutBytes(ctx, data, ".txt")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := s.Discard(ctx, r.Blob)
	if err != nil {
		t.Fatal(err)
	}
	if !isTempPath(rel) || filepath.Dir(filepath.FromSlash(rel)) != filepath.Dir(filepath.FromSlash(r.Blob.RelPath())) {
		t.Errorf("Discard = %q, want a temp name in the blob's shard", rel)
	}
	if _, err := s.Stat(ctx, r.Blob); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat after Discard = %v, want ErrNotFound", err)
	}
	if _, err := s.Discard(ctx, r.Blob); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Discard = %v, want ErrNotFound", err)
	}
	var temps []string
	if err := s.Walk(ctx, func(e Entry) error {
		if e.Kind == EntryTemp {
			temps = append(temps, e.RelPath)
		} else {
			t.Errorf("Walk lists %s (kind %v) after Discard", e.RelPath, e.Kind)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(temps) != 1 || temps[0] != rel {
		t.Errorf("Walk's temp files = %q, want [%q]", temps, rel)
	}
	if !s.TempStray(rel) {
		t.Errorf("TempStray(%s) = false for a discarded file nobody holds", rel)
	}
	for _, bad := range []string{r.Blob.RelPath(), BlobsDir + "/" + r.Blob.Shard() + "/.tmp-other", "../" + rel} {
		if err := s.RemoveDiscarded(bad); err == nil {
			t.Errorf("RemoveDiscarded(%q) = nil, want an error", bad)
		}
	}
	if err := s.RemoveDiscarded(rel); err != nil {
		t.Fatal(err)
	}
	if s.TempStray(rel) {
		t.Errorf("TempStray(%s) = true for a file gone", rel)
	}
	if err := s.RemoveDiscarded(rel); err != nil {
		t.Errorf("RemoveDiscarded of a file gone = %v, want nil", err)
	}
	again, err := s.PutBytes(ctx, data, ".txt")
	if err != nil {
		t.Fatal(err)
	}
	if again.Existed {
		t.Error("a put after Discard found the blob still there")
	}
	if got, err := s.ReadAll(ctx, again.Blob); err != nil || string(got) != string(data) {
		t.Errorf("ReadAll after a put again = %q, %v", got, err)
	}
}

func TestOpenStoreChecks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := Open(ctx, dir); !errors.Is(err, ErrNoStore) {
		t.Errorf("Open(empty dir) = %v, want ErrNoStore", err)
	}
	if _, err := Open(ctx, filepath.Join(dir, "missing")); !errors.Is(err, ErrNoStore) {
		t.Errorf("Open(missing dir) = %v, want ErrNoStore", err)
	}
	s, err := Open(ctx, dir, WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !Exists(dir) {
		t.Error("Exists = false after create")
	}
	for i := range 256 {
		if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(shardName(i)))); err != nil || !fi.IsDir() {
			t.Fatalf("shard %s missing: %v", shardName(i), err)
		}
	}
	s, err = Open(ctx, dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	s.Close()
	os.WriteFile(filepath.Join(dir, MarkerFile), []byte(`{"format": 9, "hash": "blake3", "shard_width": 2}`), 0o644)
	_, err = Open(ctx, dir)
	if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "format 9") || !strings.Contains(err.Error(), "up to 1") {
		t.Errorf("Open(newer) = %v, want ErrNewerFormat naming both formats", err)
	}
	os.WriteFile(filepath.Join(dir, MarkerFile), []byte(`{"format": 1, "hash": "sha1", "shard_width": 2}`), 0o644)
	if _, err := Open(ctx, dir); err == nil || !strings.Contains(err.Error(), "sha1") {
		t.Errorf("Open(sha1 store) = %v, want an error naming the hash", err)
	}
	if _, err := Open(ctx, dir, WithDurability(Durability(7))); err == nil {
		t.Error("Open accepted durability 7")
	}
}

func TestShardRemovedAfterOpen(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	data := []byte("shard gone")
	b := Blob{Digest: Sum(data), Ext: ".txt"}
	if err := os.Remove(filepath.Join(s.Dir(), "blobs", b.Shard())); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBytes(ctx, data, ".txt"); err != nil {
		t.Fatalf("put after shard removal: %v", err)
	}
	if _, err := s.ReadAll(ctx, b); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidExtRefused(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	for _, ext := range []string{"", ".", "txt", "../x", "./../../etc", ".a/b", ".tx t", ".12345678901234567", ".é", ".a.b", ".\x00", "/x"} {
		if _, err := s.PutBytes(ctx, []byte("x"), ext); !errors.Is(err, ErrInvalidExt) {
			t.Errorf("PutBytes(ext %q) = %v, want ErrInvalidExt", ext, err)
		}
		if _, err := s.Put(ctx, strings.NewReader("x"), ext); !errors.Is(err, ErrInvalidExt) {
			t.Errorf("Put(ext %q) = %v, want ErrInvalidExt", ext, err)
		}
		if _, err := s.PutBatch(ctx, []Item{{Data: []byte("x"), Ext: ext}}); !errors.Is(err, ErrInvalidExt) {
			t.Errorf("PutBatch(ext %q) = %v, want ErrInvalidExt", ext, err)
		}
		if _, err := s.ReadAll(ctx, Blob{Digest: Sum([]byte("x")), Ext: ext}); err == nil {
			t.Errorf("ReadAll(ext %q) succeeded", ext)
		}
	}
	if n := countBlobs(t, s); n != 0 {
		t.Errorf("%d blobs written with invalid extensions", n)
	}
}

func TestContextCanceled(t *testing.T) {
	s := MustOpen(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.PutBytes(ctx, []byte("x"), ".txt"); !errors.Is(err, context.Canceled) {
		t.Errorf("PutBytes(canceled) = %v", err)
	}
	if _, err := s.Put(ctx, strings.NewReader("x"), ".txt"); !errors.Is(err, context.Canceled) {
		t.Errorf("Put(canceled) = %v", err)
	}
	if n := countBlobs(t, s); n != 0 {
		t.Errorf("%d blobs written after cancel", n)
	}
}

// pattern returns n deterministic bytes that differ by seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func rewrite(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, f(b), 0o444); err != nil {
		t.Fatal(err)
	}
}

func countBlobs(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	if err := s.Walk(context.Background(), func(e Entry) error {
		if e.Kind == EntryBlob {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func assertNoTemps(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Walk(context.Background(), func(e Entry) error {
		if e.Kind == EntryTemp {
			t.Errorf("temp file left behind: %s", e.RelPath)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// putBytesNameUnsynced leaves the shard directory's sync to the caller: the
// blob reads back at once, one sync (the file) is issued before it
// returns and one (the directory) by syncName; a dedup hit syncs nothing.
func TestPutBytesNameUnsynced(t *testing.T) {
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	s := MustOpen(t, WithClock(func() time.Time { return time.Unix(0, clock.Load()) }))
	data := []byte("a blob whose name is synced later")
	before := s.Syncs()
	res, syncName, err := s.putBytesNameUnsynced(ctx, data, ".txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Syncs() - before; got != 1 || syncName == nil {
		t.Fatalf("%d syncs before syncName (want 1), syncName %v", got, syncName != nil)
	}
	if got, err := s.ReadAll(ctx, res.Blob); err != nil || string(got) != string(data) {
		t.Fatalf("read back %q, %v", got, err)
	}
	if err := syncName(); err != nil {
		t.Fatal(err)
	}
	if got := s.Syncs() - before; got != 2 {
		t.Errorf("%d syncs after syncName, want 2", got)
	}
	// A hit on a young blob syncs it and its shard itself, unless this
	// store synced that very file: another writer may not have synced the
	// name yet.
	_, told := identify(mustOpenFile(t, s.Path(res.Blob)))
	hit := func(s *Store, data []byte, want int64, what string) {
		t.Helper()
		before := s.Syncs()
		res, syncName, err := s.putBytesNameUnsynced(ctx, data, ".txt")
		if !told {
			want = 2
		}
		if err != nil || !res.Existed || syncName != nil || s.Syncs()-before != want {
			t.Errorf("%s: existed %v, syncName %v, %d syncs (want %d), %v", what, res.Existed, syncName != nil, s.Syncs()-before, want, err)
		}
	}
	hit(s, data, 0, "dedup hit on a young blob this store synced")
	other, err := Open(ctx, s.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	hit(other, data, 2, "dedup hit on a young blob another store wrote")
	hit(other, data, 0, "the same hit again")
	// A blob whose name this store has not synced yet, or whose file was
	// replaced since, is synced by the hit.
	unsynced := []byte("a blob whose name is not synced yet")
	if _, syncName, err := s.putBytesNameUnsynced(ctx, unsynced, ".txt"); err != nil || syncName == nil {
		t.Fatal(err)
	}
	hit(s, unsynced, 2, "dedup hit on a young blob whose name this store did not sync")
	p := s.Path(res.Blob)
	if err := os.WriteFile(p+".new", data, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
	hit(s, data, 2, "dedup hit on a blob file replaced since this store synced it")
	// Past the settle time a hit syncs nothing, where the file system
	// tells when the file was born.
	if told {
		clock.Add(int64(2 * settleTime))
		before = s.Syncs()
		res2, syncName, err := s.putBytesNameUnsynced(ctx, data, ".txt")
		if err != nil || !res2.Existed || syncName != nil || s.Syncs() != before {
			t.Errorf("dedup hit on an old blob: existed %v, syncName %v, %d syncs (want 0), %v", res2.Existed, syncName != nil, s.Syncs()-before, err)
		}
	} else {
		t.Log("this file system records no birth time: every durable hit syncs, the old-blob case is not checked")
	}
	if _, _, err := s.putBytesNameUnsynced(ctx, data, "../x"); err == nil {
		t.Error("a bad extension was accepted")
	}
}

func mustOpenFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestWalkNames: WalkNames gives what Walk gives, blob files Lazy and
// without their size and time, which Info reads as Walk does; a blob file
// removed since the listing comes back from Info vanished, and a directory
// with a blob's name is a stray, not a lazy blob.
func TestWalkNames(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	var blobs []Blob
	for i := range 20 {
		res, err := s.PutBytes(ctx, pattern(100+i, byte(i)), ".txt")
		if err != nil {
			t.Fatal(err)
		}
		blobs = append(blobs, res.Blob)
	}
	b0 := blobs[0]
	os.WriteFile(filepath.Join(s.Dir(), "blobs", b0.Shard(), ".tmp-123"), []byte("partial"), 0o644)
	os.WriteFile(filepath.Join(s.Dir(), "blobs", b0.Shard(), "notes.txt"), []byte("x"), 0o644)
	wrongShard := "00"
	if b0.Shard() == "00" {
		wrongShard = "01"
	}
	os.WriteFile(filepath.Join(s.Dir(), "blobs", wrongShard, b0.FileName()), pattern(7, 0), 0o644)
	dirBlob := Blob{Digest: Sum([]byte("a directory")), Ext: ".txt"}
	os.Mkdir(filepath.Join(s.Dir(), filepath.FromSlash(dirBlob.RelPath())), 0o755)
	collect := func(walk func(context.Context, func(Entry) error) error) map[string]Entry {
		out := map[string]Entry{}
		if err := walk(ctx, func(e Entry) error { out[e.RelPath] = e; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	eager, lazy := collect(s.Walk), collect(s.WalkNames)
	if len(lazy) != len(eager) {
		t.Fatalf("WalkNames gave %d entries, Walk %d", len(lazy), len(eager))
	}
	for rel, want := range eager {
		got := lazy[rel]
		if got.Lazy != (want.Kind == EntryBlob) {
			t.Errorf("%s (%s): Lazy %v", rel, want.Kind, got.Lazy)
		}
		if got.Lazy && (got.Size != 0 || !got.ModTime.IsZero()) {
			t.Errorf("%s: lazy entry with size %d and time %v", rel, got.Size, got.ModTime)
		}
		full, err := s.Info(got)
		if err != nil {
			t.Fatal(err)
		}
		if full.Kind != want.Kind || full.Blob != want.Blob || full.Size != want.Size || !full.ModTime.Equal(want.ModTime) ||
			full.Problem != want.Problem || full.Lazy {
			t.Errorf("%s: Info(WalkNames) = %+v, Walk = %+v", rel, full, want)
		}
	}
	if e := lazy[dirBlob.RelPath()]; e.Kind != EntryStray || e.Lazy {
		t.Errorf("a directory with a blob's name: %+v, want a stray", e)
	}
	gone := lazy[blobs[1].RelPath()]
	if err := os.Remove(filepath.Join(s.Dir(), filepath.FromSlash(gone.RelPath))); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Info(gone); err != nil || !e.Vanished || e.Kind != EntryStray {
		t.Errorf("Info of a blob removed since the listing = %+v, %v; want a vanished stray", e, err)
	}
}
