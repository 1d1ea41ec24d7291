package cas

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// writebackFS makes the files created while failing is set lose their
// bytes on the way to the disk: their sync, and a check of their
// write-back, fail with EIO, as after a write-back error. Its SyncFS is
// the real one, which succeeds: the barrier of a file system whose error
// another opener was told of, or of a kernel before 5.8.
type writebackFS struct {
	fileSystem
	mu      sync.Mutex
	failing bool
	checks  int
}

type writebackFile struct {
	file
	fs  *writebackFS
	bad bool
}

func (w *writebackFS) fail(on bool) {
	w.mu.Lock()
	w.failing = on
	w.mu.Unlock()
}

func (w *writebackFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	f, err := w.fileSystem.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return &writebackFile{file: f, fs: w, bad: w.failing && flag&os.O_CREATE != 0}, nil
}

func (f *writebackFile) Sync() error {
	if f.bad {
		return &fs.PathError{Op: "sync", Path: f.Name(), Err: syscall.EIO}
	}
	return f.file.Sync()
}

func (f *writebackFile) writebackErr() error {
	f.fs.mu.Lock()
	f.fs.checks++
	f.fs.mu.Unlock()
	if f.bad {
		return &fs.PathError{Op: "sync_file_range", Path: f.Name(), Err: syscall.EIO}
	}
	return writebackErr(f.file)
}

func openWriteback(t *testing.T) (*Store, *writebackFS) {
	t.Helper()
	var wb *writebackFS
	s := MustOpen(t, WithTempPool(0), withFileSystem(func(inner fileSystem) fileSystem {
		wb = &writebackFS{fileSystem: inner}
		return wb
	}))
	// The barrier is always cheap: the batch takes it.
	s.gauge.unwritten = func() (int64, error) { return 0, nil }
	return s, wb
}

// assertGone fails unless b's name holds no file.
func assertGone(t *testing.T, s *Store, b Blob) {
	t.Helper()
	if _, err := os.Lstat(s.Path(b)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the damaged blob %s is still there (%v)", b.FileName(), err)
	}
}

// A blob named without a sync whose bytes did not reach the disk fails
// the barrier that the file system itself passed, and every barrier after
// it until its writer has said it learnt so: whichever barrier the writer
// waits for, it hears. The damaged file is gone at once, the other blob
// of the barrier stays, and the same bytes put again are written afresh.
func TestBarrierChecksWriteback(t *testing.T) {
	ctx := context.Background()
	s, wb := openWriteback(t)
	if !s.CanBarrier() {
		t.Skip("no file-system barrier here")
	}
	data, other := pattern(16<<10, 61), pattern(16<<10, 62)
	wb.fail(true)
	p, err := s.WriteHashed(ctx, Hash(data, ".txt"))
	wb.fail(false)
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.WriteHashed(ctx, Hash(other, ".txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Pending{p, q} {
		if err := x.CommitUnsynced(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Barrier(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Barrier with a blob's write-back failed = %v, want EIO", err)
	}
	assertGone(t, s, p.Result().Blob)
	if err := s.Verify(ctx, q.Result().Blob); err != nil {
		t.Errorf("the healthy blob of the barrier: %v", err)
	}
	if err := s.Barrier(); !errors.Is(err, syscall.EIO) {
		t.Errorf("the next barrier, the writer not yet told = %v, want EIO", err)
	}
	if err := s.Expire(p.Result().Blob); err != nil {
		t.Fatal(err)
	}
	q.NameSynced()
	if err := s.Barrier(); err != nil {
		t.Errorf("a barrier once the writer learnt: %v", err)
	}
	res, err := s.PutBytes(ctx, data, ".txt")
	if err != nil || res.Existed {
		t.Fatalf("the same bytes again = %+v, %v; want written afresh", res, err)
	}
	if got, err := s.ReadAll(ctx, res.Blob); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read back %d bytes, %v", len(got), err)
	}
	if n := countBlobs(t, s); n != 2 {
		t.Errorf("%d blobs, want 2", n)
	}
	assertNoTemps(t, s)
}

// A file renamed over the damaged one since (another writer's, whole) is
// not the one whose write-back failed, and stays.
func TestBarrierKeepsFileRenamedOver(t *testing.T) {
	ctx := context.Background()
	s, wb := openWriteback(t)
	if !s.CanBarrier() {
		t.Skip("no file-system barrier here")
	}
	data := pattern(8<<10, 63)
	wb.fail(true)
	p, err := s.WriteHashed(ctx, Hash(data, ".txt"))
	wb.fail(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CommitUnsynced(); err != nil {
		t.Fatal(err)
	}
	b := p.Result().Blob
	tmp := filepath.Join(filepath.Dir(s.Path(b)), tempPrefix+"other")
	if err := os.WriteFile(tmp, data, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.Path(b)); err != nil {
		t.Fatal(err)
	}
	if err := s.Barrier(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Barrier = %v, want EIO", err)
	}
	if err := s.Verify(ctx, b); err != nil {
		t.Errorf("the file renamed over the damaged one: %v", err)
	}
	s.Expire(b)
}

// A batch whose barrier passed, one of whose files lost its bytes on the
// way to the disk, fails: nothing is named, no temp file stays, and the
// batch then goes through.
func TestBatchBarrierChecksWriteback(t *testing.T) {
	ctx := context.Background()
	s, wb := openWriteback(t)
	if !haveSyncFS {
		t.Skip("no file-system barrier here")
	}
	items := make([]Item, 20)
	for i := range items {
		items[i] = Item{Data: pattern(4096, byte(100+i)), Ext: ".txt"}
	}
	wb.fail(true)
	_, err := s.PutBatch(ctx, items)
	wb.fail(false)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("PutBatch with its files' write-back failed = %v, want EIO", err)
	}
	if n := countBlobs(t, s); n != 0 {
		t.Errorf("%d blobs after the failed batch", n)
	}
	assertNoTemps(t, s)
	wb.mu.Lock()
	wb.checks = 0
	wb.mu.Unlock()
	res, err := s.PutBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	if wb.checks != len(items) {
		t.Errorf("%d files checked after the barrier, want %d", wb.checks, len(items))
	}
	for i, it := range items {
		if got, err := s.ReadAll(ctx, res[i].Blob); err != nil || !bytes.Equal(got, it.Data) {
			t.Fatalf("item %d reads back %d bytes, %v", i, len(got), err)
		}
	}
}

// A blob named before its sync (CommitThenSync) whose sync fails is
// removed by that write: the name does not keep bytes that may be lost on
// disk while the page cache serves them whole, and the same put again
// writes them afresh rather than finding them stored.
func TestCommitThenSyncFailureRemovesBlob(t *testing.T) {
	ctx := context.Background()
	s, wb := openWriteback(t)
	data := pattern(16<<10, 64)
	wb.fail(true)
	p, err := s.WriteHashed(ctx, Hash(data, ".txt"))
	wb.fail(false)
	if err != nil {
		t.Fatal(err)
	}
	sync, err := p.CommitThenSync()
	if err != nil {
		t.Fatal(err)
	}
	if err := sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync = %v, want EIO", err)
	}
	assertGone(t, s, p.Result().Blob)
	res, err := s.PutBytes(ctx, data, ".txt")
	if err != nil || res.Existed {
		t.Fatalf("the same bytes again = %+v, %v; want written afresh", res, err)
	}
	if err := s.Verify(ctx, res.Blob); err != nil {
		t.Error(err)
	}
	assertNoTemps(t, s)
}

// A put whose sync fails before the rename (Put, PutBytes, a stream) never
// names its blob, leaves no temp file, and goes through when tried again.
func TestPutSyncFailureLeavesNothing(t *testing.T) {
	ctx := context.Background()
	s, wb := openWriteback(t)
	for _, size := range []int{16 << 10, 3 * memLimit} {
		data := pattern(size, 65)
		wb.fail(true)
		_, err := s.Put(ctx, bytes.NewReader(data), ".txt")
		wb.fail(false)
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("%d bytes: Put with a failing sync = %v, want EIO", size, err)
		}
		if n := countBlobs(t, s); n != 0 {
			t.Errorf("%d bytes: %d blobs after a failed sync", size, n)
		}
		assertNoTemps(t, s)
		res, err := s.Put(ctx, bytes.NewReader(data), ".txt")
		if err != nil || res.Existed {
			t.Fatalf("%d bytes again = %+v, %v", size, res, err)
		}
		if err := s.Verify(ctx, res.Blob); err != nil {
			t.Error(err)
		}
		if err := s.Remove(ctx, res.Blob); err != nil {
			t.Fatal(err)
		}
	}
}

// The check of a healthy file through its own descriptor passes.
func TestWritebackErrHealthy(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(pattern(8192, 1)); err != nil {
		t.Fatal(err)
	}
	if err := writebackErr(f); err != nil {
		t.Errorf("writebackErr of a healthy file = %v", err)
	}
}

// BenchmarkCheckAfterBarrier times what a batch of 1,000 new 4 KiB files
// pays, after the barrier that wrote them, to learn of write-back errors
// the barrier may not report: a check of each file through its own
// descriptor (writebackErr, what PutBatch and Barrier do), or an
// fdatasync of each, beside the barrier itself. ns/op is the whole
// batch's; the metrics are each step's mean.
//
//	go test ./cas -run '^$' -bench CheckAfterBarrier -benchtime 20x
func BenchmarkCheckAfterBarrier(b *testing.B) {
	if !haveSyncFS {
		b.Skip("no file-system barrier here")
	}
	s := MustOpen(b)
	data := pattern(4096, 1)
	var barrier, check, fdatasync float64
	round := 0
	for b.Loop() {
		b.StopTimer()
		files := make([]*os.File, 1000)
		for i := range files {
			f, err := os.Create(filepath.Join(s.Dir(), BlobsDir, shardName(i % 256)[len(BlobsDir)+1:], tempPrefix+randomSuffix()))
			if err != nil {
				b.Fatal(err)
			}
			uniqueContent(data, round*len(files)+i)
			if _, err := f.Write(data); err != nil {
				b.Fatal(err)
			}
			files[i] = f
		}
		round++
		b.StartTimer()
		t0 := time.Now()
		if err := s.fs.SyncFS(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := syncEach(len(files), func(i int) error { return writebackErr(files[i]) }); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := syncEach(len(files), func(i int) error { return datasync(files[i]) }); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		barrier += t1.Sub(t0).Seconds()
		check += t2.Sub(t1).Seconds()
		fdatasync += t3.Sub(t2).Seconds()
		b.StopTimer()
		for _, f := range files {
			f.Close()
			os.Remove(f.Name())
		}
		b.StartTimer()
	}
	n := float64(round)
	b.ReportMetric(barrier/n*1000, "barrier-ms")
	b.ReportMetric(check/n*1000, "check-ms")
	b.ReportMetric(fdatasync/n*1000, "fdatasync-ms")
}
