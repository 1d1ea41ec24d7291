// Package index is the index of a toolcas store, in a SQLite file or a
// PostgreSQL database: every blob, every logical key that points at one,
// and every byte saved. It answers what the hook and casctl ask: resolve a
// reference, list, stats, prune, and the sets gc and verify need. It knows
// SQL only; the blob files are package cas's.
//
// Most programs never import index: store.Open opens it beside the blobs,
// and the store's methods answer the same questions.
package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/cancel"
	"github.com/toolcas/toolcas/internal/option"
	"github.com/toolcas/toolcas/migrations"
)

var (
	// ErrNotFound is returned by Resolve when no part matches the reference
	// (in the run, when scoped to one), and by the other lookups when
	// nothing matches. It is cas.ErrNotFound, the one "not found" of every
	// layer.
	ErrNotFound = cas.ErrNotFound

	// ErrAmbiguous is returned, inside an *AmbiguousError, by Resolve when a
	// digest prefix matches several blobs.
	ErrAmbiguous = errors.New("ambiguous reference")

	// ErrInvalidRef is returned by ParseRef for text that is no reference.
	ErrInvalidRef = errors.New("invalid reference")

	// ErrNewerSchema is returned by Open when the database was made by a
	// newer toolcas than this build.
	ErrNewerSchema = errors.New("index made by a newer toolcas")

	// ErrInvalidPart is returned by Record for a part that cannot be stored.
	ErrInvalidPart = errors.New("invalid part")

	// ErrOlderSchema is returned by Open in read-only mode when the
	// database's schema is older than this build's and so needs a migration,
	// which takes write access.
	ErrOlderSchema = errors.New("index made by an older toolcas")

	// ErrInvalidURL is returned by Open for a database URL it cannot use.
	ErrInvalidURL = errors.New("invalid index URL")

	// ErrAccessDenied is returned by Open when PostgreSQL refuses the login:
	// a wrong user or password.
	ErrAccessDenied = errors.New("access denied")

	// ErrNoDatabase is returned by Open when the PostgreSQL database named
	// in the URL does not exist.
	ErrNoDatabase = errors.New("no such database")

	// ErrUnreachable is returned by Open, and by any method, when the
	// PostgreSQL server cannot be reached or the connection to it broke.
	ErrUnreachable = errors.New("database server unreachable")

	// ErrCommitUnknown is returned, with ErrUnreachable when the connection
	// broke, by a write on PostgreSQL (Record and the other writes) whose
	// commit was sent but whose answer never came: the connection broke or
	// the context ended while committing. The write may or may not have
	// been committed, so the index does not try it again.
	ErrCommitUnknown = errors.New("commit outcome unknown")

	// ErrNoIndex is returned by Open, with MustExist, for a database that
	// holds no index.
	ErrNoIndex = errors.New("no index")

	// ErrGCRunning is returned by AcquireGCLock when another process holds
	// the gc lock.
	ErrGCRunning = errors.New("another gc is running")
)

// Index is an open index database. It is safe for concurrent use by many
// goroutines and, through SQLite's locking or PostgreSQL's, many processes
// (on PostgreSQL, on many machines).
type Index struct {
	db      *sqlx.DB
	stmts   statements
	runs    runCache
	path    string
	now     func() time.Time
	retry   time.Duration
	version int64
	// pg is set for an index in PostgreSQL; path is then its URL, with any
	// password hidden.
	pg bool
	// readOnly is set for an index opened read-only: it folds no staged
	// steps (see staged.go). foldMu is held while the index looks for
	// staged steps and folds them.
	readOnly bool
	foldMu   sync.Mutex
	// writeTurn is held by the committer's batch and by a background
	// fold's chunk, each for its transaction: they take turns in this
	// process rather than through SQLite's lock, whose waits sleep for
	// a millisecond and more at a time (see commitQueued).
	writeTurn sync.Mutex
	// mustExist is MustExist's setting.
	mustExist bool
	// snapshot is the private directory holding a copy of a database that
	// could be opened read-only no other way (see openSnapshot).
	snapshot string
	// schemaHash is PostgreSQL's hash of the index's schema name, which
	// its advisory lock keys include (see lockKey).
	schemaHash int32
	// logSynced is set when a commit syncs SQLite's log
	// (synchronous=FULL): see RecordGatheringLogUnsynced.
	logSynced bool
	unsynced  logUnsynced
	// deferred is RecordDeferred's open transaction.
	deferred deferred
	// queue is RecordQueued's steps, waiting for the committer.
	queue queue
	// search is the connection searches read through, under mapped reads.
	search searchConn
	// sweepTried, when set (by tests), is called each time
	// AcquireSweepLock finds the sweep lock taken.
	sweepTried func()
}

// An Option configures Open.
type Option func(*config) error

type config struct {
	durability  cas.Durability
	now         func() time.Time
	busyTimeout time.Duration
	retryFor    time.Duration
	readOnly    bool
	immutable   bool
	// recentMayBeLost commits without syncing the log (synchronous=NORMAL)
	// whatever the durability.
	recentMayBeLost bool
	// mustExist refuses a database that holds no index yet.
	mustExist bool
	// deferCommits is WithDeferredCommit's setting.
	deferCommits bool
	// mapped is WithMappedReads's limit, 0 for none.
	mapped int64
}

// MustExist makes Open fail with ErrNoIndex when the database holds no
// index (a missing or empty SQLite file, or a database without the
// index's tables), instead of making one. A store that holds blobs opens
// its index so: an empty index would tell gc that no blob is used.
func MustExist() Option {
	return func(c *config) error {
		c.mustExist = true
		return nil
	}
}

// WithDurability sets SQLite's synchronous mode: FULL for cas.SyncFull (the
// default), NORMAL for cas.SyncNone. On PostgreSQL, cas.SyncNone turns
// synchronous_commit off for the index's connections.
func WithDurability(d cas.Durability) Option {
	return option.Check(d == cas.SyncFull || d == cas.SyncNone, func(c *config) { c.durability = d }, "invalid durability %d", int(d))
}

// RecentKeysMayBeLostOnPowerCut commits without waiting for the log to reach
// stable storage (SQLite's synchronous=NORMAL in WAL mode): a commit costs
// no sync, the database stays consistent through any crash, and a process
// killed loses nothing, but a power cut or an operating system crash may
// lose the transactions committed since the last checkpoint.
func RecentKeysMayBeLostOnPowerCut() Option {
	return option.Set(func(c *config) { c.recentMayBeLost = true })
}

// WithClock replaces the clock that stamps rows, for tests of ages.
func WithClock(now func() time.Time) Option {
	return option.Check(now != nil, func(c *config) { c.now = now }, "nil clock")
}

// WithBusyTimeout sets how long one statement waits for another process's
// lock (default 5 s), and how long a write, or a migration, keeps retrying
// after a statement gave up waiting (default 60 s), before an error reaches
// the caller. On PostgreSQL the first is the connections' lock_timeout.
func WithBusyTimeout(statement, total time.Duration) Option {
	return func(c *config) error {
		if statement <= 0 || total < statement {
			return fmt.Errorf("busy timeout %v, total %v: want 0 < statement <= total", statement, total)
		}
		c.busyTimeout = statement
		c.retryFor = total
		return nil
	}
}

// WithMappedReads has SQLite read the first limit bytes of the database
// through a memory map (its mmap_size) instead of a read call a page: for
// a short-lived process that reads many rows once, such as a search, in
// which fetching the 512-byte pages cost a fifth of its time. The pages
// it touches count towards the process's resident memory, as file pages
// the system may drop: a long-lived process, or one whose memory is
// measured, does better without. The row reads of searches then go
// through one connection of the pool (see searchConn). On PostgreSQL it
// does nothing.
func WithMappedReads(limit int64) Option {
	return option.Check(limit > 0, func(c *config) { c.mapped = limit }, "mapped reads of %d bytes: want a positive limit", limit)
}

// ReadOnly opens the database for reading only, as SQLite's mode=ro does,
// and, where even that cannot work (a read-only directory with no -shm
// file beside the database), as an immutable file; on PostgreSQL, with
// default_transaction_read_only. Nothing is created or migrated; a database
// whose schema is older than this build's gives ErrOlderSchema.
func ReadOnly() Option {
	return option.Set(func(c *config) { c.readOnly = true })
}

// Open opens the index database at path, creating it if needed, and migrates
// its schema to this build's. A database whose schema is newer than this
// build knows is refused with ErrNewerSchema.
//
// A path of the form postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?PARAMS]
// (or postgresql://…) opens the index in that PostgreSQL database instead,
// which must exist; its tables are created or migrated as a file's are.
// The password may also come from PGPASSWORD or ~/.pgpass, the URL's
// parameters are libpq's (sslmode=, connect_timeout=, …). Open then fails
// with ErrAccessDenied, ErrNoDatabase or ErrUnreachable when it cannot log
// in, and any other URL (another scheme, no host, no database) is
// ErrInvalidURL.
func Open(ctx context.Context, path string, opts ...Option) (*Index, error) {
	c := config{durability: cas.SyncFull, now: time.Now, busyTimeout: 5 * time.Second, retryFor: 60 * time.Second}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if IsPostgresURL(path) {
		return openPostgres(ctx, path, c)
	}
	if scheme, _, ok := strings.Cut(path, "://"); ok && !strings.ContainsAny(scheme, "/\\") {
		return nil, fmt.Errorf("%w: scheme %q: want a file path or postgres://USER@HOST:PORT/DB", ErrInvalidURL, scheme)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if c.mustExist {
		if fi, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) || err == nil && fi.Size() == 0 {
			return nil, fmt.Errorf("%w at %s: the file is missing or empty", ErrNoIndex, abs)
		}
	}
	if c.readOnly {
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("open %s read-only: %w", abs, err)
		}
		x, err := openReadOnly(ctx, abs, c)
		if err != nil && !errors.Is(err, ErrOlderSchema) && !errors.Is(err, ErrNewerSchema) {
			if x2, err2 := openSnapshot(ctx, abs, c); err2 == nil {
				return x2, nil
			}
		}
		return x, err
	}
	if err := create(ctx, abs); err != nil {
		return nil, err
	}
	db, err := sqlx.Open("sqlite", dsn(abs, c))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", abs, err)
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(time.Minute)
	x := &Index{db: db, path: abs, now: c.now, retry: c.retryFor, mustExist: c.mustExist,
		logSynced: c.durability == cas.SyncFull && !c.recentMayBeLost}
	x.deferred.on = c.deferCommits
	x.search.on = c.mapped > 0
	return x.ready(ctx, x.migrate)
}

// openSnapshot opens, read-only, a database that mode=ro cannot open: in a
// directory this process may not write, with no -shm file beside it, SQLite
// cannot share the log's index. Without a log, it is opened as an
// immutable file. With one, which holds the newest rows and which an
// immutable open would ignore, the database and its log are copied to a
// private directory and opened there: a view of the index as it was then,
// with every row.
func openSnapshot(ctx context.Context, abs string, c config) (*Index, error) {
	if fi, err := os.Stat(abs + "-wal"); err != nil || fi.Size() == 0 {
		c.immutable = true
		return openReadOnly(ctx, abs, c)
	}
	dir, err := os.MkdirTemp("", "toolcas-index-")
	if err != nil {
		return nil, fmt.Errorf("copy %s to read its log: %w", abs, err)
	}
	snap := filepath.Join(dir, filepath.Base(abs))
	for _, suffix := range []string{"", "-wal"} {
		if err := copyFile(abs+suffix, snap+suffix); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("copy %s to read its log: %w", abs, err)
		}
	}
	x, err := openReadOnly(ctx, snap, c)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	x.path, x.snapshot = abs, dir
	return x, nil
}

// copyFile copies the file at from to a new file at to.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// pageSize is the page size of a new index database. Every page a write
// transaction changes is appended whole to the write-ahead log and synced,
// so small pages make a one-part step's log small (512-byte pages: about
// 6 KiB a step of new content, where 1 KiB pages logged 9.6 KiB);
// a larger page would only help scans of many rows, which the index
// answers from indexes. An index keeps the page size it was made with.
const pageSize = 512

// create makes a new, empty database file with pageSize pages in WAL mode,
// unless it exists already. The page size has to be set before anything
// is written, which the connection pragmas of Open (applied in their name's
// order, journal_mode first) cannot do.
func create(ctx context.Context, abs string) error {
	if fi, err := os.Stat(abs); err == nil && fi.Size() > 0 {
		return nil
	}
	lk := flock.New(abs + "-migrate.lock")
	if _, err := lk.TryLockContext(ctx, 20*time.Millisecond); err != nil {
		return fmt.Errorf("lock %s to create it: %w", abs, err)
	}
	defer lk.Unlock()
	if fi, err := os.Stat(abs); err == nil && fi.Size() > 0 {
		return nil
	}
	// Another process may open the file as soon as its first page is
	// written, while this one still turns the log on: it waits for that
	// process's lock as every other connection does, with a busy timeout.
	db, err := sql.Open("sqlite", "file:"+uriPath(abs)+"?_pragma=busy_timeout(5000)&_pragma=page_size("+strconv.Itoa(pageSize)+")")
	if err != nil {
		return fmt.Errorf("create %s: %w", abs, err)
	}
	defer db.Close()
	// Incremental auto-vacuum, which must also be chosen before anything
	// is written, lets ReclaimFree return the pages of deleted rows (most
	// of them the search index's dropped segments) to the file system.
	for _, q := range []string{`PRAGMA auto_vacuum = INCREMENTAL`, `PRAGMA journal_mode=WAL`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create %s: %w", abs, err)
		}
	}
	return db.Close()
}

// openReadOnly opens the database without writing to it: no migration,
// and a schema version that must be this build's.
func openReadOnly(ctx context.Context, abs string, c config) (*Index, error) {
	db, err := sqlx.Open("sqlite", dsn(abs, c))
	if err != nil {
		return nil, fmt.Errorf("open %s read-only: %w", abs, err)
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	x := &Index{db: db, path: abs, now: c.now, retry: c.retryFor, mustExist: c.mustExist, readOnly: true}
	x.search.on = c.mapped > 0
	return x.ready(ctx, x.checkVersion)
}

// ready readies x, whose SQLite database was just opened, for use: schema
// migrates the database, or checks that it needs no migration, and the
// statements are prepared. Should either fail, it closes the database.
func (x *Index) ready(ctx context.Context, schema func(context.Context) error) (*Index, error) {
	if err := schema(ctx); err != nil {
		x.db.Close()
		return nil, err
	}
	if err := x.prepare(ctx); err != nil {
		x.db.Close()
		return nil, err
	}
	return x, nil
}

// checkVersion makes sure the database's schema is this build's, for an
// index opened without the right to migrate it.
func (x *Index) checkVersion(ctx context.Context) error {
	_, current, latest, err := x.versions(ctx)
	if err != nil {
		return err
	}
	if current < latest {
		return fmt.Errorf("%w: %s has schema version %d and needs migrating to %d, which takes write access: run any command that writes (casctl gc --dry-run, say) once with write access",
			ErrOlderSchema, x.path, current, latest)
	}
	x.version = latest
	return nil
}

// versions returns the migrations of the index's database (see provider),
// the database's schema version and the latest this build knows, which
// Open migrates it to or, read-only, wants it at. A database whose
// version is newer than this build's is ErrNewerSchema.
func (x *Index) versions(ctx context.Context) (p *goose.Provider, current, latest int64, err error) {
	if p, err = x.provider(); err != nil {
		return nil, 0, 0, err
	}
	sources := p.ListSources()
	latest = sources[len(sources)-1].Version
	if current, err = x.dbVersion(ctx); err != nil {
		return nil, 0, 0, err
	}
	if current > latest {
		return nil, 0, 0, fmt.Errorf("%w: %s has schema version %d, this build knows versions up to %d; upgrade toolcas",
			ErrNewerSchema, x.path, current, latest)
	}
	if current == 0 && x.mustExist {
		return nil, 0, 0, fmt.Errorf("%w in %s: it has no tables", ErrNoIndex, x.path)
	}
	return p, current, latest, nil
}

// provider loads the migrations of the index's database: SQLite's, or their
// PostgreSQL twins, which goose applies holding a session advisory lock so
// that processes opening a new database at once do not race.
func (x *Index) provider() (*goose.Provider, error) {
	var (
		p   *goose.Provider
		err error
	)
	if x.pg {
		var locker lock.SessionLocker
		// Try the lock every second, for five minutes.
		if locker, err = lock.NewPostgresSessionLocker(lock.WithLockID(x.lockKey(migrateLockKey)), lock.WithLockTimeout(1, 300)); err == nil {
			p, err = goose.NewProvider(goose.DialectPostgres, x.db.DB, migrations.Postgres(),
				goose.WithDisableGlobalRegistry(true), goose.WithSessionLocker(locker))
		}
	} else {
		p, err = goose.NewProvider(goose.DialectSQLite3, x.db.DB, migrations.FS, goose.WithDisableGlobalRegistry(true))
	}
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}

// statements are prepared once per index (database/sql then prepares each
// on a connection once): parsing SQL was a fifth of the cost of recording
// a part.
type statements struct {
	keyOwner, sameAs, insertPart, runID, insertRun *sql.Stmt
	insertBlob, touchBlob, insertNewKey            *sql.Stmt
	// runsNamed and runParts read a run for RecordQueued (see loadRun).
	runsNamed, runParts *sql.Stmt
	// savepoint and release bracket a deferred step's statements (see
	// recordSavepoint); SQLite only, where commits are deferred.
	savepoint, release *sql.Stmt
	// The staged steps' statements (see staged.go); SQLite only.
	insertStaged, stagedAny, stagedRows *sql.Stmt
}

func (x *Index) prepare(ctx context.Context) error {
	runsNamed := runsNamedStagedSQL // PostgreSQL stages nothing
	if x.pg {
		runsNamed = runsNamedSQL
	}
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{
		{&x.stmts.keyOwner, keyOwnerSQL},
		{&x.stmts.sameAs, sameAsSQL},
		{&x.stmts.insertPart, insertPartSQL + x.returningID()},
		{&x.stmts.runID, runIDSQL},
		{&x.stmts.insertRun, insertRunSQL},
		{&x.stmts.insertBlob, insertBlobSQL + x.returningID()},
		{&x.stmts.touchBlob, touchBlobSQL},
		{&x.stmts.insertNewKey, insertNewKeySQL + x.returningID()},
		{&x.stmts.runsNamed, runsNamed},
		{&x.stmts.runParts, runPartsSQL},
		{&x.stmts.savepoint, savepointSQL},
		{&x.stmts.release, releaseSQL},
		{&x.stmts.insertStaged, insertStagedSQL},
		{&x.stmts.stagedAny, stagedAnySQL},
		{&x.stmts.stagedRows, stagedRowsSQL},
	} {
		if x.pg && (p.dst == &x.stmts.savepoint || p.dst == &x.stmts.release || p.dst == &x.stmts.insertStaged ||
			p.dst == &x.stmts.stagedAny || p.dst == &x.stmts.stagedRows) {
			continue
		}
		err := retryBusy(ctx, x.retry, func() error {
			st, err := x.db.PrepareContext(ctx, x.blobType(p.q))
			*p.dst = st
			return err
		})
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	return nil
}

// blobType returns q for the index's database: on PostgreSQL a cast to
// BLOB is one to BYTEA.
func (x *Index) blobType(q string) string {
	if x.pg {
		return strings.ReplaceAll(q, " AS BLOB)", " AS BYTEA)")
	}
	return q
}

// dsn builds the connection string. Every pragma is in it, so that each
// pooled connection gets them, not only the first.
func dsn(path string, c config) string {
	sync := "FULL"
	if c.durability == cas.SyncNone || c.recentMayBeLost {
		sync = "NORMAL"
	}
	q := []string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", c.busyTimeout.Milliseconds()),
		"_pragma=journal_mode(WAL)",
		"_pragma=foreign_keys(1)",
		"_pragma=synchronous(" + sync + ")",
		// Write transactions take the write lock when they begin, so that two
		// writers never deadlock upgrading read locks.
		"_txlock=immediate",
	}
	switch {
	case c.immutable:
		q = []string{"immutable=1", fmt.Sprintf("_pragma=busy_timeout(%d)", c.busyTimeout.Milliseconds())}
	case c.readOnly:
		q = []string{"mode=ro", fmt.Sprintf("_pragma=busy_timeout(%d)", c.busyTimeout.Milliseconds())}
	}
	if c.mapped > 0 {
		q = append(q, fmt.Sprintf("_pragma=mmap_size(%d)", c.mapped))
	}
	return "file:" + uriPath(path) + "?" + strings.Join(q, "&")
}

// uriPath escapes a file path for an SQLite URI filename.
func uriPath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("/._-~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// migrate applies pending migrations one at a time across processes, so
// that processes opening a new index at once do not race to create it: on
// SQLite under an exclusive file lock, on PostgreSQL under goose's session
// advisory lock.
func (x *Index) migrate(ctx context.Context) error {
	p, current, latest, err := x.versions(ctx)
	if err != nil {
		return err
	}
	if current < latest {
		// On PostgreSQL goose holds its advisory lock while it migrates,
		// and looks at the version again once it has it. Each migration is
		// a transaction of its own: one that waited too long for a reader's
		// lock (55P03) is rolled back alone, and Up, tried again, resumes
		// there.
		if !x.pg {
			lk := flock.New(x.path + "-migrate.lock")
			if _, err := lk.TryLockContext(ctx, 20*time.Millisecond); err != nil {
				return fmt.Errorf("lock %s for migration: %w", x.path, err)
			}
			defer lk.Unlock()
		}
		err := retryBusy(ctx, x.retry, func() error {
			_, err := p.Up(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %s from version %d to %d: %w", x.path, current, latest, err)
		}
	}
	x.version = latest
	return nil
}

// dbVersion reads the schema version goose recorded, 0 for a new database.
func (x *Index) dbVersion(ctx context.Context) (int64, error) {
	var n int
	q := `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'goose_db_version'`
	if x.pg {
		// The table the unqualified name finds, through the search path,
		// as goose's queries find it; information_schema would list it
		// only to a role with a privilege on it.
		q = `SELECT count(to_regclass('goose_db_version'))`
	}
	err := retryBusy(ctx, x.retry, func() error {
		return x.db.GetContext(ctx, &n, q)
	})
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", x.path, err)
	}
	if n == 0 {
		return 0, nil
	}
	var v int64
	err = retryBusy(ctx, x.retry, func() error {
		return x.db.GetContext(ctx, &v, `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`)
	})
	if err != nil {
		return 0, fmt.Errorf("read schema version of %s: %w", x.path, err)
	}
	return v, nil
}

// SchemaVersion returns the schema version of the open database.
func (x *Index) schemaVersion() int64 { return x.version }

// Path returns the database file's absolute path, or for an index in
// PostgreSQL its URL with any password hidden.
func (x *Index) Path() string { return x.path }

// IsPostgres reports whether the index is in PostgreSQL.
func (x *Index) IsPostgres() bool { return x.pg }

// Close closes the database.
func (x *Index) Close() error {
	// What waits for its commit is the writers' to lose only in a crash.
	deferredErr := x.CommitDeferred()
	if d := &x.deferred; d.on {
		d.mu.Lock()
		d.closed = true
		if d.fold != nil {
			d.fold.Stop()
		}
		d.mu.Unlock()
		d.folds.Wait()
		// What was staged is folded: a reader that cannot fold (opened
		// read-only) sees it once the writer closed.
		if err := x.foldIfStaged(context.Background()); err != nil {
			deferredErr = errors.Join(deferredErr, fmt.Errorf("fold staged steps: %w", x.connError(err)))
		}
	}
	if x.snapshot != "" {
		defer os.RemoveAll(x.snapshot)
	}
	for _, st := range []*sql.Stmt{x.stmts.keyOwner, x.stmts.sameAs, x.stmts.insertPart, x.stmts.runID, x.stmts.insertRun,
		x.stmts.insertBlob, x.stmts.touchBlob, x.stmts.insertNewKey, x.stmts.runsNamed, x.stmts.runParts,
		x.stmts.savepoint, x.stmts.release, x.stmts.insertStaged, x.stmts.stagedAny, x.stmts.stagedRows} {
		if st != nil {
			st.Close()
		}
	}
	x.queue.dir.close()
	x.closeLogUnsynced()
	searchErr := x.search.close()
	return errors.Join(deferredErr, searchErr, x.db.Close())
}

// Size returns the bytes the index takes on disk: the database, its WAL and
// its shared-memory file; on PostgreSQL, its tables and their indexes, or 0
// when the server does not answer (sizeContext says why).
func (x *Index) Size() int64 {
	if x.pg {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, _ := x.pgSize(ctx)
		return n
	}
	var n int64
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if fi, err := os.Stat(x.path + suffix); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// sizeContext is Size with the error that kept it from answering.
func (x *Index) sizeContext(ctx context.Context) (int64, error) {
	if x.pg {
		return x.pgSize(ctx)
	}
	return x.Size(), nil
}

// Checkpoint folds the WAL into the database file and truncates it, so that
// Size reflects the data rather than recent writes. On PostgreSQL, whose
// server checkpoints on its own, it does nothing.
func (x *Index) Checkpoint(ctx context.Context) error {
	if x.pg {
		return nil
	}
	if err := x.settle(); err != nil { // what waits for its commit would hold the log
		return err
	}
	return retryBusy(ctx, x.retry, func() error {
		_, err := x.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
		return err
	})
}

// reclaimChunk is how many free pages one transaction of ReclaimFree
// returns: 2 MiB at 512-byte pages, a few milliseconds of writing, so that
// writers wait no longer than for an ordinary step.
const reclaimChunk = 4096

// reclaimCache is the page cache of ReclaimFree's connection.
const reclaimCache = 64 << 20

// ReclaimFree returns the database's free pages (those of rows deleted
// since, which SQLite otherwise keeps for later writes) to the file system,
// a chunk a transaction, and checkpoints the log so that the file shrinks.
// It returns the bytes given back. A database made before incremental
// auto-vacuum was chosen for new ones, and PostgreSQL, give back nothing.
func (x *Index) ReclaimFree(ctx context.Context) (int64, error) {
	if x.pg {
		return 0, nil
	}
	var mode, size, free int64
	err := x.read(ctx, func() error {
		if err := x.db.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
			return err
		}
		if err := x.db.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
			return err
		}
		return x.db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size)
	})
	if err != nil || mode != 2 || free == 0 { // 2: incremental; nothing to give back takes no write lock
		return 0, err
	}
	// Moving a page from the end of the file into a free one rewrites its
	// parent and its entry in the pointer map, pages all over the file: on
	// a connection of its own with a cache of reclaimCache, not the few
	// megabytes of an ordinary one, which it would read again and again.
	// Giving back 145 MiB of a 216 MiB index took about 85 s with it, and
	// about 200 s without it (one run each, at a like load).
	conn, err := x.db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("reclaim free pages: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA cache_size = `+strconv.Itoa(-reclaimCache>>10)); err != nil {
		return 0, fmt.Errorf("reclaim free pages: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA cache_size = -2000`) // SQLite's default
	var freed int64
	for {
		var n int64
		err := retryBusy(ctx, x.retry, func() error {
			return x.commitTx(ctx, conn, func(tx *sql.Tx) error {
				n = 0
				// One result row for each page given back: stepping through
				// them is what does the work.
				rows, err := tx.QueryContext(ctx, `PRAGMA incremental_vacuum(`+strconv.Itoa(reclaimChunk)+`)`)
				if err != nil {
					return err
				}
				for rows.Next() {
					n++
				}
				rows.Close()
				return rows.Err()
			})
		})
		if err != nil {
			return freed, fmt.Errorf("reclaim free pages: %w", x.connError(err))
		}
		freed += n * size
		if n < reclaimChunk {
			break
		}
	}
	if freed == 0 {
		return 0, nil
	}
	return freed, x.Checkpoint(ctx)
}

// isBusy reports whether err is SQLite saying another connection holds a
// lock, or PostgreSQL saying to try again: worth retrying.
func isBusy(err error) bool {
	if pgTransient(err) {
		var cu *commitUnknown
		return !errors.As(err, &cu)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return false
}

// isFull reports whether err is SQLite saying the disk is full.
func isFull(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL
}

// retryBusy runs f until it succeeds, fails with something other than a busy
// error, or total has passed; the wait between tries grows and is jittered so
// that processes do not retry in lockstep.
func retryBusy(ctx context.Context, total time.Duration, f func() error) error {
	deadline := time.Now().Add(total)
	wait := time.Millisecond
	for lost := 0; ; {
		err := f()
		// A connection to PostgreSQL that broke (a server restarted since it
		// was opened) is dropped from the pool: try again at once on
		// another, a few times. A server that is down fails to connect,
		// which is no lost connection, and ends the loop.
		if err != nil && lost < 10 && connLost(err) && !errors.As(err, new(*commitUnknown)) {
			lost++
			continue
		}
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		if err := cancel.Sleep(ctx, wait/2+rand.N(wait)); err != nil {
			return err
		}
		if wait < 100*time.Millisecond {
			wait *= 2
		}
	}
}

// IntegrityCheck runs SQLite's integrity check and returns what it found
// wrong, nothing when the database is sound. PostgreSQL keeps its own pages
// sound (and checks them with its own tools, such as amcheck): on it,
// IntegrityCheck only makes sure the server answers.
func (x *Index) IntegrityCheck(ctx context.Context) ([]string, error) {
	if x.pg {
		if err := x.read(ctx, func() error { return x.db.PingContext(ctx) }); err != nil {
			return nil, fmt.Errorf("integrity check: %w", err)
		}
		return nil, nil
	}
	lines, err := x.pragmaCheck(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return nil, fmt.Errorf("integrity check: %w", err)
	}
	return lines, nil
}

// CommitsSynced reports whether a commit waits for its log to reach stable
// storage (SQLite's synchronous=FULL): false with cas.SyncNone and with
// RecentKeysMayBeLostOnPowerCut.
func (x *Index) CommitsSynced(ctx context.Context) (bool, error) {
	var mode int
	if err := x.read(ctx, func() error { return x.db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&mode) }); err != nil {
		return false, fmt.Errorf("synchronous mode: %w", err)
	}
	return mode >= 2, nil
}
