package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"syscall"
	"testing"
)

// A cluster starts, serves a new database, survives an immediate stop and
// a restart with its data, and leaves no process and no directory behind.
func TestClusterLifecycle(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx)
	if errors.Is(err, ErrNoServer) && os.Getenv(RequireEnv) != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
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
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("server pid %d still there after Crash: %v", pid, err)
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
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("server pid %d still there after Stop: %v", pid, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still there: %v", dir, err)
	}
}
