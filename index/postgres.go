package index

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/toolcas/toolcas/cas"
)

// The index runs on PostgreSQL when Open is given a postgres:// URL. The
// SQL of the package is written once, with ? placeholders, and runs on
// both: the connections to PostgreSQL rebind each statement's placeholders
// to $1, $2, … (sqlx.Rebind) as it reaches the driver, so that no query
// has a second spelling. What differs between the two databases lives in
// this file and in the few branches on Index.pg.
//
// Times stamped on rows (a part's created_at, a blob's first_stored and
// last_referenced) come from the clock of the machine that writes them, as
// on SQLite, not from the server's: the machines sharing an index must keep
// their clocks in sync (NTP), well within gc's grace period, since gc on
// one machine compares its own clock with the times others stamped.

// IsPostgresURL reports whether s names a PostgreSQL database
// (postgres://USER@HOST:PORT/DB or postgresql://…) rather than a file.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// writeLockKey is the transaction-scoped advisory lock every write
// transaction on PostgreSQL takes first. Writers then run one at a time, as
// on SQLite (whose write transactions begin IMMEDIATE): what Record reads to
// choose a key's version and suffix, and what gc's deletes check, cannot
// change under them, so no serialization failure or unique violation from a
// race between toolcas writers ever needs a retry.
const writeLockKey = 0x746f6f6c // "tool"

// gcLockKey is the session-scoped advisory lock lockGC takes, and
// migrateLockKey the one goose holds while it migrates.
const (
	gcLockKey      = writeLockKey + 1
	migrateLockKey = writeLockKey + 2
)

// lockKey returns the 64-bit advisory lock key of one of the lock keys
// above in the index's schema: the key in the high 32 bits, the hash of the
// schema's name in the low. Advisory locks are per database; two indexes
// in two schemas of one database so take different locks, and one's gc or
// migration does not hold up the other's.
func (x *Index) lockKey(key int64) int64 {
	return key<<32 | int64(uint32(x.schemaHash))
}

// lockWrites takes, in tx, the lock that makes the writes to an index in
// PostgreSQL one at a time, as SQLite's are. It waits in PostgreSQL's queue
// for the lock for as long as a write may retry (WithBusyTimeout's total),
// not for the statements' lock_timeout: a write that gave up at the
// lock_timeout to try again later lost its place in the queue, and with
// many writers could keep losing it to those that came later, gc's row
// deletes among them, made while gc holds the store's gc.lock.
func (x *Index) lockWrites(ctx context.Context, tx *sql.Tx) error {
	// No arguments: one round trip of three statements.
	_, err := tx.ExecContext(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d; SELECT pg_advisory_xact_lock(%d); SET LOCAL lock_timeout TO DEFAULT`,
		max(x.retry.Milliseconds(), 1), x.lockKey(writeLockKey)))
	return err
}

// idleInTxTimeout is how long PostgreSQL lets a session of the index sit
// idle inside a transaction before it ends the session, freeing its locks.
const idleInTxTimeout = time.Minute

// checkPostgresURL validates a postgres URL and returns it with the password
// hidden, for messages.
func checkPostgresURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url's error repeats the text, password and all.
		return "", fmt.Errorf("%w: not a URL", ErrInvalidURL)
	}
	shown := redactURL(u)
	db := strings.TrimPrefix(u.Path, "/")
	switch {
	case u.Scheme != "postgres" && u.Scheme != "postgresql":
		return "", fmt.Errorf("%w %s: want postgres://USER@HOST:PORT/DB", ErrInvalidURL, shown)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("%w %s: no host", ErrInvalidURL, shown)
	case db == "" || strings.Contains(db, "/"):
		return "", fmt.Errorf("%w %s: want one database name after the host", ErrInvalidURL, shown)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%w %s: port %q", ErrInvalidURL, shown, p)
		}
	}
	return shown, nil
}

// secretParams are the URL query parameters whose values are secrets, and
// are never shown.
var secretParams = []string{"password", "sslpassword"}

// redactURL returns u as text with its passwords hidden: the userinfo's,
// as url.Redacted hides it, and those given as query parameters.
func redactURL(u *url.URL) string {
	v := *u
	q := v.Query()
	hid := false
	for _, k := range secretParams {
		if _, ok := q[k]; ok {
			q[k] = []string{"xxxxx"}
			hid = true
		}
	}
	if hid {
		v.RawQuery = q.Encode()
	}
	return v.Redacted()
}

// parseConfigMessage returns what pgx says is wrong with the URL raw (which
// names the parameter, as "invalid connect_timeout (…)"), without the URL it
// repeats first, and with every password in raw hidden.
func parseConfigMessage(raw string, err error) string {
	msg := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if i := strings.LastIndex(msg, "`: "); i >= 0 {
			msg = msg[i+3:]
		}
	}
	if u, perr := url.Parse(raw); perr == nil {
		var secrets []string
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
		q := u.Query()
		for _, k := range secretParams {
			secrets = append(secrets, q[k]...)
		}
		for _, s := range secrets {
			if s != "" {
				msg = strings.ReplaceAll(msg, s, "xxxxx")
			}
		}
	}
	return msg
}

// openPostgres opens the index in the PostgreSQL database raw names, and
// migrates it unless c.readOnly.
func openPostgres(ctx context.Context, raw string, c config) (*Index, error) {
	shown, err := checkPostgresURL(raw)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %s", ErrInvalidURL, shown, parseConfigMessage(raw, err))
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	// A statement waits for a lock (the writers' advisory lock, a row) at
	// most the busy timeout, then fails with lock_not_available, which the
	// write retries until its total: the same two limits as on SQLite.
	cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(c.busyTimeout.Milliseconds(), 10)
	// Every transaction runs at READ COMMITTED whatever the database's or
	// the role's default: a write, after it takes the writers' lock, must
	// see what the writer before it committed (a REPEATABLE READ snapshot,
	// taken at the lock statement, would not, and two writers would choose
	// the same version of a key).
	cfg.RuntimeParams["default_transaction_isolation"] = "read committed"
	// A client that dies (its machine lost power, its network went away)
	// must not hold the writers' lock, a row lock or the gc lock for long.
	// The server ends a session left idle inside a transaction after
	// idleInTxTimeout (toolcas never waits for anything but the database
	// inside one), and finds a silent peer by TCP keepalive within about a
	// minute (idle 30 s, then 3 probes 10 s apart; on TCP only, a Unix
	// socket needs none), checking it during long statements too. Any of
	// these the URL sets wins.
	for k, v := range map[string]string{
		"idle_in_transaction_session_timeout": strconv.FormatInt(idleInTxTimeout.Milliseconds(), 10),
		"tcp_keepalives_idle":                 "30",
		"tcp_keepalives_interval":             "10",
		"tcp_keepalives_count":                "3",
		"client_connection_check_interval":    "10000",
	} {
		if _, set := cfg.RuntimeParams[k]; !set {
			cfg.RuntimeParams[k] = v
		}
	}
	if c.durability == cas.SyncNone {
		// A crash may lose the last commits, never break the database: the
		// equivalent of SQLite's synchronous=NORMAL.
		cfg.RuntimeParams["synchronous_commit"] = "off"
	}
	if c.readOnly {
		cfg.RuntimeParams["default_transaction_read_only"] = "on"
	}
	sdb := sql.OpenDB(rebindConnector{stdlib.GetConnector(*cfg)})
	sdb.SetMaxOpenConns(8)
	sdb.SetMaxIdleConns(8)
	sdb.SetConnMaxIdleTime(time.Minute)
	x := &Index{db: sqlx.NewDb(sdb, "pgx"), path: shown, now: c.now, retry: c.retryFor, pg: true, mustExist: c.mustExist}
	if err := sdb.PingContext(ctx); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("open: %w", x.connError(err))
	}
	err = x.checkEncoding(ctx)
	if err == nil {
		err = x.read(ctx, func() error {
			return x.db.GetContext(ctx, &x.schemaHash, `SELECT hashtext(coalesce(current_schema(), ''))`)
		})
	}
	switch {
	case err != nil:
	case c.readOnly:
		err = x.checkVersion(ctx)
	default:
		err = x.migrate(ctx)
	}
	if err == nil {
		err = x.prepare(ctx)
	}
	if err != nil {
		sdb.Close()
		return nil, openError(x.connError(err))
	}
	return x, nil
}

// openError is the error of an Open that failed: one of the index's own
// errors says what is wrong with the database as it is; anything else
// happened while opening it.
func openError(err error) error {
	for _, own := range []error{ErrNewerSchema, ErrOlderSchema, ErrNoIndex, ErrInvalidURL, ErrAccessDenied, ErrNoDatabase,
		ErrUnreachable, ErrUnsupportedDatabase} {
		if errors.Is(err, own) {
			return err
		}
	}
	return fmt.Errorf("open: %w", err)
}

// ErrUnsupportedDatabase is returned by Open for a PostgreSQL database the
// index cannot live in: one whose encoding is not UTF8.
var ErrUnsupportedDatabase = errors.New("unsupported database")

// checkEncoding makes sure the database stores text as UTF-8: in any other
// encoding, keys and names that are valid UTF-8 could be refused or,
// under SQL_ASCII, stored unchecked and compared by other rules.
func (x *Index) checkEncoding(ctx context.Context) error {
	var enc string
	if err := x.read(ctx, func() error { return x.db.GetContext(ctx, &enc, `SHOW server_encoding`) }); err != nil {
		return err
	}
	if enc != "UTF8" {
		return fmt.Errorf("%w: %s has encoding %s, want UTF8 (CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0)",
			ErrUnsupportedDatabase, x.path, enc)
	}
	return nil
}

// connError names what went wrong when the database cannot be used at all:
// no server, a refused login, no such database. Other errors pass as they are.
func (x *Index) connError(err error) error {
	if !x.pg || err == nil || errors.Is(err, ErrAccessDenied) || errors.Is(err, ErrNoDatabase) || errors.Is(err, ErrUnreachable) {
		return err
	}
	// A commit whose answer was lost says so, whatever broke the
	// connection, and keeps its chain (ErrCommitUnknown, the driver's error).
	var cu *commitUnknown
	if errors.As(err, &cu) {
		if connLost(cu.err) {
			return fmt.Errorf("%w: %s: %w", ErrUnreachable, x.path, err)
		}
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "28P01" || pe.Code == "28000":
			return fmt.Errorf("%w to %s (wrong user or password?): %s", ErrAccessDenied, x.path, pe.Message)
		case pe.Code == "3D000":
			return fmt.Errorf("%w: %s: %s (create it first, with createdb or CREATE DATABASE)", ErrNoDatabase, x.path, pe.Message)
		case strings.HasPrefix(pe.Code, "57P") || strings.HasPrefix(pe.Code, "08"):
			return fmt.Errorf("%w: %s: %w", ErrUnreachable, x.path, err)
		}
		return err
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || connLost(err) {
		return fmt.Errorf("%w: %s: %w", ErrUnreachable, x.path, err)
	}
	return err
}

// connLost reports whether err says that a connection that was open is
// gone (the server restarted or stopped, the network broke): a statement
// that was not committing may be tried again on another connection.
func connLost(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P01" || pe.Code == "57P02" || strings.HasPrefix(pe.Code, "08")
	}
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne)
}

// pgTransient reports whether err is PostgreSQL saying to try again: a
// lock wait that timed out, a deadlock, a serialization failure.
func pgTransient(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "55P03", "40001", "40P01":
		return true
	}
	return false
}

// commitUnknown is a commit whose connection broke, or whose context ended,
// before its answer came: the transaction may have committed, so it is not
// tried again. It is ErrCommitUnknown.
type commitUnknown struct{ err error }

func (e *commitUnknown) Is(target error) bool { return target == ErrCommitUnknown }

func (e *commitUnknown) Error() string {
	return "no answer to the commit, the write may or may not have been committed: " + e.err.Error()
}

func (e *commitUnknown) Unwrap() error { return e.err }

// returningID is what an INSERT statement run by insertID ends with.
func (x *Index) returningID() string {
	if x.pg {
		return " RETURNING id"
	}
	return ""
}

// insertID runs an INSERT prepared with returningID and returns the new
// row's id: from RETURNING on PostgreSQL, whose driver has no
// LastInsertId; from LastInsertId on SQLite, where RETURNING made a
// one-part Record a sixth slower.
func (x *Index) insertID(ctx context.Context, st *sql.Stmt, args ...any) (int64, error) {
	if x.pg {
		var id int64
		err := st.QueryRowContext(ctx, args...).Scan(&id)
		return id, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// pgTables are the tables the index's PostgreSQL migrations make: what
// Size counts, and nothing else that shares their schema. A migration that
// adds a table adds it here (TestPostgresSize checks).
var pgTables = []string{"blobs", "parts", "packs", "runs", "counts", "unused_blobs", "sweep_fence", "search_segments",
	"search_posting_groups", "search_state", "settings", "removals", "staged", "goose_db_version"}

// pgSize returns the bytes the index's tables take, with their indexes and
// TOAST.
func (x *Index) pgSize(ctx context.Context) (int64, error) {
	q := `SELECT CAST(coalesce(sum(pg_total_relation_size(to_regclass(t))), 0) AS BIGINT) FROM unnest(ARRAY['` +
		strings.Join(pgTables, "', '") + `']) AS t`
	var n int64
	err := x.read(ctx, func() error { return x.db.QueryRowContext(ctx, q).Scan(&n) })
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", x.path, x.connError(err))
	}
	return n, nil
}

// rebindConnector makes the connections of a PostgreSQL index, which take
// the package's ? placeholders.
type rebindConnector struct{ driver.Connector }

func (c rebindConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := conn.(*stdlib.Conn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("unexpected pgx connection type %T", conn)
	}
	return rebindConn{sc}, nil
}

// rebindConn is a pgx connection that rewrites every ? of the statements it
// runs to $1, $2, …: the package's SQL and the PostgreSQL migrations, which
// goose runs through it too. None of them may hold a ? that is not a
// placeholder, in a string, a comment or an operator (a test of package
// migrations checks theirs).
type rebindConn struct{ *stdlib.Conn }

func rebind(q string) string {
	if strings.IndexByte(q, '?') < 0 {
		return q
	}
	return sqlx.Rebind(sqlx.DOLLAR, q)
}

func (c rebindConn) Prepare(q string) (driver.Stmt, error) {
	return c.Conn.Prepare(rebind(q))
}

func (c rebindConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, rebind(q))
}

func (c rebindConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, rebind(q), args)
}

func (c rebindConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, rebind(q), args)
}

var (
	_ driver.ConnPrepareContext = rebindConn{}
	_ driver.ExecerContext      = rebindConn{}
	_ driver.QueryerContext     = rebindConn{}
	_ driver.ConnBeginTx        = rebindConn{}
	_ driver.SessionResetter    = rebindConn{}
	_ driver.NamedValueChecker  = rebindConn{}
	_ driver.Pinger             = rebindConn{}
)
