package cas

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
)

// Without syncs, a new blob is written under its own name; a torn one (a
// crash mid-write) fails its digest and is replaced by the next put of the
// same content; a blob being written is told from a torn one.
func TestPutInPlace(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t, WithDurability(SyncNone))
	data := bytes.Repeat([]byte("in place "), 1000)
	b := Blob{Digest: Sum(data), Ext: ".txt"}
	path := s.Path(b)

	// A torn blob, as a crash mid-write leaves it.
	if err := os.MkdirAll(s.abs(BlobsDir+"/"+b.Shard()), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:100], 0o444); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(ctx, b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify of a torn blob = %v, want ErrCorrupt", err)
	}
	if s.BeingWritten(b) {
		t.Error("BeingWritten = true for a torn blob nobody writes")
	}
	res, err := s.PutBytes(ctx, data, ".txt")
	if err != nil {
		t.Fatal(err)
	}
	if res.Existed {
		t.Error("a put over a torn blob says it existed")
	}
	if err := s.Verify(ctx, b); err != nil {
		t.Fatalf("after the put, Verify = %v", err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("blob holds %d bytes (%v), want the content", len(got), err)
	}
	// The same content again: a hit, nothing written.
	if res, err = s.PutBytes(ctx, data, ".txt"); err != nil || !res.Existed {
		t.Fatalf("second put: existed %v, err %v", res.Existed, err)
	}

	// A new blob: in place, no temp file left anywhere.
	other := []byte("another blob")
	res, err = s.PutBytes(ctx, other, ".txt")
	if err != nil || res.Existed {
		t.Fatalf("new blob: existed %v, err %v", res.Existed, err)
	}
	des, err := os.ReadDir(s.abs(BlobsDir + "/" + res.Blob.Shard()))
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if de.Name() != res.Blob.FileName() && de.Name() != b.FileName() {
			t.Errorf("shard holds %s besides the blobs", de.Name())
		}
	}

	// A file at a blob's name that a writer holds locked is being written.
	f, err := os.Open(s.Path(res.Blob))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := LockTempFile(f); err != nil {
		t.Fatal(err)
	}
	if !s.BeingWritten(res.Blob) {
		t.Error("BeingWritten = false for a blob whose writer holds its lock")
	}
	f.Close()
	if s.BeingWritten(res.Blob) {
		t.Error("BeingWritten = true once its writer closed it")
	}
}

// A full disk during a put in place leaves no file under the blob's name,
// and the same put works once there is space.
func TestPutInPlaceDiskFull(t *testing.T) {
	ctx := context.Background()
	var ff *faultFS
	s := MustOpen(t, WithDurability(SyncNone), withFileSystem(func(inner fileSystem) fileSystem {
		ff = &faultFS{fileSystem: inner}
		return ff
	}))
	ff.failAfter = 10000
	data := pattern(20000, 1)
	if _, err := s.PutBytes(ctx, data, ".txt"); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("put on a full disk = %v, want ErrDiskFull", err)
	}
	if n := countBlobs(t, s); n != 0 {
		t.Errorf("%d blobs after a failed put", n)
	}
	assertNoTemps(t, s)
	ff.failAfter = 0
	res, err := s.PutBytes(ctx, data, ".txt")
	if err != nil || res.Existed {
		t.Fatalf("put once there is space: existed %v, %v", res.Existed, err)
	}
	if err := s.Verify(ctx, res.Blob); err != nil {
		t.Fatal(err)
	}
}
