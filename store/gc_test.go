package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func item(run string, step int, text string) hook.Item {
	return hook.Item{Key: hook.Key{Run: run, Step: step, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"}, Part: hook.Text(text)}
}

func mustWrite(t *testing.T, s *Store, items ...hook.Item) []hook.Stored {
	t.Helper()
	st, err := s.Write(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestGCGracePeriod(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Now()}
	s := MustOpen(t, WithClock(c.now))
	keep := mustWrite(t, s, item("keep", 1, "kept"))[0]
	old := mustWrite(t, s, item("old", 1, "old garbage"))[0]
	if _, err := s.Prune(ctx, PruneOptions{Run: "old"}); err != nil {
		t.Fatal(err)
	}
	// Younger than the grace period: kept, though unreferenced.
	res, err := s.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedBlobs != 0 || res.KeptYoung != 1 {
		t.Errorf("young gc = %+v, want nothing removed and 1 kept young", res)
	}
	// Two hours on, it goes; the referenced blob stays whatever its age.
	c.t = c.t.Add(2 * time.Hour)
	res, err = s.GC(ctx, GCOptions{Grace: time.Hour, DryRun: true})
	if err != nil || res.RemovedBlobs != 1 || !res.DryRun {
		t.Fatalf("dry run = %+v, %v", res, err)
	}
	if _, err := os.Stat(old.Path); err != nil {
		t.Error("dry run removed a blob")
	}
	res, err = s.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedBlobs != 1 || res.FreedBytes != int64(len("old garbage")) {
		t.Errorf("gc = %+v, want the old blob removed", res)
	}
	if _, err := os.Stat(old.Path); !os.IsNotExist(err) {
		t.Errorf("old blob still there: %v", err)
	}
	if c, err := s.Read(ctx, "keep", keep.Key); err != nil || string(c.Data) != "kept" {
		t.Errorf("referenced blob: %v", err)
	}
	if _, err := s.ix.Blob(ctx, blobOf(t, s, old)); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("blob row of removed blob: %v", err)
	}
}

// blobOf recovers the blob of a stored part from its path.
func blobOf(t *testing.T, s *Store, st hook.Stored) cas.Blob {
	t.Helper()
	rel, err := filepath.Rel(s.Dir(), st.Path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cas.ParseBlobPath(filepath.ToSlash(rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGCDedupHitRefreshesAge(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Now()}
	s := MustOpen(t, WithClock(c.now))
	st := mustWrite(t, s, item("a", 1, "reused"))[0]
	s.Prune(ctx, PruneOptions{Run: "a"})
	c.t = c.t.Add(2 * time.Hour)
	// The same bytes are stored again: a dedup hit, which makes the blob
	// young again; then that row is pruned too.
	again := mustWrite(t, s, item("b", 1, "reused"))[0]
	if !again.Dedup {
		t.Fatal("second write was not a dedup hit")
	}
	s.Prune(ctx, PruneOptions{Run: "b"})
	res, err := s.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedBlobs != 0 || res.KeptYoung != 1 {
		t.Errorf("gc = %+v, want the refreshed blob kept", res)
	}
	if _, err := os.Stat(st.Path); err != nil {
		t.Error(err)
	}
}

func TestGCRemovesOldTempsAndOrphans(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Now()}
	s := MustOpen(t, WithClock(c.now))
	mustWrite(t, s, item("a", 1, "x"))
	tmp := filepath.Join(s.Dir(), "blobs", "ab", ".tmp-leftover")
	os.WriteFile(tmp, []byte("partial"), 0o644)
	// A blob written by a writer that died before its row: an orphan.
	orphan, err := localOf(s).blobs.PutBytes(ctx, []byte("orphan"), ".txt")
	if err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(2 * time.Hour)
	res, err := s.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedTemp != 1 || res.RemovedBlobs != 1 || res.Removed[0] != orphan.Blob {
		t.Errorf("gc = %+v, want the temp file and the orphan removed", res)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Error("temp file still there")
	}
}

func TestGCRefusesWhenBlobsAreMissing(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	st := mustWrite(t, s, item("a", 1, "will vanish"), item("a", 2, "garbage"))
	os.Remove(st[0].Path)
	_, err := s.GC(ctx, GCOptions{})
	if !errors.Is(err, ErrMissingBlobs) || !strings.Contains(err.Error(), "casctl repair") {
		t.Fatalf("gc = %v, want a refusal naming casctl repair", err)
	}
	if _, err := os.Stat(st[1].Path); err != nil {
		t.Error("gc deleted something after refusing")
	}
	if _, err := s.GC(ctx, GCOptions{Grace: -time.Second}); err == nil {
		t.Error("negative grace accepted")
	}
}

// TestGCFutureTimes: a blob whose file and row are stamped a year ahead (a
// clock set back since, a copy from another machine) ages from now: gc
// with no grace period removes it, and with an hour's grace keeps it.
func TestGCFutureTimes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	future := time.Now().Add(365 * 24 * time.Hour)
	ahead := MustOpenDir(t, dir, WithCreate(), WithClock(func() time.Time { return future }))
	st := mustWrite(t, ahead, item("junk", 1, "stamped in the future"))[0]
	if _, err := ahead.Prune(ctx, PruneOptions{Run: "junk"}); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(st.Path, future, future)
	s := MustOpenDir(t, dir)
	res, err := s.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil || res.RemovedBlobs != 0 || res.KeptYoung != 1 {
		t.Errorf("gc with an hour's grace = %+v, %v; want the blob kept as young", res, err)
	}
	res, err = s.GC(ctx, GCOptions{Grace: 0})
	if err != nil || res.RemovedBlobs != 1 {
		t.Fatalf("gc --grace 0s = %+v, %v; want the future-stamped blob removed", res, err)
	}
	if _, err := os.Stat(st.Path); !os.IsNotExist(err) {
		t.Errorf("blob still there: %v", err)
	}
}

// TestGCSetsAsideThenUnlinks: gc takes each blob out of its name while it
// holds gc.lock and unlinks it after, so that a finished gc leaves no file
// behind; a blob set aside by a gc that died before its unlink is a temp
// file that verify reports and the next gc past the grace period removes.
func TestGCSetsAsideThenUnlinks(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Now()}
	s := MustOpen(t, WithClock(c.now))
	var items []hook.Item
	for i := range 200 { // several holds' worth, set aside from two goroutines
		items = append(items, item("old", i, strings.Repeat("garbage ", i+1)))
	}
	mustWrite(t, s, items...)
	left := mustWrite(t, s, item("left", 1, "set aside by a gc that died"))[0]
	mustWrite(t, s, item("keep", 1, "kept"))
	for _, run := range []string{"old", "left"} {
		if _, err := s.Prune(ctx, PruneOptions{Run: run}); err != nil {
			t.Fatal(err)
		}
	}
	// What a gc that died between its hold and its unlinks leaves.
	leftBlob := blobOf(t, s, left)
	rows, err := s.ix.BlobIDsInShard(ctx, leftBlob.Digest[0])
	if err != nil {
		t.Fatal(err)
	}
	rows = slices.DeleteFunc(rows, func(r index.BlobID) bool { return r.Blob != leftBlob })
	if gone, err := s.ix.DeleteUnusedRows(ctx, rows, c.t.Add(time.Minute), c.t); err != nil || len(gone) != 1 {
		t.Fatalf("DeleteUnusedRows(%v) = %v, %v", rows, gone, err)
	}
	rel, err := localOf(s).blobs.Discard(ctx, leftBlob)
	if err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(2 * time.Hour)
	v, err := s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Temp) != 1 || v.Temp[0].Path != filepath.Join(s.Dir(), filepath.FromSlash(rel)) {
		t.Errorf("verify with a blob set aside reports temp files %+v, want %s", v.Temp, rel)
	}
	res, err := s.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedBlobs != 200 || res.RemovedTemp != 1 {
		t.Errorf("gc = %d blobs and %d temp files removed, want 200 and 1", res.RemovedBlobs, res.RemovedTemp)
	}
	// Left: the kept blob, and the temp files the store keeps ready for
	// writes, directly under blobs/.
	var files []string
	err = filepath.WalkDir(filepath.Join(s.Dir(), cas.BlobsDir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Dir(p) != filepath.Join(s.Dir(), cas.BlobsDir) {
			files = append(files, strings.TrimPrefix(p, s.Dir()))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || strings.Contains(files[0], ".tmp-") {
		t.Errorf("blob files after gc = %q, want the kept blob only (not %s)", files, rel)
	}
	v, err = s.Verify(ctx, VerifyOptions{})
	if err != nil || !v.OK || len(v.Temp) != 0 || len(v.Orphans) != 0 {
		t.Errorf("verify after gc = %+v, %v", v, err)
	}
}
