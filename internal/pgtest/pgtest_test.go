package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A cluster starts, serves a new database, survives an immediate stop and
// a restart with its data, and leaves no process and no directory behind.
func TestClusterLifecycle(t *testing.T) {
	if err := platformErr(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	stale := makeStaleDirs(t)
	c, err := Start(ctx)
	if errors.Is(err, ErrNoServer) && os.Getenv(RequireEnv) != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for d, keep := range stale {
		_, err := os.Stat(d)
		if kept := err == nil; kept != keep {
			t.Errorf("after Start, %s kept %v, want %v", filepath.Base(d), kept, keep)
		}
		os.RemoveAll(d)
	}
	if os.Getenv(RequireEnv) == "1" {
		url, err := c.NewDatabase(ctx, "icu")
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("pgx", url)
		if err != nil {
			t.Fatal(err)
		}
		var provider string
		if err := db.QueryRowContext(ctx, `SELECT datlocprovider::text FROM pg_database WHERE datname = current_database()`).Scan(&provider); err != nil || provider != "i" {
			t.Errorf("database locale provider %q (%v), want ICU", provider, err)
		}
		db.Close()
	}
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()
	url, err := c.NewDatabase(ctx, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (x int); INSERT INTO t VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	pid := c.Pid()
	if err := c.Crash(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("server pid %d still there after Crash", pid)
	}
	if err := db.PingContext(ctx); err == nil {
		t.Error("ping with the server stopped succeeded")
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var x int
	if err := db.QueryRowContext(ctx, `SELECT x FROM t`).Scan(&x); err != nil || x != 42 {
		t.Errorf("after restart: %d, %v; want 42", x, err)
	}
	pid, dir := c.Pid(), c.dir
	db.Close()
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("server pid %d still there after Stop", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still there: %v", dir, err)
	}
}

// makeStaleDirs makes cluster directories as test processes leave them,
// and returns which of them Start must keep.
func makeStaleDirs(t *testing.T) map[string]bool {
	t.Helper()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPid := strconv.Itoa(dead.Process.Pid)
	me := strconv.Itoa(os.Getpid())
	old := time.Now().Add(-2 * staleAge)
	out := map[string]bool{}
	for _, tc := range []struct {
		name          string
		owner, server string // pids, "" for no file
		old, keep     bool
	}{
		{"maker dead", deadPid, "", false, false},
		{"maker and server dead", deadPid, deadPid, false, false},
		{"server dead, no maker file", "", deadPid, false, false},
		{"maker alive", me, deadPid, false, true},
		{"server alive", deadPid, me, false, true},
		{"nothing yet", "", "", false, true},
		{"nothing for long", "", "", true, false},
	} {
		d, err := os.MkdirTemp(baseDir(), dirPrefix)
		if err != nil {
			t.Fatal(err)
		}
		if tc.owner != "" {
			os.WriteFile(filepath.Join(d, ownerFile), []byte(tc.owner+"\n"), 0o644)
		}
		if tc.server != "" {
			os.Mkdir(filepath.Join(d, "data"), 0o700)
			os.WriteFile(filepath.Join(d, "data", "postmaster.pid"), []byte(tc.server+"\n/data\n"), 0o600)
		}
		if tc.old {
			os.Chtimes(d, old, old)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		out[d] = tc.keep
	}
	return out
}
