package index

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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

// One gc at a time: a second session's lockGC fails while the first holds
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
	release, err := x.lockGC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = y.lockGC(ctx)
	if !onPostgres(t) {
		// SQLite's store locks gc with a file; the index takes nothing.
		if err != nil {
			t.Errorf("lockGC on SQLite = %v, want nil", err)
		}
		if err := release(); err != nil {
			t.Error(err)
		}
		return
	}
	if !errors.Is(err, ErrGCRunning) {
		t.Fatalf("second lockGC = %v, want ErrGCRunning", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := release(); err != nil {
		t.Errorf("second release = %v", err)
	}
	r2, err := y.lockGC(ctx)
	if err != nil {
		t.Fatalf("lockGC after release = %v", err)
	}
	if _, err := x.lockGC(ctx); !errors.Is(err, ErrGCRunning) {
		t.Fatalf("lockGC while the other index holds it = %v, want ErrGCRunning", err)
	}
	if err := r2(); err != nil {
		t.Fatal(err)
	}
	r3, err := x.lockGC(ctx)
	if err != nil {
		t.Fatalf("lockGC after the other released it = %v", err)
	}
	r3()
}

// The gc lock of a session that died (its backend terminated, as the
// server ends the session of a machine that went silent) is free: another
// index takes it, and the first one's Held says it lost it. Its Release
// then drops the broken connection and the index goes on working.
func TestPostgresGCLockFreedWhenSessionDies(t *testing.T) {
	t.Run("postgres", testPostgresGCLockFreedWhenSessionDies)
}

func testPostgresGCLockFreedWhenSessionDies(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	y, err := Open(ctx, x.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	l, err := x.AcquireGCLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Held(ctx); err != nil {
		t.Fatalf("Held right after AcquireGCLock = %v", err)
	}
	if _, err := y.lockGC(ctx); !errors.Is(err, ErrGCRunning) {
		t.Fatalf("lockGC while another session holds it = %v, want ErrGCRunning", err)
	}
	var pid int
	if err := l.conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var killed bool
	if err := y.db.GetContext(ctx, &killed, `SELECT pg_terminate_backend(?)`, pid); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, killed, err)
	}
	// The backend exits, and its lock goes with it, soon after the signal:
	// poll with a deadline.
	deadline := time.Now().Add(30 * time.Second)
	var release func() error
	for {
		release, err = y.lockGC(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrGCRunning) || time.Now().After(deadline) {
			t.Fatalf("lockGC after the holder's session died = %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer release()
	if err := l.Held(ctx); !errors.Is(err, ErrGCLockLost) {
		t.Errorf("Held after the session died = %v, want ErrGCLockLost", err)
	}
	if err := l.Release(); err == nil {
		t.Error("Release of a lock whose session died = nil, want an error")
	}
	if err := l.Held(ctx); !errors.Is(err, ErrGCLockLost) {
		t.Errorf("Held after Release = %v, want ErrGCLockLost", err)
	}
	if _, err := x.Record(ctx, []NewPart{newPart("r", 1, "t", "c", "after the gc session died")}); err != nil {
		t.Errorf("Record after the gc session died = %v", err)
	}
	if _, err := x.lockGC(ctx); !errors.Is(err, ErrGCRunning) {
		t.Errorf("lockGC while the other index holds it = %v, want ErrGCRunning", err)
	}
}

// Every connection of a PostgreSQL index has the settings that free what a
// dead client held: the idle-in-transaction timeout and TCP keepalives.
func TestPostgresSessionSettings(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		x := MustOpen(t)
		for k, want := range map[string]string{
			"idle_in_transaction_session_timeout": "1min",
			"tcp_keepalives_idle":                 "30",
			"tcp_keepalives_interval":             "10",
			"tcp_keepalives_count":                "3",
			"client_connection_check_interval":    "10s",
			"transaction_isolation":               "read committed",
		} {
			var got string
			if err := x.db.GetContext(context.Background(), &got, `SELECT current_setting(?)`, k); err != nil || got != want {
				t.Errorf("%s = %q (%v), want %q", k, got, err, want)
			}
		}
	})
}

// Size on PostgreSQL counts the index's own tables, every table its
// migrations make and nothing else in their schema, and sizeContext
// reports a server that does not answer instead of a zero.
func TestPostgresSize(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		ctx := context.Background()
		x := MustOpen(t)
		var tables []string
		if err := x.db.SelectContext(ctx, &tables, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1`); err != nil {
			t.Fatal(err)
		}
		for _, tb := range tables {
			if !slices.Contains(pgTables, tb) {
				t.Errorf("table %s, made by the migrations, is not in pgTables: Size misses it", tb)
			}
		}
		before, err := x.sizeContext(ctx)
		if err != nil || before <= 0 {
			t.Fatalf("sizeContext = %d, %v", before, err)
		}
		if _, err := x.db.ExecContext(ctx, `CREATE TABLE not_ours AS SELECT repeat('x', 1000) AS v FROM generate_series(1, 2000)`); err != nil {
			t.Fatal(err)
		}
		if after, err := x.sizeContext(ctx); err != nil || after != before {
			t.Errorf("sizeContext with another table in the schema = %d, %v; want %d", after, err, before)
		}
		if got := x.Size(); got != before {
			t.Errorf("Size = %d, want %d", got, before)
		}
		x.Close()
		if n, err := x.sizeContext(ctx); err == nil {
			t.Errorf("sizeContext of a closed index = %d, nil; want an error", n)
		}
	})
}

// Two indexes in two schemas of one PostgreSQL database take different
// advisory locks: one's gc does not stop the other's; within one schema
// the gc lock still excludes.
func TestPostgresLocksPerSchema(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		ctx := context.Background()
		db := pgtest.Database(t)
		x0, err := Open(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		defer x0.Close()
		for _, s := range []string{"a", "b"} {
			if _, err := x0.db.ExecContext(ctx, `CREATE SCHEMA `+s); err != nil {
				t.Fatal(err)
			}
		}
		open := func(schema string) *Index {
			x, err := Open(ctx, db+"&search_path="+schema)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { x.Close() })
			return x
		}
		a, a2, b := open("a"), open("a"), open("b")
		if a.lockKey(gcLockKey) == b.lockKey(gcLockKey) {
			t.Fatalf("schemas a and b have the same gc lock key %x", a.lockKey(gcLockKey))
		}
		ra, err := a.lockGC(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer ra()
		rb, err := b.lockGC(ctx)
		if err != nil {
			t.Fatalf("lockGC in schema b while schema a's gc runs = %v", err)
		}
		defer rb()
		if _, err := a2.lockGC(ctx); !errors.Is(err, ErrGCRunning) {
			t.Errorf("second lockGC in schema a = %v, want ErrGCRunning", err)
		}
		for _, x := range []*Index{a, b} {
			if _, err := x.Record(ctx, []NewPart{newPart("r", 1, "t", "c", "in a schema")}); err != nil {
				t.Error(err)
			}
		}
	})
}
