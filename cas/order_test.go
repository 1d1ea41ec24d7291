package cas

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// recordingFS records the calls a put makes and checks, at every rename, that
// the file about to appear under its final name is durable: synced after its
// last write (or covered by a file-system barrier) and closed.
type recordingFS struct {
	fileSystem
	mu         sync.Mutex
	log        []string
	written    map[string]bool // written since the last sync
	closed     map[string]bool
	violations []string
}

func newRecordingFS(inner fileSystem) *recordingFS {
	return &recordingFS{fileSystem: inner, written: map[string]bool{}, closed: map[string]bool{}}
}

func (r *recordingFS) record(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

func (r *recordingFS) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

type recordingFile struct {
	file
	r    *recordingFS
	name string
}

func (r *recordingFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	f, err := r.fileSystem.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if flag&os.O_CREATE != 0 {
		r.record("create %s", name)
	}
	return &recordingFile{file: f, r: r, name: name}, nil
}

func (f *recordingFile) Write(p []byte) (int, error) {
	n, err := f.file.Write(p)
	f.r.mu.Lock()
	f.r.written[f.name] = true
	f.r.mu.Unlock()
	f.r.record("write %s", f.name)
	return n, err
}

func (f *recordingFile) Sync() error {
	err := f.file.Sync()
	f.r.mu.Lock()
	delete(f.r.written, f.name)
	f.r.mu.Unlock()
	f.r.record("sync %s", f.name)
	return err
}

func (f *recordingFile) Close() error {
	err := f.file.Close()
	f.r.mu.Lock()
	f.r.closed[f.name] = true
	f.r.mu.Unlock()
	f.r.record("close %s", f.name)
	return err
}

func (r *recordingFS) Rename(oldname, newname string) error {
	r.mu.Lock()
	if r.written[oldname] {
		r.violations = append(r.violations, "rename of unsynced "+oldname+" to "+newname)
	}
	if !r.closed[oldname] {
		r.violations = append(r.violations, "rename of open "+oldname)
	}
	r.mu.Unlock()
	r.record("rename %s %s", oldname, newname)
	return r.fileSystem.Rename(oldname, newname)
}

func (r *recordingFS) SyncDir(name string) error {
	r.record("syncdir %s", name)
	return r.fileSystem.SyncDir(name)
}

func (r *recordingFS) SyncFS() error {
	err := r.fileSystem.SyncFS()
	if err == nil {
		r.mu.Lock()
		clear(r.written)
		r.mu.Unlock()
	}
	r.record("syncfs")
	return err
}

// shape reduces a log to its operations, with temp names as TMP and blob
// names as BLOB, so that orders compare across runs.
func shape(log []string) []string {
	var out []string
	for _, e := range log {
		f := strings.Fields(e)
		for i := 1; i < len(f); i++ {
			switch {
			case strings.Contains(f[i], tempPrefix):
				f[i] = "TMP"
			case strings.HasPrefix(f[i], "blobs/") && strings.Count(f[i], "/") == 2:
				f[i] = "BLOB"
			case strings.HasPrefix(f[i], "blobs/"):
				f[i] = "SHARD"
			}
		}
		s := strings.Join(f, " ")
		// Consecutive writes of one file are one step.
		if len(out) > 0 && s == "write TMP" && out[len(out)-1] == s {
			continue
		}
		out = append(out, s)
	}
	return out
}

func TestDurableWriteOrder(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		durability Durability
		size       int
		want       []string
	}{
		{"full", SyncFull, 16 << 10, []string{"create TMP", "write TMP", "sync TMP", "close TMP", "rename TMP BLOB", "syncdir SHARD"}},
		{"full stream", SyncFull, 3 * memLimit, []string{"create TMP", "write TMP", "sync TMP", "close TMP", "rename TMP BLOB", "syncdir SHARD"}},
		// Without syncs, a new blob is written in place: no temp file.
		{"none", SyncNone, 16 << 10, []string{"create BLOB", "write BLOB", "close BLOB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec *recordingFS
			s := MustOpen(t, WithDurability(tc.durability), withFileSystem(func(inner fileSystem) fileSystem {
				rec = newRecordingFS(inner)
				return rec
			}))
			rec.mu.Lock()
			rec.log = nil
			rec.mu.Unlock()
			res, err := s.Put(ctx, bytes.NewReader(pattern(tc.size, 1)), ".txt")
			if err != nil {
				t.Fatal(err)
			}
			got := shape(rec.events())
			if strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Errorf("calls =\n  %s\nwant\n  %s", strings.Join(got, "; "), strings.Join(tc.want, "; "))
			}
			if tc.durability == SyncFull && len(rec.violations) > 0 {
				t.Errorf("durability violations: %q", rec.violations)
			}
			if log := rec.events(); tc.durability == SyncFull && log[len(log)-1] != "syncdir blobs/"+res.Blob.Shard() {
				t.Errorf("last call = %q, want a sync of the blob's shard %s", log[len(log)-1], res.Blob.Shard())
			}
			// The temp file was made in the blob's own shard, or for a stream
			// whose digest is not known in advance, in blobs/ itself.
			log := rec.events()
			wantDir := "blobs/" + res.Blob.Shard() + "/" + tempPrefix
			if tc.size > memLimit {
				wantDir = "blobs/" + tempPrefix
			}
			if tc.durability == SyncNone {
				wantDir = res.Blob.RelPath()
			}
			if !strings.HasPrefix(strings.Fields(log[0])[1], wantDir) {
				t.Errorf("temp file %s, want it in %s", strings.Fields(log[0])[1], wantDir)
			}

			// A dedup hit writes and renames nothing. When durable, it syncs
			// the blob and its shard, since the writer that made them may
			// not have synced the name yet: the blob is durable before the
			// hit is reported.
			rec.mu.Lock()
			rec.log = nil
			rec.mu.Unlock()
			if _, err := s.Put(ctx, bytes.NewReader(pattern(tc.size, 1)), ".txt"); err != nil {
				t.Fatal(err)
			}
			var syncs []string
			for _, e := range rec.events() {
				if strings.HasPrefix(e, "rename") || (tc.size <= memLimit && strings.HasPrefix(e, "write")) {
					t.Errorf("dedup hit made call %q", e)
				}
				if strings.HasPrefix(e, "sync") {
					syncs = append(syncs, e)
				}
			}
			wantSyncs := ""
			if tc.durability == SyncFull {
				wantSyncs = "sync " + res.Blob.RelPath() + "; syncdir blobs/" + res.Blob.Shard()
			}
			if got := strings.Join(syncs, "; "); got != wantSyncs {
				t.Errorf("dedup hit syncs %q, want %q", got, wantSyncs)
			}
		})
	}
}

// A batch takes a barrier while the machine holds little unwritten, and
// syncs each file and directory where a barrier would wait long or the
// platform has none: either way, no blob is renamed before its bytes are
// durable, and the renames are made durable last.
func TestBatchWriteOrder(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		unsupported bool
		dear        bool
	}{{"syncfs", false, false}, {"fallback", true, false}, {"barrier dear", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			var rec *recordingFS
			s := MustOpen(t, withFileSystem(func(inner fileSystem) fileSystem {
				rec = newRecordingFS(inner)
				if tc.unsupported {
					rec.fileSystem = &faultFS{fileSystem: inner, syncFSErr: errSyncFSUnsupported}
				}
				return rec
			}))
			// The machine's unwritten bytes: much while dear; else much
			// only once this batch has written its own (the batch must
			// ask before).
			asked := 0
			s.gauge.unwritten = func() (int64, error) {
				asked++
				rec.mu.Lock()
				defer rec.mu.Unlock()
				if tc.dear || len(rec.written) > 0 {
					return 1 << 30, nil
				}
				return 0, nil
			}
			rec.mu.Lock()
			rec.log = nil
			rec.mu.Unlock()
			items := make([]Item, 50)
			for i := range items {
				items[i] = Item{Data: pattern(4096, byte(i%40)), Ext: ".txt"}
			}
			res, err := s.PutBatch(ctx, items)
			if err != nil {
				t.Fatal(err)
			}
			existed := 0
			for i, r := range res {
				if r.Existed {
					existed++
				}
				if r.Blob.Digest != Sum(items[i].Data) {
					t.Errorf("result %d has digest %v", i, r.Blob.Digest)
				}
			}
			if existed != 10 {
				t.Errorf("%d items reported Existed, want the 10 repeats", existed)
			}
			log := rec.events()
			firstRename, lastRename, lastWrite := -1, -1, -1
			barriers := []int{}
			for i, e := range log {
				switch {
				case strings.HasPrefix(e, "rename"):
					if firstRename < 0 {
						firstRename = i
					}
					lastRename = i
				case strings.HasPrefix(e, "write"):
					lastWrite = i
				case e == "syncfs" && !tc.unsupported:
					barriers = append(barriers, i)
				}
			}
			if asked != 1 {
				t.Errorf("the unwritten bytes were looked at %d times, want once", asked)
			}
			if tc.dear {
				if n := strings.Count(strings.Join(log, "\n"), "syncfs"); n != 0 {
					t.Errorf("%d file-system barriers while one was dear: %q", n, shape(log))
				}
				synced := map[string]bool{}
				lastSync := -1
				for i, e := range log {
					if name, ok := strings.CutPrefix(e, "sync "); ok {
						synced[name] = true
						lastSync = i
					}
				}
				if len(synced) != 40 || lastSync > firstRename {
					t.Errorf("%d files synced, the last at %d, the first rename at %d; want the 40 new ones before any rename",
						len(synced), lastSync, firstRename)
				}
				dirs := 0
				for i, e := range log {
					if strings.HasPrefix(e, "syncdir") {
						dirs++
						if i < lastRename {
							t.Errorf("a shard directory synced at %d, before the last rename at %d", i, lastRename)
						}
					}
				}
				if dirs == 0 {
					t.Errorf("no shard directory synced: %q", shape(log))
				}
			} else if !tc.unsupported {
				if len(barriers) != 2 {
					t.Fatalf("%d file-system barriers, want 2: %q", len(barriers), shape(log))
				}
				if !(lastWrite < barriers[0] && barriers[0] < firstRename && lastRename < barriers[1]) {
					t.Errorf("order: last write %d, barrier %d, renames %d..%d, barrier %d; want writes < barrier < renames < barrier",
						lastWrite, barriers[0], firstRename, lastRename, barriers[1])
				}
				if n := strings.Count(strings.Join(log, "\n"), "sync "); n != 0 {
					t.Errorf("%d per-file syncs in a batch with a barrier", n)
				}
			} else if last := log[len(log)-1]; !strings.HasPrefix(last, "syncdir") {
				t.Errorf("fallback ends with %q, want shard directory syncs", last)
			}
			if len(rec.violations) > 0 {
				t.Errorf("durability violations: %q", rec.violations)
			}
			for i, it := range items {
				got, err := s.ReadAll(ctx, res[i].Blob)
				if err != nil || !bytes.Equal(got, it.Data) {
					t.Fatalf("item %d reads back %d bytes, %v", i, len(got), err)
				}
			}
			assertNoTemps(t, s)
		})
	}
}

// faultFS injects failures into a file system.
type faultFS struct {
	fileSystem
	readDirName string
	readDirErr  error
	syncFSErr   error
	// failAfter makes writes fail with ENOSPC once this many bytes were
	// written to temp files, when positive.
	failAfter int64
	mu        sync.Mutex
	written   int64
}

func (f *faultFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if f.readDirErr != nil && name == f.readDirName {
		return nil, f.readDirErr
	}
	return f.fileSystem.ReadDir(name)
}

func (f *faultFS) SyncFS() error {
	if f.syncFSErr != nil {
		return f.syncFSErr
	}
	return f.fileSystem.SyncFS()
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	fl, err := f.fileSystem.OpenFile(name, flag, perm)
	if err != nil || f.failAfter <= 0 || flag&os.O_CREATE == 0 {
		return fl, err
	}
	return &limitedFile{file: fl, fs: f}, nil
}

type limitedFile struct {
	file
	fs *faultFS
}

func (l *limitedFile) Write(p []byte) (int, error) {
	l.fs.mu.Lock()
	room := l.fs.failAfter - l.fs.written
	if room < int64(len(p)) {
		if room < 0 {
			room = 0
		}
		l.fs.written += room
		l.fs.mu.Unlock()
		n, _ := l.file.Write(p[:room])
		return n, &fs.PathError{Op: "write", Path: l.Name(), Err: syscall.ENOSPC}
	}
	l.fs.written += int64(len(p))
	l.fs.mu.Unlock()
	return l.file.Write(p)
}

func TestDiskFull(t *testing.T) {
	ctx := context.Background()
	var ff *faultFS
	s := MustOpen(t, withFileSystem(func(inner fileSystem) fileSystem {
		ff = &faultFS{fileSystem: inner}
		return ff
	}))
	ff.failAfter = 10000
	for _, tc := range []struct {
		name string
		put  func() error
	}{
		{"bytes", func() error { _, err := s.PutBytes(ctx, pattern(20000, 1), ".txt"); return err }},
		{"stream", func() error { _, err := s.Put(ctx, bytes.NewReader(pattern(3*memLimit, 2)), ".txt"); return err }},
		{"batch", func() error {
			_, err := s.PutBatch(ctx, []Item{{pattern(6000, 3), ".txt"}, {pattern(6000, 4), ".txt"}})
			return err
		}},
	} {
		ff.mu.Lock()
		ff.written = 0
		ff.mu.Unlock()
		err := tc.put()
		if !errors.Is(err, ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("%s: err = %v, want ErrDiskFull wrapping ENOSPC", tc.name, err)
		}
		if n := countBlobs(t, s); n != 0 {
			t.Errorf("%s: %d blobs after a failed write", tc.name, n)
		}
		assertNoTemps(t, s)
	}
	// Space returns: the same writes succeed.
	ff.failAfter = 0
	res, err := s.PutBytes(ctx, pattern(20000, 1), ".txt")
	if err != nil {
		t.Fatalf("put after space returned: %v", err)
	}
	if _, err := s.ReadAll(ctx, res.Blob); err != nil {
		t.Fatal(err)
	}
}

// shardRemoverFS removes a shard directory, empty, just before a temp file
// is created in it, as a pack's RemoveEmptyShards in another process may.
type shardRemoverFS struct {
	fileSystem
	removals int
}

func (f *shardRemoverFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	if dir, base, ok := strings.Cut(strings.TrimPrefix(name, BlobsDir+"/"), "/"); ok && f.removals > 0 &&
		flag&os.O_CREATE != 0 && strings.HasPrefix(base, tempPrefix) {
		if err := f.fileSystem.Remove(BlobsDir + "/" + dir); err == nil {
			f.removals--
		}
	}
	return f.fileSystem.OpenFile(name, flag, perm)
}

// A write whose shard directory a packer removes again and again, even
// right after the write made it anew, makes it again and succeeds.
func TestShardRemovedWhileWriting(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	fsys := &shardRemoverFS{fileSystem: s.fs, removals: 3}
	s.fs = fsys
	data := []byte("a shard removed under a writer")
	res, err := s.PutBytes(ctx, data, ".txt")
	if err != nil {
		t.Fatalf("PutBytes with its shard removed 3 times = %v", err)
	}
	if fsys.removals != 0 {
		t.Fatalf("%d removals left, want 0: the test did not remove the shard", fsys.removals)
	}
	got, err := ReadBlob(ctx, s, res.Blob)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("ReadBlob = %q, %v; want %q", got, err, data)
	}
}

// shardRenameRemoverFS removes a shard directory, empty, just before a
// streamed blob is renamed into it.
type shardRenameRemoverFS struct {
	fileSystem
	removals int
}

func (f *shardRenameRemoverFS) Rename(oldname, newname string) error {
	if f.removals > 0 && path.Dir(oldname) == BlobsDir {
		if err := f.fileSystem.Remove(path.Dir(newname)); err == nil {
			f.removals--
		}
	}
	return f.fileSystem.Rename(oldname, newname)
}

// A streamed put whose shard a packer removes again and again before the
// rename makes it again and succeeds.
func TestShardRemovedBeforeStreamedRename(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	// The shard must exist and be empty for the remover to remove it.
	data := bytes.Repeat([]byte("streamed into a shard removed under it "), 60_000) // over memLimit: staged in blobs/
	b := Blob{Digest: Sum(data), Ext: ".txt"}
	if err := s.remakeShard(b.Shard()); err != nil {
		t.Fatal(err)
	}
	fsys := &shardRenameRemoverFS{fileSystem: s.fs, removals: 3}
	s.fs = fsys
	res, err := s.Put(ctx, bytes.NewReader(data), ".txt")
	if err != nil {
		t.Fatalf("Put with its shard removed 3 times = %v", err)
	}
	if fsys.removals != 0 {
		t.Fatalf("%d removals left, want 0: the test did not remove the shard", fsys.removals)
	}
	got, err := ReadBlob(ctx, s, res.Blob)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("ReadBlob = %d bytes, %v; want %d bytes", len(got), err, len(data))
	}
}

// syncFailFS fails the sync of every file after the first ok ones.
type syncFailFS struct {
	fileSystem
	mu     sync.Mutex
	ok     int
	synced int
}

type syncFailFile struct {
	file
	fs *syncFailFS
}

func (f *syncFailFS) OpenFile(name string, flag int, perm fs.FileMode) (file, error) {
	fl, err := f.fileSystem.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &syncFailFile{file: fl, fs: f}, nil
}

func (f *syncFailFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.synced++; f.fs.synced > f.fs.ok {
		return &os.PathError{Op: "sync", Path: "blob", Err: syscall.EIO}
	}
	return f.file.Sync()
}

// A batch whose files are synced one by one (the barrier being dear) and
// one of whose syncs fails stores nothing and leaves no temp file; the
// same batch then goes through.
func TestBatchFileSyncFails(t *testing.T) {
	ctx := context.Background()
	var ff *syncFailFS
	s := MustOpen(t, withFileSystem(func(inner fileSystem) fileSystem {
		ff = &syncFailFS{fileSystem: inner, ok: 5}
		return ff
	}))
	s.gauge.unwritten = func() (int64, error) { return 1 << 30, nil }
	items := make([]Item, 40)
	for i := range items {
		items[i] = Item{Data: pattern(4096, byte(i)), Ext: ".txt"}
	}
	if _, err := s.PutBatch(ctx, items); !errors.Is(err, syscall.EIO) {
		t.Fatalf("PutBatch with a failing sync = %v, want EIO", err)
	}
	if n := countBlobs(t, s); n != 0 {
		t.Errorf("%d blobs after a failed sync", n)
	}
	assertNoTemps(t, s)
	ff.mu.Lock()
	ff.ok = 1 << 30
	ff.mu.Unlock()
	res, err := s.PutBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		if got, err := s.ReadAll(ctx, res[i].Blob); err != nil || !bytes.Equal(got, it.Data) {
			t.Fatalf("item %d reads back %d bytes, %v", i, len(got), err)
		}
	}
}

// syncEach runs every call, at most syncersMax at once, returns only once
// all have returned, and returns the first error, after which no call
// begins.
func TestSyncEach(t *testing.T) {
	for _, n := range []int{0, 1, 5, syncersMax, 100} {
		var mu sync.Mutex
		running, most, calls := 0, 0, map[int]int{}
		release := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- syncEach(n, func(i int) error {
				mu.Lock()
				running++
				most = max(most, running)
				calls[i]++
				mu.Unlock()
				<-release
				mu.Lock()
				running--
				mu.Unlock()
				return nil
			})
		}()
		// As many calls as may run at once get under way, and the call
		// does not return while they wait.
		want := min(n, syncersMax)
		for deadline := time.Now().Add(10 * time.Second); ; {
			mu.Lock()
			r := running
			mu.Unlock()
			if r >= want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("n=%d: %d calls under way at once, want %d", n, r, want)
			}
			time.Sleep(time.Millisecond)
		}
		if n > 0 {
			select {
			case err := <-done:
				t.Fatalf("n=%d: returned (%v) before its calls did", n, err)
			default:
			}
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(calls) != n || most > syncersMax {
			t.Errorf("n=%d: %d distinct calls, at most %d at once; want %d, at most %d", n, len(calls), most, n, syncersMax)
		}
		for i, c := range calls {
			if c != 1 || i < 0 || i >= n {
				t.Errorf("n=%d: call %d made %d times", n, i, c)
			}
		}
	}
	// The first call fails while every other one that began waits: only
	// the calls already under way when it failed began. (With calls that
	// returned at once, the failing one could run after all the others had
	// begun, and the check failed now and then on a busy machine.)
	var mu sync.Mutex
	begun := 0
	boom := errors.New("boom")
	failed, gate := make(chan struct{}), make(chan struct{})
	go func() {
		<-failed
		close(gate)
	}()
	err := syncEach(1000, func(i int) error {
		mu.Lock()
		begun++
		mu.Unlock()
		if i == 0 {
			defer close(failed)
			return boom
		}
		<-gate
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("syncEach with a failing call = %v, want it", err)
	}
	// At most syncersMax were under way; a few more may begin between the
	// failing call's return and the cancel that follows it.
	if begun > 2*syncersMax {
		t.Errorf("%d of 1000 calls began, after one failed with at most %d under way", begun, syncersMax)
	}
}
