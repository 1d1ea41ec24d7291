package store

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/internal/pgtest"

	_ "modernc.org/sqlite"
)

// storeWithBlobs makes a store at a new directory with n parts of their
// own content, two hours old, and closes it.
func storeWithBlobs(t *testing.T, n int, opts ...Option) (dir string, c *clock) {
	t.Helper()
	dir = t.TempDir()
	c = &clock{time.Now().Add(-2 * time.Hour)}
	s, err := Open(context.Background(), dir, append([]Option{WithCreate(), WithClock(c.now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		mustWrite(t, s, item("r", i, "content of part "+strings.Repeat("x", i)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(2 * time.Hour)
	return dir, c
}

// blobFiles counts the blob files under dir.
func blobFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dir, "blobs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasPrefix(d.Name(), ".") {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A store whose index is gone (deleted, cut to nothing, or a database with
// no tables) opens for nothing, however it is opened: an empty index would
// tell gc that no blob is used, and gc would delete them all. Not even
// WithCreate (casctl init) makes a new one while the store holds blobs.
func TestMissingIndexFailsClosed(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"deleted", func(t *testing.T, dir string) {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(filepath.Join(dir, IndexFile+suffix))
			}
		}},
		{"empty file", func(t *testing.T, dir string) {
			for _, suffix := range []string{"-wal", "-shm"} {
				os.Remove(filepath.Join(dir, IndexFile+suffix))
			}
			if err := os.Truncate(filepath.Join(dir, IndexFile), 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"no tables", func(t *testing.T, dir string) {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(filepath.Join(dir, IndexFile+suffix))
			}
			// A SQLite database, but not an index: another program's.
			db, err := sql.Open("sqlite", filepath.Join(dir, IndexFile))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`CREATE TABLE notes (text TEXT)`); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, c := storeWithBlobs(t, 8)
			tc.damage(t, dir)
			before := blobFiles(t, dir)
			for _, opts := range [][]Option{
				nil, {ReadOnly()}, {WithCreate()}, {Maintenance()},
			} {
				s, err := Open(ctx, dir, append(opts, WithClock(c.now))...)
				if err == nil {
					// It must not have opened: gc would find every blob unused.
					res, gcErr := s.GC(ctx, GCOptions{Grace: 0, Force: true})
					s.Close()
					t.Fatalf("Open(%d options) opened a store without its index; GC = %+v, %v", len(opts), res, gcErr)
				}
				if !errors.Is(err, ErrNoIndex) || !strings.Contains(err.Error(), "restore it") {
					t.Errorf("Open(%d options) = %v, want ErrNoIndex saying to restore the index", len(opts), err)
				}
			}
			if after := blobFiles(t, dir); after != before || after < 8 {
				t.Errorf("%d blob files before, %d after: the refusals lost blobs", before, after)
			}
		})
	}
}

// A store directory whose index is missing but which holds no blob (a
// store made up to its marker, then stopped) gets its index from
// WithCreate, as a new store does.
func TestNewIndexForAStoreWithoutBlobs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(filepath.Join(dir, IndexFile+suffix))
	}
	if _, err := Open(ctx, dir); !errors.Is(err, ErrNoIndex) {
		t.Fatalf("Open without WithCreate = %v, want ErrNoIndex", err)
	}
	s, err = Open(ctx, dir, WithCreate())
	if err != nil {
		t.Fatalf("Open WithCreate of a store with no blob and no index: %v", err)
	}
	defer s.Close()
	mustWrite(t, s, item("r", 1, "the first part"))
}

// The index of a store is in PostgreSQL and its record (index.json) is
// removed: the store does not fall back to a new local index.db, whose
// emptiness gc would take for every blob unused. Recording the same
// database again (casctl init --index URL) finds the store's rows; a
// database whose tables were dropped is no index either.
func TestMissingIndexRecordFailsClosed(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	dir, c := storeWithBlobs(t, 6, WithIndexURL(url))
	if err := os.Remove(filepath.Join(dir, IndexRecordFile)); err != nil {
		t.Fatal(err)
	}
	for _, opts := range [][]Option{nil, {ReadOnly()}, {WithCreate()}} {
		if s, err := Open(ctx, dir, append(opts, WithClock(c.now))...); !errors.Is(err, ErrNoIndex) {
			if err == nil {
				s.Close()
			}
			t.Errorf("Open(%d options) without the record = %v, want ErrNoIndex", len(opts), err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, IndexFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused open left %s: %v", IndexFile, err)
	}
	s, err := Open(ctx, dir, WithCreate(), WithIndexURL(url), WithClock(c.now))
	if err != nil {
		t.Fatalf("recording the same database again: %v", err)
	}
	st, err := s.Stats(ctx, "")
	s.Close()
	if err != nil || st.Parts != 6 {
		t.Fatalf("Stats after recording the index again = %+v, %v; want its 6 parts", st, err)
	}

	// Another store's database, new and empty, is not this store's index.
	other := pgtest.Database(t)
	os.Remove(filepath.Join(dir, IndexRecordFile))
	if s, err := Open(ctx, dir, WithCreate(), WithIndexURL(other), WithClock(c.now)); !errors.Is(err, ErrNoIndex) {
		if err == nil {
			s.Close()
		}
		t.Errorf("Open with a new, empty database = %v, want ErrNoIndex", err)
	}
	if n := blobFiles(t, dir); n < 6 {
		t.Errorf("%d blob files left, want 6", n)
	}
}

// An index restored from an older copy lost the rows of the blobs written
// since: gc would take them for garbage. gc refuses to remove blobs no row
// names when they are more than half the store, unless forced; blobs whose
// parts were pruned keep their rows, and gc removes them whatever their
// share.
func TestGCRefusesToEmptyTheStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := &clock{time.Now().Add(-2 * time.Hour)}
	s, err := Open(ctx, dir, WithCreate(), WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		mustWrite(t, s, item("early", i, "early part "+strings.Repeat("x", i)))
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	old, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, dir, WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustWrite(t, s, item("later", i, "later part "+strings.Repeat("y", i)))
	}
	s.Close()
	// The older copy comes back.
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(filepath.Join(dir, IndexFile+suffix))
	}
	if err := os.WriteFile(filepath.Join(dir, IndexFile), old, 0o644); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(2 * time.Hour)
	s = MustOpenDir(t, dir, WithClock(c.now))
	plan, err := s.PlanGC(ctx, GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if share, n := plan.Share(); n != 20 || plan.Blobs != 24 || share != 20.0/24 {
		t.Fatalf("plan: %d of %d blobs no row names (share %v), want 20 of 24", n, plan.Blobs, share)
	}
	res, err := s.GC(ctx, GCOptions{})
	if !errors.Is(err, ErrGCShare) || res.RemovedBlobs != 0 || !strings.Contains(err.Error(), "20 of the store's 24 blobs") {
		t.Fatalf("GC = %+v, %v; want ErrGCShare naming 20 of 24, nothing removed", res, err)
	}
	if n := blobFiles(t, dir); n != 24 {
		t.Fatalf("%d blob files after the refused gc, want 24", n)
	}
	// A larger share allowed, or forced, they go.
	if res, err := s.GC(ctx, GCOptions{MaxShare: 0.9}); err != nil || res.RemovedBlobs != 20 {
		t.Fatalf("GC with a share of 0.9 = %+v, %v; want the 20 blobs no row names removed", res, err)
	}

	// Pruned parts keep their rows: gc removes their blobs, however many.
	dir2, c2 := storeWithBlobs(t, 24)
	s2 := MustOpenDir(t, dir2, WithClock(c2.now))
	if _, err := s2.Prune(ctx, PruneOptions{Run: "r"}); err != nil {
		t.Fatal(err)
	}
	if res, err := s2.GC(ctx, GCOptions{}); err != nil || res.RemovedBlobs != 24 {
		t.Errorf("GC after pruning every part = %+v, %v; want all 24 removed", res, err)
	}
}

// A store on S3 whose index record is gone gets no new, empty index: the
// objects it holds would all look unused. Recording its own database again
// works.
func TestRemoteMissingIndexFailsClosed(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	s := mustOpenRemote(t, e)
	for i := range 4 {
		mustWrite(t, s, item("r", i, "remote part "+strings.Repeat("z", i)))
	}
	s.Close()
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.srv.Dir, u.Host, filepath.FromSlash(u.Path), IndexRecordFile)); err != nil {
		t.Fatal(err)
	}
	other := pgtest.Database(t)
	if s, err := Open(ctx, e.url, e.options(t.TempDir(), WithCreate(), WithIndexURL(other))...); !errors.Is(err, ErrNoIndex) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open of the store with a new, empty database = %v, want ErrNoIndex", err)
	}
	s, err = Open(ctx, e.url, e.options(t.TempDir(), WithCreate(), WithIndexURL(e.db))...)
	if err != nil {
		t.Fatalf("recording the store's own database again: %v", err)
	}
	defer s.Close()
	if st, err := s.Stats(ctx, ""); err != nil || st.Parts != 4 {
		t.Errorf("Stats = %+v, %v; want the 4 parts", st, err)
	}
}
