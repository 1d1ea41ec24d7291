package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/pgtest"
)

// A URL Open cannot use is refused before anything connects, with an error
// that never repeats the password.
func TestOpenBadURL(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"postgres://", "no host"},
		{"postgres://u:hunter2@/db", "no host"},
		{"postgres://u:hunter2@127.0.0.1:5432", "database name"},
		{"postgres://u:hunter2@127.0.0.1:5432/", "database name"},
		{"postgres://u:hunter2@127.0.0.1:5432/db/more", "database name"},
		{"postgres://u:hunter2@127.0.0.1:99999/db", "port"},
		{"postgresql://u:hunter2@127.0.0.1:5432/db?sslmode=bogus", "sslmode"},
		{"mysql://u:hunter2@127.0.0.1/db", "scheme \"mysql\""},
		{"s3://bucket/prefix", "scheme \"s3\""},
		{"postgres://u@/db?password=hunter2", "no host"},
		{"postgres://u@127.0.0.1:5432/?password=hunter2", "database name"},
		{"postgres://u@127.0.0.1:5432/db?sslmode=bogus&password=hunter2", "sslmode"},
		{"postgres://u@127.0.0.1:5432/db?sslpassword=hunter2&sslmode=bogus", "sslmode"},
		{"postgres://u:hunter2@127.0.0.1:5432/db?password=hunter2&sslmode=bogus", "sslmode"},
		{"postgres://u:hunter2@127.0.0.1:5432/db?connect_timeout=abc", "invalid connect_timeout"},
		{"postgres://u:hunter2@127.0.0.1:5432/db?target_session_attrs=x", "target_session_attrs"},
		{"postgres://u:hunter2@127.0.0.1:5432/db?statement_cache_capacity=x", "statement_cache_capacity"},
		{"postgres://u:hunter2@127.0.0.1:5432/db?default_query_exec_mode=x&password=hunter2", "default_query_exec_mode"},
	} {
		_, err := Open(context.Background(), tc.url)
		if !errors.Is(err, ErrInvalidURL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL saying %q", tc.url, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q) error shows the password: %v", tc.url, err)
		}
		if strings.Contains(err.Error(), "<nil>") || strings.Count(err.Error(), "127.0.0.1") > 1 {
			t.Errorf("Open(%q) error is unclear: %v", tc.url, err)
		}
	}
}

// What keeps Open from using a PostgreSQL database is named: a refused
// login, a database that does not exist, a server that does not answer.
func TestOpenPostgresRefused(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Shared(t)
	if err := c.Exec(ctx, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'app') THEN CREATE ROLE app LOGIN PASSWORD 'right-one'; END IF;
	END $$`); err != nil {
		t.Fatal(err)
	}
	db := pgtest.Database(t)
	dbName := db[strings.LastIndexByte(db, '/')+1 : strings.IndexByte(db, '?')]
	if err := c.Exec(ctx, `ALTER DATABASE "`+dbName+`" OWNER TO app`); err != nil {
		t.Fatal(err)
	}
	url := func(userinfo, db string, port int) string {
		return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", userinfo, port, db)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	for _, tc := range []struct {
		name, url string
		err       error
		says      string
	}{
		{"wrong password", url("app:not-the-one", dbName, c.Port()), ErrAccessDenied, `password authentication failed for user "app"`},
		{"no password", url("app", dbName, c.Port()), ErrAccessDenied, "app"},
		{"unknown user", url("nobody:x", dbName, c.Port()), ErrAccessDenied, "nobody"},
		{"missing database", url(pgtest.User, "no_such_db", c.Port()), ErrNoDatabase, `"no_such_db" does not exist`},
		{"nothing listening", url(pgtest.User, dbName, closed), ErrUnreachable, fmt.Sprintf("127.0.0.1:%d", closed)},
		{"wrong password in the query", url("app", dbName, c.Port()) + "&password=not-the-one", ErrAccessDenied, `password authentication failed for user "app"`},
		{"nothing listening, password in the query", url("app", dbName, closed) + "&password=not-the-one", ErrUnreachable, fmt.Sprintf("127.0.0.1:%d", closed)},
		{"missing database, password in the query", url("app", "no_such_db", c.Port()) + "&password=right-one&sslpassword=not-the-one", ErrNoDatabase, `"no_such_db" does not exist`},
	} {
		t0 := time.Now()
		x, err := Open(ctx, tc.url)
		t.Logf("%s: %v in %v", tc.name, err, time.Since(t0))
		if err == nil {
			x.Close()
		}
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: Open = %v; want %v saying %s", tc.name, err, tc.err, tc.says)
		}
		if strings.Contains(err.Error(), "not-the-one") || strings.Contains(err.Error(), "right-one") {
			t.Errorf("%s: error shows the password: %v", tc.name, err)
		}
	}
	// The right password opens it, in the userinfo or in the query, and
	// the index's Path never shows it.
	for _, u := range []string{url("app:right-one", dbName, c.Port()), url("app", dbName, c.Port()) + "&password=right-one"} {
		x, err := Open(ctx, u)
		if err != nil {
			t.Fatalf("Open with the right password: %v", err)
		}
		if strings.Contains(x.Path(), "right-one") {
			t.Errorf("Path() = %q shows the password", x.Path())
		}
		x.Close()
	}
}

// The server stops at once (pg_ctl stop -m immediate: SIGQUIT to its pid)
// while a writer records batches: the writer gets an error naming the
// lost server, every batch is in the index whole or not at all, and once
// the server is back the same Index writes again.
func TestPostgresStopsMidWrite(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Shared(t)
	x, err := Open(ctx, pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	const size = 200
	batch := func(n int) []NewPart {
		ps := make([]NewPart, size)
		for i := range ps {
			ps[i] = newPart(fmt.Sprint("b", n), i, "t", "c", fmt.Sprintf("batch %d part %d", n, i))
		}
		return ps
	}
	committed := make(chan int, 1000)
	failed := make(chan error, 1)
	go func() {
		for n := 0; ; n++ {
			if _, err := x.Record(ctx, batch(n)); err != nil {
				failed <- err
				return
			}
			committed <- n
		}
	}()
	var done []int
	for len(done) < 2 {
		done = append(done, <-committed)
	}
	if err := c.Crash(); err != nil {
		t.Fatal(err)
	}
	werr := <-failed
	close(committed)
	for n := range committed {
		done = append(done, n)
	}
	if !errors.Is(werr, ErrUnreachable) {
		t.Errorf("write while the server stopped: %v; want ErrUnreachable", werr)
	}
	t.Logf("writer's error: %v", werr)
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// Each batch is whole or absent; every batch the writer saw committed is whole.
	st, err := x.Stats(ctx, "")
	if err != nil {
		t.Fatalf("stats after the restart: %v", err)
	}
	for _, r := range st.ByRun {
		if r.Parts != size {
			t.Errorf("run %s has %d parts after the crash, want %d or none", r.Name, r.Parts, size)
		}
	}
	for _, n := range done {
		if ok, err := x.HasRun(ctx, fmt.Sprint("b", n)); err != nil || !ok {
			t.Errorf("batch %d was committed and is gone: %v", n, err)
		}
	}
	if _, err := x.Record(ctx, batch(10_000)); err != nil {
		t.Fatalf("write after the restart: %v", err)
	}
	t.Logf("%d batches committed before the stop, %d runs whole after it", len(done), len(st.ByRun))
}

// ReadOnly on PostgreSQL reads and refuses writes; it migrates nothing, so
// an older schema is ErrOlderSchema. cas.SyncNone turns synchronous_commit
// off for the index's connections, and only for them.
func TestPostgresOptions(t *testing.T) { t.Run("postgres", testPostgresOptions) }

func testPostgresOptions(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	x, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	p := newPart("r", 1, "t", "c", "x")
	mustRecord(t, x, p)
	var sync string
	if err := x.db.GetContext(ctx, &sync, `SHOW synchronous_commit`); err != nil || sync != "on" {
		t.Errorf("synchronous_commit = %q, %v; want on", sync, err)
	}
	x.Close()

	ro, err := Open(ctx, url, ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got, err := ro.Resolve(ctx, mustParse(t, p.Key), ""); err != nil || got.Key != p.Key {
		t.Errorf("read-only Resolve = %+v, %v", got, err)
	}
	if _, err := ro.Record(ctx, []NewPart{newPart("r", 2, "t", "c", "y")}); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("read-only Record = %v, want a read-only error", err)
	}

	fast, err := Open(ctx, url, WithDurability(cas.SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	if err := fast.db.GetContext(ctx, &sync, `SHOW synchronous_commit`); err != nil || sync != "off" {
		t.Errorf("with SyncNone, synchronous_commit = %q, %v; want off", sync, err)
	}

	if _, err := Open(ctx, fixtureAt(t, 3), ReadOnly()); !errors.Is(err, ErrOlderSchema) {
		t.Errorf("read-only Open of version 3 = %v, want ErrOlderSchema", err)
	}
}

// A writer that waits on PostgreSQL for the writers' lock longer than the
// statement's busy timeout keeps its place in the server's queue for the
// lock: one statement waits, up to the total (a write that gave up at the
// statement's timeout and came back went behind those that came later).
// The caller sees no error, only the wait, and the statements after the
// lock have the busy timeout again.
func TestPostgresLockWaitKeepsItsPlace(t *testing.T) {
	t.Run("postgres", testPostgresLockWaitKeepsItsPlace)
}

func testPostgresLockWaitKeepsItsPlace(t *testing.T) {
	ctx := context.Background()
	const statement = 20 * time.Millisecond
	x := MustOpen(t, WithBusyTimeout(statement, time.Minute))
	var lt string
	if err := x.db.GetContext(ctx, &lt, `SHOW lock_timeout`); err != nil || lt != "20ms" {
		t.Fatalf("lock_timeout = %q, %v; want the statement's busy timeout, 20ms", lt, err)
	}
	// Another session holds the writers' lock, as a long write would.
	holder, err := x.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, x.lockKey(writeLockKey)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := x.Record(ctx, []NewPart{newPart("r", 1, "t", "c", "waited")})
		done <- err
	}()
	// The writer's statement waiting for the lock has been waiting for 50
	// of its timeouts: it did not give up and come back.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("no statement waited for the writers' lock for 50 busy timeouts in one go")
		}
		var waited float64
		if err := x.db.GetContext(ctx, &waited, `SELECT coalesce(max(extract(epoch FROM clock_timestamp() - query_start)), 0)
			FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'`); err != nil {
			t.Fatal(err)
		}
		if waited > (50 * statement).Seconds() {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Record returned while the lock was held: %v", err)
		case <-time.After(statement / 4):
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Record returned while the lock was held: %v", err)
	default:
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Record after the lock was freed = %v, want nil", err)
	}
	err = x.write(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SHOW lock_timeout`).Scan(&lt)
	})
	if err != nil || lt != "20ms" {
		t.Errorf("lock_timeout in a write, after the writers' lock = %q, %v; want 20ms", lt, err)
	}
}

// Which errors are tried again: a broken connection at once, a lock wait or
// a serialization failure after a pause, a commit whose answer was lost
// never (it may have committed), and each of them reads as the server being
// unreachable, or as what it is.
func TestPostgresErrorClasses(t *testing.T) {
	ctx := context.Background()
	x := &Index{pg: true, path: "postgres://u@h:5432/db"}
	lockWait := &pgconn.PgError{Code: "55P03", Message: "canceling statement due to lock timeout"}
	for _, tc := range []struct {
		name        string
		err         error
		tries       int // calls of f when every call fails with err
		unreachable bool
	}{
		{"lost connection", io.ErrUnexpectedEOF, 11, true},
		{"server shut the session", &pgconn.PgError{Code: "57P01", Message: "terminating connection"}, 11, true},
		{"commit answer lost", &commitUnknown{io.ErrUnexpectedEOF}, 1, true},
		{"session shut while committing", &commitUnknown{&pgconn.PgError{Code: "57P01", Message: "terminating connection"}}, 1, true},
		{"context ended while committing", &commitUnknown{context.Canceled}, 1, false},
		{"unique violation", &pgconn.PgError{Code: "23505", Message: "duplicate key"}, 1, false},
		{"canceled", context.Canceled, 1, false},
		{"lock wait", lockWait, -1, false},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, -1, false},
	} {
		calls := 0
		err := retryBusy(ctx, 50*time.Millisecond, func() error { calls++; return tc.err })
		if tc.tries > 0 && calls != tc.tries || tc.tries < 0 && calls < 3 {
			t.Errorf("%s: tried %d times, want %d (-1: until the total)", tc.name, calls, tc.tries)
		}
		if got := errors.Is(x.connError(err), ErrUnreachable); got != tc.unreachable {
			t.Errorf("%s: connError = %v, unreachable %v, want %v", tc.name, x.connError(err), got, tc.unreachable)
		}
	}
	// A lost commit says it may have committed and keeps its chain,
	// whatever broke: the server's own error included.
	for _, inner := range []error{
		io.ErrUnexpectedEOF,
		&pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"},
		&pgconn.PgError{Code: "57P02", Message: "terminating connection due to crash of another server process"},
		&pgconn.PgError{Code: "08006", Message: "connection failure"},
		context.DeadlineExceeded,
	} {
		err := x.connError(retryBusy(ctx, 50*time.Millisecond, func() error { return &commitUnknown{inner} }))
		if msg := err.Error(); !strings.Contains(msg, "may or may not have been committed") {
			t.Errorf("commit lost to %v reads %q", inner, msg)
		}
		if !errors.Is(err, ErrCommitUnknown) || !errors.Is(err, inner) || !errors.As(err, new(*commitUnknown)) {
			t.Errorf("commit lost to %v: %v is not ErrCommitUnknown wrapping it", inner, err)
		}
		if pe := new(*pgconn.PgError); errors.As(inner, pe) && !errors.As(err, pe) {
			t.Errorf("commit lost to %v: %v lost the server's error", inner, err)
		}
	}
}

// A database whose default isolation is REPEATABLE READ (or SERIALIZABLE)
// does not change the index's: its writers, one at a time under the
// writers' lock, must see what the one before them committed, or they
// choose the same version of a key and collide.
func TestPostgresIsolationDefault(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Shared(t)
	for _, level := range []string{"repeatable read", "serializable"} {
		t.Run(strings.ReplaceAll(level, " ", "_"), func(t *testing.T) {
			db := pgtest.Database(t)
			dbName := db[strings.LastIndexByte(db, '/')+1 : strings.IndexByte(db, '?')]
			if err := c.Exec(ctx, `ALTER DATABASE "`+dbName+`" SET default_transaction_isolation = '`+level+`'`); err != nil {
				t.Fatal(err)
			}
			x, err := Open(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			var got string
			if err := x.db.GetContext(ctx, &got, `SHOW transaction_isolation`); err != nil || got != "read committed" {
				t.Errorf("the index's connections run at %q (%v), want read committed", got, err)
			}
			const writers, batches = 6, 5
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := range writers {
				wg.Go(func() {
					for n := range batches {
						p := newPart("shared", 0, "t", "same", fmt.Sprint("content ", w, n))
						if _, err := x.Record(ctx, []NewPart{p}); err != nil {
							errs <- fmt.Errorf("writer %d: %w", w, err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			vs, err := x.Versions(ctx, "shared/0_t_same.txt")
			if err != nil || len(vs) != writers*batches {
				t.Errorf("%d versions of the shared key (%v), want %d", len(vs), err, writers*batches)
			}
		})
	}
}

// A PostgreSQL database whose encoding is not UTF8 is refused, read-only
// or not, before anything is written to it.
func TestPostgresEncodingRefused(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Shared(t)
	name := "enc_latin1"
	if err := c.Exec(ctx, `DROP DATABASE IF EXISTS `+name); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, `CREATE DATABASE `+name+` ENCODING 'SQL_ASCII' LOCALE 'C' TEMPLATE template0`); err != nil {
		t.Fatal(err)
	}
	u := c.URL(name)
	for _, opts := range [][]Option{nil, {ReadOnly()}} {
		x, err := Open(ctx, u, opts...)
		if err == nil {
			x.Close()
		}
		if !errors.Is(err, ErrUnsupportedDatabase) || !strings.Contains(err.Error(), "SQL_ASCII") {
			t.Errorf("Open(%s, %d options) = %v, want ErrUnsupportedDatabase naming SQL_ASCII", u, len(opts), err)
		}
	}
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("%d tables made in the refused database (%v), want 0", tables, err)
	}
}

// A role that may not read the index's tables is told so: the schema
// version is not taken for 0 (which read-only would call an older schema,
// and a writer would try to migrate from scratch).
func TestPostgresNoPrivilege(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Shared(t)
	if err := c.Exec(ctx, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'outsider') THEN CREATE ROLE outsider LOGIN PASSWORD 'pw'; END IF;
	END $$`); err != nil {
		t.Fatal(err)
	}
	db := pgtest.Database(t)
	x, err := Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	x.Close()
	u := strings.Replace(db, "postgres://"+pgtest.User+"@", "postgres://outsider:pw@", 1)
	for _, opts := range [][]Option{nil, {ReadOnly()}} {
		y, err := Open(ctx, u, opts...)
		if err == nil {
			y.Close()
		}
		if err == nil || errors.Is(err, ErrOlderSchema) || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("Open as a role without privileges (%d options) = %v, want permission denied", len(opts), err)
		}
	}
}
