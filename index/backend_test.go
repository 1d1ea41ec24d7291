package index

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/internal/pgtest"
)

// TestMain stops the PostgreSQL cluster the tests started, if any did.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}

// forEachBackend runs f as a subtest on each database the index runs on:
// "sqlite", then "postgres" (skipped when PostgreSQL is not installed,
// unless $TOOLCAS_REQUIRE_SERVERS is 1). MustOpen, and newIndexPath, open
// the subtest's backend, in a fresh database for each call.
func forEachBackend(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	t.Run("sqlite", f)
	t.Run("postgres", f)
}

// onPostgres reports whether tb runs under forEachBackend's postgres
// subtest, at any depth.
func onPostgres(tb testing.TB) bool {
	return strings.Contains("/"+tb.Name()+"/", "/postgres/")
}

// newIndexPath returns where a test's new index goes: a file in a temp
// directory, or the URL of a new PostgreSQL database.
func newIndexPath(tb testing.TB) string {
	tb.Helper()
	if onPostgres(tb) {
		return pgtest.Database(tb)
	}
	return filepath.Join(tb.TempDir(), "index.db")
}

// One gc at a time: a second session's LockGC fails while the first holds
// the lock, and succeeds once it is released.
func TestLockGC(t *testing.T) { forEachBackend(t, testLockGC) }

func testLockGC(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	y, err := Open(ctx, x.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	release, err := x.LockGC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = y.LockGC(ctx)
	if !onPostgres(t) {
		// SQLite's store locks gc with a file; the index takes nothing.
		if err != nil {
			t.Errorf("LockGC on SQLite = %v, want nil", err)
		}
		if err := release(); err != nil {
			t.Error(err)
		}
		return
	}
	if !errors.Is(err, ErrGCRunning) {
		t.Fatalf("second LockGC = %v, want ErrGCRunning", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := release(); err != nil {
		t.Errorf("second release = %v", err)
	}
	r2, err := y.LockGC(ctx)
	if err != nil {
		t.Fatalf("LockGC after release = %v", err)
	}
	if _, err := x.LockGC(ctx); !errors.Is(err, ErrGCRunning) {
		t.Fatalf("LockGC while the other index holds it = %v, want ErrGCRunning", err)
	}
	if err := r2(); err != nil {
		t.Fatal(err)
	}
	r3, err := x.LockGC(ctx)
	if err != nil {
		t.Fatalf("LockGC after the other released it = %v", err)
	}
	r3()
}
