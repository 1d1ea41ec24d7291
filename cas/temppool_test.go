package cas

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// pooledTemps lists the temp files in blobs/ itself, where the pool makes
// them, by name.
func pooledTemps(t *testing.T, s *Store) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(s.Dir(), BlobsDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if strings.HasPrefix(de.Name(), tempPrefix) {
			names = append(names, de.Name())
		}
	}
	return names
}

// waitPool waits until the pool is filled (SettleTempPool), and checks
// that blobs/ then holds n temp files.
func waitPool(t *testing.T, s *Store, n int) []string {
	t.Helper()
	s.settleTempPool()
	names := pooledTemps(t, s)
	if len(names) != n {
		t.Fatalf("pool holds %d temp files, want %d", len(names), n)
	}
	return names
}

// Nothing is made before the second put (a process that writes once makes
// nothing for nothing); a put takes a file from the pool (the blob is that
// very file) and the pool is filled again; its files are held (TempInUse)
// and are not blobs to a walk; Close removes them.
func TestTempPool(t *testing.T) {
	ctx := context.Background()
	// (Without syncs, a put writes its blob in place and takes no temp
	// file: see TestPutInPlace.)
	for _, d := range []Durability{SyncFull} {
		t.Run(d.String(), func(t *testing.T) {
			s := MustOpen(t, WithDurability(d), WithTempPool(2))
			if names := pooledTemps(t, s); len(names) != 0 {
				t.Fatalf("temp files before the first put: %q", names)
			}
			if _, err := s.PutBytes(ctx, []byte("first"), ".txt"); err != nil {
				t.Fatal(err)
			}
			waitPool(t, s, 0)
			if _, err := s.PutBytes(ctx, []byte("zeroth"), ".txt"); err != nil {
				t.Fatal(err)
			}
			names := waitPool(t, s, 1)
			infos := map[string]os.FileInfo{}
			for _, n := range names {
				rel := BlobsDir + "/" + n
				if !s.TempInUse(rel) {
					t.Errorf("TempInUse(%s) = false for a pooled file", rel)
				}
				if s.TempStray(rel) {
					t.Errorf("TempStray(%s) = true for a pooled file", rel)
				}
				fi, err := os.Stat(filepath.Join(s.Dir(), BlobsDir, n))
				if err != nil {
					t.Fatal(err)
				}
				infos[n] = fi
			}
			res, err := s.PutBytes(ctx, []byte("second"), ".txt")
			if err != nil {
				t.Fatal(err)
			}
			blob, err := os.Stat(s.Path(res.Blob))
			if err != nil {
				t.Fatal(err)
			}
			var took string
			for n, fi := range infos {
				if os.SameFile(fi, blob) {
					took = n
				}
			}
			if took == "" {
				t.Fatalf("the blob %s is none of the pooled files %q", res.Blob, names)
			}
			if got, err := s.ReadAll(ctx, res.Blob); err != nil || string(got) != "second" {
				t.Errorf("blob reads %q, %v, want %q", got, err, "second")
			}
			after := waitPool(t, s, 1)
			if slices.Contains(after, took) {
				t.Errorf("the pooled file %s taken is still in the pool: %q", took, after)
			}
			var blobs int
			if err := s.Walk(ctx, func(e Entry) error {
				if e.Kind == EntryBlob {
					blobs++
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if blobs != 3 {
				t.Errorf("walk found %d blobs, want 3 (pooled files are no blobs)", blobs)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if names := pooledTemps(t, s); len(names) != 0 {
				t.Errorf("temp files after Close: %q", names)
			}
		})
	}
}

// A pooled file older than maxPooledAge is not used: the blob would keep
// its early birth time, and pass for settled (see syncPresent) too soon.
// The put makes its own file, the filling removes the stale one, and the
// pool does not grow for writes that far apart.
func TestTempPoolStale(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	s := MustOpen(t, WithTempPool(4), WithClock(clock))
	for i := range 2 {
		if _, err := s.PutBytes(ctx, []byte(fmt.Sprint("warm ", i)), ".txt"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		stale := waitPool(t, s, 1)
		// Held open, its inode cannot be reused once the pool removes it.
		held, err := os.Open(filepath.Join(s.Dir(), BlobsDir, stale[0]))
		if err != nil {
			t.Fatal(err)
		}
		staleInfo, err := held.Stat()
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		now = now.Add(maxPooledAge + time.Second)
		mu.Unlock()
		res, err := s.PutBytes(ctx, []byte(fmt.Sprint("late ", i)), ".txt")
		if err != nil {
			t.Fatal(err)
		}
		blob, err := os.Stat(s.Path(res.Blob))
		if err != nil {
			t.Fatal(err)
		}
		if os.SameFile(staleInfo, blob) {
			t.Fatalf("put %d took the stale pooled file %s", i, stale[0])
		}
		held.Close()
		after := waitPool(t, s, 1)
		if slices.Contains(after, stale[0]) {
			t.Errorf("stale pooled file %s still there", stale[0])
		}
	}
}

// With a pool, a durable put still renames a file into place only once
// its bytes are synced, and syncs the shard directory after.
func TestTempPoolWriteOrder(t *testing.T) {
	ctx := context.Background()
	var rec *recordingFS
	s := MustOpen(t, WithTempPool(1), withFileSystem(func(inner fileSystem) fileSystem {
		rec = newRecordingFS(inner)
		return rec
	}))
	for seed := range byte(2) {
		if _, err := s.PutBytes(ctx, pattern(16<<10, 10+seed), ".txt"); err != nil {
			t.Fatal(err)
		}
	}
	waitPool(t, s, 1)
	rec.mu.Lock()
	rec.log = nil
	rec.mu.Unlock()
	res, err := s.PutBytes(ctx, pattern(16<<10, 2), ".txt")
	if err != nil {
		t.Fatal(err)
	}
	waitPool(t, s, 1)
	// The put's own calls, on the file it renamed; then the pool's new
	// file, made by another goroutine.
	log := rec.events()
	var taken string
	for _, e := range log {
		if f := strings.Fields(e); f[0] == "rename" {
			taken = f[1]
		}
	}
	if !strings.HasPrefix(taken, BlobsDir+"/"+tempPrefix) {
		t.Fatalf("renamed %q, want a pooled file in blobs/", taken)
	}
	var own, others []string
	for _, e := range log {
		if f := strings.Fields(e); f[1] == taken || strings.HasPrefix(f[0], "syncdir") {
			own = append(own, e)
		} else {
			others = append(others, e)
		}
	}
	if got, want := strings.Join(shape(own), "; "), "write TMP; sync TMP; close TMP; rename TMP BLOB; syncdir SHARD"; got != want {
		t.Errorf("the put's calls =\n  %s\nwant\n  %s", got, want)
	}
	if got, want := strings.Join(shape(others), "; "), "create TMP"; got != want {
		t.Errorf("other calls = %q, want %q (the pool made again)", got, want)
	}
	// The pool's new file is made once the put's syncs are done: made
	// meanwhile, it would hold them back.
	if got := strings.Join(shape(log), "; "); !strings.HasSuffix(got, "syncdir SHARD; create TMP") {
		t.Errorf("calls = %s, want the pool's file made after the put's last sync", got)
	}
	if len(rec.violations) > 0 {
		t.Errorf("durability violations: %q", rec.violations)
	}
	if want := "rename " + taken + " " + res.Blob.RelPath(); own[3] != want {
		t.Errorf("rename %q, want %q", own[3], want)
	}
}

// The pool grows by one each time a put finds it empty (but the first), up
// to its size.
func TestTempPoolGrows(t *testing.T) {
	s := MustOpen(t, WithTempPool(3))
	for round := 0; round <= 5; round++ {
		for {
			name, f, ok := s.takeTemp()
			if !ok {
				break
			}
			s.discard(name, f)
		}
		// What a put does once its syncs are done.
		s.RefillTempPool()
		waitPool(t, s, min(round, 3))
	}
}

func TestWithTempPoolRefusesBadSize(t *testing.T) {
	for _, n := range []int{-1, maxTempPool + 1} {
		if _, err := Open(context.Background(), t.TempDir(), WithCreate(), WithTempPool(n)); err == nil {
			t.Errorf("WithTempPool(%d) accepted", n)
		}
	}
}
