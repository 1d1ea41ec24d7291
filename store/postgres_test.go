package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/internal/pgtest"
)

// onPostgres reports whether tb runs under a subtest named postgres, at any
// depth: MustOpen and backendOptions then put the index in PostgreSQL.
func onPostgres(tb testing.TB) bool {
	return strings.Contains(tb.Name()+"/", "/postgres/")
}

// backendOptions returns opts, with, under a postgres subtest, the URL of a
// new PostgreSQL database for the store's index (the test is skipped when
// PostgreSQL is not installed, unless $TOOLCAS_REQUIRE_SERVERS is 1). The
// store records the URL, so that child processes opening its directory use
// the same index.
func backendOptions(tb testing.TB, opts ...Option) []Option {
	tb.Helper()
	if onPostgres(tb) {
		return append(opts, WithIndexURL(pgtest.Database(tb)))
	}
	return opts
}

// TestOnPostgres runs tests of gc, verify, pack, repair, prune, stats and
// streamed puts on a store whose index is in PostgreSQL, the blobs staying
// in the directory.
func TestOnPostgres(t *testing.T) {
	if testing.Short() {
		// The tests themselves run with -short on SQLite; the PostgreSQL
		// index's own tests run under the race detector in index.
		t.Skip("the same tests again on PostgreSQL: run without -short")
	}
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"GCGracePeriod", TestGCGracePeriod},
		{"GCDedupHitRefreshesAge", TestGCDedupHitRefreshesAge},
		{"GCRemovesOldTempsAndOrphans", TestGCRemovesOldTempsAndOrphans},
		{"GCRefusesWhenBlobsAreMissing", TestGCRefusesWhenBlobsAreMissing},
		{"VerifyFindsDamage", TestVerifyFindsDamage},
		{"PackReadsEverywhere", TestPackReadsEverywhere},
		{"PackGCRewritesAndDrops", TestPackGCRewritesAndDrops},
		{"Repair", TestRepair},
		{"CountsThroughGCAndPack", TestCountsThroughGCAndPack},
		{"PutStream", TestPutStream},
		{"Show", TestShow},
		{"Prune", testPrune},
		{"GrepMatchesBruteForce", TestGrepMatchesBruteForce},
		{"RetentionRules", TestRetentionRules},
		{"RetentionQuota", TestRetentionQuota},
		{"AutoMaintenance", TestAutoMaintenance},
		{"MaintenanceLease", TestMaintenanceLease},
	} {
		t.Run("postgres/"+tc.name, tc.f)
	}
}

// testPrune prunes a run and checks what stats say before and after.
func testPrune(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	mustWrite(t, s, item("old", 1, "one"), item("old", 2, "two"))
	mustWrite(t, s, item("new", 1, "three"))
	st, err := s.Stats(ctx, "")
	if err != nil || st.Parts != 3 {
		t.Fatalf("Stats = %+v, %v; want 3 parts", st, err)
	}
	res, err := s.Prune(ctx, PruneOptions{Run: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedParts != 2 {
		t.Errorf("Prune = %+v, want 2 parts", res)
	}
	if st, err = s.Stats(ctx, ""); err != nil || st.Parts != 1 {
		t.Errorf("Stats after prune = %+v, %v; want 1 part", st, err)
	}
}

// The crash loop, many writer processes and writers against gc, on a
// store whose index is in PostgreSQL: the children open the directory,
// which records the index's URL.
func TestCrashLoopPostgres(t *testing.T) { t.Run("postgres", crashLoop) }

func TestCollisionsAcrossProcessesPostgres(t *testing.T) {
	t.Run("postgres", TestCollisionsAcrossProcesses)
}

func TestWritersAgainstGCPostgres(t *testing.T) { t.Run("postgres", TestWritersAgainstGC) }

// A store created with an index URL records it without its password; an
// open without the URL uses it, read-only too; an open naming another
// index is refused.
func TestIndexURLRecorded(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Database(t)
	// The cluster's superuser logs in without a password, so the one
	// in the URL is never checked: it must simply not be written anywhere.
	withPassword := strings.Replace(db, "://"+pgtest.User+"@", "://"+pgtest.User+":s3cret@", 1)
	dir := t.TempDir()
	s, err := Open(ctx, dir, WithCreate(), WithIndexURL(withPassword))
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, item("r", 1, "kept in postgres"))
	s.Close()

	rec, err := os.ReadFile(filepath.Join(dir, IndexRecordFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rec), db) || strings.Contains(string(rec), "s3cret") {
		t.Errorf("%s = %s, want %s without the password", IndexRecordFile, rec, db)
	}
	if _, err := os.Stat(filepath.Join(dir, IndexFile)); !os.IsNotExist(err) {
		t.Errorf("%s exists beside the blobs (%v)", IndexFile, err)
	}
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"recorded", nil},
		{"same url", []Option{WithIndexURL(db)}},
		{"same url with password", []Option{WithIndexURL(withPassword)}},
		{"read-only", []Option{ReadOnly()}},
		{"read-only with url", []Option{ReadOnly(), WithIndexURL(db)}},
	} {
		s, err := Open(ctx, dir, tc.opts...)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !s.ix.IsPostgres() {
			t.Errorf("%s: index at %s, want PostgreSQL", tc.name, s.ix.Path())
		}
		c, err := s.Read(ctx, "r", item("r", 1, "").Key.String())
		if err != nil || string(c.Data) != "kept in postgres" {
			t.Errorf("%s: Read = %v, %v", tc.name, c, err)
		}
		s.Close()
	}
	other := pgtest.Database(t)
	_, err = Open(ctx, dir, WithIndexURL(other))
	if !errors.Is(err, ErrIndexMismatch) || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), other) {
		t.Errorf("open with another index = %v, want ErrIndexMismatch naming both", err)
	}
}

// An index URL is refused, with a message that names the problem and no
// password, when it is malformed or the store keeps its index elsewhere;
// the store is left as it was.
func TestIndexURLRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ url, says string }{
		{"mysql://u:hunter2@host/db", "postgres://USER@HOST:PORT/DB"},
		{"/tmp/index.db", "postgres://USER@HOST:PORT/DB"},
		{"postgres://u:hunter2@/db", "no host"},
		{"postgres://u:hunter2@host", "one database name"},
		{"postgres://u:hunter2@host/a/b", "one database name"},
		{"postgres://u:hunter2@host/db\x7f", "not a URL"},
	} {
		_, err := Open(ctx, t.TempDir(), WithCreate(), WithIndexURL(tc.url))
		if !errors.Is(err, index.ErrInvalidURL) || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: %v, want ErrInvalidURL saying %q without the password", tc.url, err, tc.says)
		}
	}

	// A store whose index is index.db is not opened on another index.
	sqliteStore := MustOpen(t)
	mustWrite(t, sqliteStore, item("r", 1, "local"))
	dir := sqliteStore.Dir()
	sqliteStore.Close()
	for _, opts := range [][]Option{{WithIndexURL("postgres://u:hunter2@127.0.0.1:1/db")}, {WithCreate(), WithIndexURL("postgres://u@127.0.0.1:1/db")}} {
		_, err := Open(ctx, dir, opts...)
		if !errors.Is(err, ErrIndexMismatch) || !strings.Contains(err.Error(), IndexFile) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("open of a SQLite store with an index URL = %v, want ErrIndexMismatch naming %s", err, IndexFile)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, IndexRecordFile)); !os.IsNotExist(err) {
		t.Errorf("a refused open left %s (%v)", IndexRecordFile, err)
	}
	s, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, err := s.Read(ctx, "r", item("r", 1, "").Key.String()); err != nil || string(c.Data) != "local" {
		t.Errorf("after the refusals, Read = %v, %v", c, err)
	}

	// A damaged record is an error naming the file, not a silent index.db.
	bad := t.TempDir()
	b, err := Open(ctx, bad, WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	os.Remove(filepath.Join(bad, IndexFile))
	os.WriteFile(filepath.Join(bad, IndexRecordFile), []byte("{"), 0o644)
	if _, err := Open(ctx, bad); err == nil || !strings.Contains(err.Error(), IndexRecordFile) {
		t.Errorf("open with a damaged %s = %v", IndexRecordFile, err)
	}
}

// Two stores sharing one PostgreSQL index never gc at once, though their
// gc.lock files are apart (as on two machines): the second gc fails with
// ErrGCRunning while the first holds the index's gc lock, and runs once it
// is done.
func TestGCLockAcrossStores(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Database(t)
	entered, release := make(chan struct{}), make(chan struct{})
	a, err := Open(ctx, t.TempDir(), WithCreate(), WithIndexURL(db), withFaults(func(point string) error {
		if point == "gc:sweep" {
			close(entered)
			<-release
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, t.TempDir(), WithCreate(), WithIndexURL(db))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	done := make(chan error, 1)
	go func() {
		_, err := a.GC(ctx, GCOptions{})
		done <- err
	}()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("first gc ended before its sweep: %v", err)
	}
	_, err = b.GC(ctx, GCOptions{})
	if !errors.Is(err, index.ErrGCRunning) || !strings.Contains(err.Error(), "nothing deleted") {
		t.Errorf("second gc while the first runs = %v, want ErrGCRunning", err)
	}
	if _, err := b.GC(ctx, GCOptions{DryRun: true}); err != nil {
		t.Errorf("a dry run while gc runs = %v, want it to run (it deletes nothing)", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("first gc: %v", err)
	}
	if _, err := b.GC(ctx, GCOptions{}); err != nil {
		t.Errorf("second gc after the first = %v", err)
	}
}

// A gc whose index gc lock is lost (its session ended: the server restarted,
// the connection was cut) stops before it deletes: another gc may be running.
func TestGCStopsWhenIndexLockLost(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Shared(t)
	db := pgtest.Database(t)
	clk := &clock{time.Now()}
	cut := false
	s, err := Open(ctx, t.TempDir(), WithCreate(), WithIndexURL(db), WithClock(clk.now), withFaults(func(point string) error {
		if point == "gc:sweep" && !cut {
			cut = true
			// End every session holding an advisory lock on this database:
			// the gc lock's.
			name, _, _ := strings.Cut(db[strings.LastIndex(db, "/")+1:], "?")
			return c.Exec(ctx, `SELECT pg_terminate_backend(l.pid, 10000) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
				WHERE l.locktype = 'advisory' AND d.datname = '`+name+`'`)
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	orphan, err := localOf(s).blobs.PutBytes(ctx, []byte("orphan"), ".txt")
	if err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(2 * time.Hour)
	_, err = s.GC(ctx, GCOptions{Grace: time.Hour})
	if !errors.Is(err, index.ErrGCLockLost) || !strings.Contains(err.Error(), "nothing deleted") {
		t.Errorf("gc after its lock was lost = %v, want ErrGCLockLost, nothing deleted", err)
	}
	if _, err := os.Stat(s.Path(orphan.Blob)); err != nil {
		t.Errorf("the orphan is gone: %v", err)
	}
	// The next gc takes the lock again and removes it.
	res, err := s.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil || res.RemovedBlobs != 1 {
		t.Errorf("next gc = %+v, %v; want the orphan removed", res, err)
	}
}
