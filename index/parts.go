package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
)

// NewPart is a part to record: its logical key and columns, and the blob its
// bytes were stored in.
type NewPart struct {
	// Key is the rendered logical key, with the run (escaped) as its first
	// element and the blob's extension last. When the run already uses it
	// for a different (step, tool, call id, part), Record records the part
	// under the key with "~2" (or "~3", …) before the extension instead.
	Key      string
	Run      string
	Step     int
	Tool     string
	CallID   string
	Part     int // position in the result, -1 when the result has one part
	Kind     catalog.Kind
	MIME     string
	Filename string
	Chars    int64 // code points of a text part
	Bytes    int64
	Blob     cas.Blob
	// RunTTL, when set, is the run's own retention: how long after its
	// newest part the run may be removed whole (PruneOptions.Expired). The
	// latest a write of the run gives is the run's; 0 leaves it as it is.
	RunTTL time.Duration
}

// Recorded says what Record did with one part.
type Recorded struct {
	ID int64
	// Key is the key recorded: NewPart.Key, or it with a "~N" suffix when
	// NewPart.Key was taken by another call.
	Key     string
	Version int
	// SameAs is the oldest other key of the same run whose part has the same
	// blob, or "" when there is none.
	SameAs string
	// CreatedAt is the time stamped on the row.
	CreatedAt time.Time
}

// Part is a recorded part.
type Part = catalog.Part

// partRow is a row of the parts table joined with its blob.
type partRow struct {
	ID        int64  `db:"id"`
	Key       string `db:"key"`
	Run       string `db:"run"`
	Step      int    `db:"step"`
	Tool      string `db:"tool"`
	CallID    string `db:"call_id"`
	Part      int    `db:"part"`
	Version   int    `db:"version"`
	Kind      string `db:"kind"`
	MIME      string `db:"mime"`
	Filename  string `db:"filename"`
	Chars     int64  `db:"chars"`
	Bytes     int64  `db:"bytes"`
	Digest    []byte `db:"digest"`
	Ext       string `db:"ext"`
	CreatedAt int64  `db:"created_at"`
}

// partColumns gives a part's full key and run name from its runs row.
const partColumns = `p.id, (SELECT prefix FROM runs WHERE id = p.run_id) || p.key AS key,
	(SELECT name FROM runs WHERE id = p.run_id) AS run, p.step, p.tool, p.call_id, p.part, p.version, p.kind, p.mime,
	p.filename, p.chars, p.bytes, b.digest, b.ext, p.created_at`

func (r partRow) part() (Part, error) {
	if len(r.Digest) != cas.DigestSize {
		return Part{}, fmt.Errorf("part %d has a %d-byte digest", r.ID, len(r.Digest))
	}
	return Part{
		ID: r.ID, Key: r.Key, Run: r.Run, Step: r.Step, Tool: r.Tool, CallID: r.CallID, Part: r.Part,
		Version: r.Version, Kind: catalog.Kind(r.Kind), MIME: r.MIME, Filename: r.Filename, Chars: r.Chars,
		Bytes: r.Bytes, Blob: cas.Blob{Digest: cas.Digest(r.Digest), Ext: r.Ext},
		CreatedAt: time.Unix(0, r.CreatedAt),
	}, nil
}

// parts returns the Parts the rows read say, or an error for a damaged
// row.
func parts(rows []partRow) ([]Part, error) {
	return convertRows(rows, partRow.part)
}

// Limits on what a row may hold; longer values are refused, not cut.
const (
	maxKeyLen = 1024
	maxRunLen = 256
	// maxSuffix bounds the search for a free key: more calls than this
	// rendering alike in one run means something is wrong with the caller.
	maxSuffix  = 1000
	maxTextLen = 64 << 10
)

// CheckPart returns the error Record would give for p, so that a writer can
// refuse a part before it stores its blob. p.Blob's digest is not checked.
func CheckPart(p NewPart) error { return checkPart(p) }

// keyInRun reports whether a key's first element is the run, percent-escaped
// as keys escape it, or, for a long run, shortened to a prefix of it, '~'
// and a hash.
func keyInRun(key, run string) bool {
	first, _, ok := strings.Cut(key, "/")
	if !ok || first == "" {
		return false
	}
	if r, err := url.PathUnescape(first); err == nil && r == run {
		return true
	}
	i := strings.LastIndexByte(first, '~')
	if i < 0 {
		return false
	}
	r, err := url.PathUnescape(first[:i])
	return err == nil && strings.HasPrefix(run, r)
}

func checkPart(p NewPart) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidPart, clip(p.Key), fmt.Sprintf(format, args...))
	}
	switch {
	case p.Key == "" || len(p.Key) > maxKeyLen:
		return bad("key must have 1 to %d bytes", maxKeyLen)
	case !utf8.ValidString(p.Key) || strings.ContainsAny(p.Key, "\x00\n\r"):
		return bad("key must be one line of UTF-8")
	case p.Run == "" || len(p.Run) > maxRunLen || !utf8.ValidString(p.Run) || strings.IndexByte(p.Run, 0) >= 0:
		return bad("run %q must be 1 to %d bytes of UTF-8 without NUL", clip(p.Run), maxRunLen)
	case !keyInRun(p.Key, p.Run):
		return bad("key does not start with its run %q", clip(p.Run))
	case p.Step < 0:
		return bad("negative step %d", p.Step)
	case p.Part < -1:
		return bad("part position %d", p.Part)
	case p.Kind != catalog.KindText && p.Kind != catalog.KindImage && p.Kind != catalog.KindFile:
		return bad("unknown kind %q", p.Kind)
	case p.Bytes < 0 || p.Chars < 0:
		return bad("negative size")
	case p.RunTTL < 0:
		return bad("negative run ttl %v", p.RunTTL)
	case len(p.Tool) > maxTextLen || len(p.CallID) > maxTextLen || len(p.MIME) > maxTextLen || len(p.Filename) > maxTextLen:
		return bad("a column is over %d bytes", maxTextLen)
	}
	if err := cas.CheckExt(p.Blob.Ext); err != nil {
		return bad("%v", err)
	}
	return nil
}

const (
	// insertBlobSQL (prepared with returningID) makes a blob row, and no
	// row when the blob has one; touchBlobSQL then refreshes its
	// last-referenced time and returns its id. A new row is charged to the
	// counts row of the (run id, tool) whose part is about to use it, when
	// that group has one: the counters then change in that row alone,
	// which the part's insert changes anyway, and not in unused_blobs as
	// well, which a blob no group is charged with is counted in. The row is
	// looked for and made in one statement of a write transaction, which
	// holds the write lock: a (digest, ext) has one row, which no unique
	// index keeps (see digest.go). Its values are cast so that PostgreSQL
	// knows their types (BLOB is BYTEA there: see prepare).
	insertBlobSQL = `INSERT INTO blobs (digest, ext, size, first_stored, last_referenced, counted_in)
		SELECT CAST(? AS BLOB), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT),
			(SELECT id FROM counts WHERE run_id = ? AND tool = ?)
		WHERE NOT EXISTS (SELECT 1 FROM blobs WHERE ` + digestIs + ` AND ext = ?)`
	touchBlobSQL = `UPDATE blobs SET last_referenced = ? WHERE ` + digestIs + ` AND ext = ? RETURNING id`
	// insertNewKeySQL inserts a part as version 1 of its key (its runs row
	// id, then the key's rest, …, then its key's rest and prefix again)
	// unless a row of any run has the key: the usual step's part, whose key
	// is new, is recorded without a lookup of its own (freeKey's).
	insertNewKeySQL = `INSERT INTO parts (run_id, key, step, tool, call_id, part, version, kind, mime, filename,
		chars, bytes, blob_id, created_at)
		SELECT CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT), 1,
			CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT),
			CAST(? AS BIGINT)
		WHERE NOT EXISTS (SELECT 1 FROM parts p JOIN runs r ON r.id = p.run_id WHERE p.key = ? AND r.prefix = ?)`
	insertPartSQL = `INSERT INTO parts (run_id, key, step, tool, call_id, part, version, kind, mime, filename,
		chars, bytes, blob_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// runIDSQL finds the runs row of a run whose keys start with a prefix;
	// insertRunSQL makes it.
	runIDSQL     = `SELECT id FROM runs WHERE name = ? AND prefix = ?`
	insertRunSQL = `INSERT INTO runs (name, prefix) VALUES (?, ?) RETURNING id`
	// keyOwnerSQL returns the newest version of a key (its prefix, then the
	// rest) and the call that owns it: every version of a key belongs to one
	// (run, step, tool, call id, part).
	keyOwnerSQL = `SELECT p.version, r.name, p.step, p.tool, p.call_id, p.part FROM parts p JOIN runs r ON r.id = p.run_id
		WHERE p.key = ? AND r.prefix = ? ORDER BY p.version DESC LIMIT 1`
	// sameAsSQL takes a blob id, a run name and the part's own runs row id
	// and key rest.
	sameAsSQL = `SELECT (SELECT prefix FROM runs WHERE id = p.run_id) || p.key FROM parts p
		WHERE p.blob_id = ? AND p.run_id IN (SELECT id FROM runs WHERE name = ?) AND NOT (p.run_id = ? AND p.key = ?)
		ORDER BY p.id LIMIT 1`
)

// Record records parts and their blobs in one transaction: all or none. A
// key that the same (step, tool, call id, part) wrote before gets a new
// version; the key then resolves to the newest. A key that a different
// call wrote is not reused: the part gets the first of key~2, key~3, … that
// is free or its own, decided inside the write transaction so that
// concurrent writers in many processes agree. Each blob's last-referenced
// time is refreshed. On PostgreSQL, an error that is ErrCommitUnknown means
// the commit's answer was lost: the parts may or may not have been recorded.
func (x *Index) Record(ctx context.Context, ps []NewPart) ([]Recorded, error) {
	return x.recordWhenReady(ctx, ps, nil)
}

// recordWhenReady is Record for a writer whose blobs are still being made
// durable: it runs the transaction's statements, then calls ready, and
// commits only once ready returns nil; an error from ready rolls the
// transaction back and is returned, wrapped. The statements' work so
// overlaps the blobs' writes and syncs, and no row is visible before
// ready says its blob is in place. ready may be called more than once
// (a transaction retried while other processes held the lock), and must
// return the same answer each time. A nil ready commits at once.
func (x *Index) recordWhenReady(ctx context.Context, ps []NewPart, ready func() error) ([]Recorded, error) {
	var gather func() ([]NewPart, error)
	if ready != nil {
		gather = func() ([]NewPart, error) { return nil, ready() }
	}
	return x.recordGathering(ctx, ps, gather, nil)
}

// recordGathering is recordWhenReady for a writer that gathers the parts of
// other writes into its transaction: once the statements of ps have run,
// gather is called, and the parts it returns are recorded in the same
// transaction, after those before them; it is called again until it
// returns none, and then the transaction commits (an error rolls it back
// and is returned, wrapped). The Recorded are in the order of ps and then
// of what gather returned. If the transaction is retried, every part
// gathered so far is recorded again before gather is called anew. A nil
// gather commits at once.
// syncLog is as RecordGatheringLogUnsynced says, nil for a commit that
// syncs as the index does.
func (x *Index) recordGathering(ctx context.Context, ps []NewPart, gather func() ([]NewPart, error),
	logSync func() bool) ([]Recorded, error) {
	ps, err := recordable(ps)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	var (
		out     []Recorded
		newRuns map[runKey]int64
		all     = ps // every part gathered so far
	)
	// syncLog, with logSync, is logSync's answer (see writeTx).
	var syncLog *bool
	if logSync != nil {
		syncLog = new(bool)
	}
	err = x.writeTx(ctx, syncLog, func(tx *sql.Tx) error {
		out = make([]Recorded, 0, len(all))
		r := x.newRecorder(tx, x.now().UnixNano())
		newRuns = r.newRuns
		record := func(p NewPart) error {
			rec, err := r.record(ctx, p)
			if err == nil {
				out = append(out, rec)
			}
			return err
		}
		for batch := all; ; {
			for _, p := range batch {
				if err := record(p); err != nil {
					return err
				}
			}
			var more []NewPart
			if gather != nil {
				if more, err = gather(); err != nil {
					return err
				}
			}
			if len(more) == 0 {
				if logSync != nil {
					*syncLog = logSync()
				}
				return nil
			}
			if batch, err = recordable(more); err != nil {
				return err
			}
			all = append(all[:len(all):len(all)], batch...)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	x.runs.add(newRuns)
	return out, nil
}

// A recorder runs the statements that record parts in one transaction.
// Each statement is bound to the transaction when first needed: a step of
// a known run, a new key and new content runs two, the blob's insert and
// the part's.
type recorder struct {
	x   *Index
	tx  *sql.Tx
	now int64
	// newRuns are the runs' rows the transaction made; ttls the runs rows'
	// ttls it set.
	newRuns map[runKey]int64
	ttls    map[int64]time.Duration

	keyOwner, runID, insertRun, insertBlob, touchBlob, sameAsKey, insertNewKey, insertPart *sql.Stmt
	savepoint, release                                                                     *sql.Stmt
	insertStaged, stagedRows                                                               *sql.Stmt
}

func (x *Index) newRecorder(tx *sql.Tx, now int64) *recorder {
	return &recorder{x: x, tx: tx, now: now, newRuns: map[runKey]int64{}}
}

func (r *recorder) stmt(ctx context.Context, st **sql.Stmt, prepared *sql.Stmt) *sql.Stmt {
	if *st == nil {
		*st = r.tx.StmtContext(ctx, prepared)
	}
	return *st
}

// record runs one part's statements.
func (r *recorder) record(ctx context.Context, p NewPart) (Recorded, error) {
	x, now := r.x, r.now
	// A key's suffix goes before its extension: every key tried has
	// p.Key's prefix, and its run's row.
	prefix, rest := splitKey(p.Key)
	rk := runKey{p.Run, prefix}
	run, known := x.runs.get(rk)
	if !known {
		run, known = r.newRuns[rk]
	}
	if !known {
		err := r.stmt(ctx, &r.runID, x.stmts.runID).QueryRowContext(ctx, p.Run, prefix).Scan(&run)
		if errors.Is(err, sql.ErrNoRows) {
			err = r.stmt(ctx, &r.insertRun, x.stmts.insertRun).QueryRowContext(ctx, p.Run, prefix).Scan(&run)
		}
		if err != nil {
			return Recorded{}, fmt.Errorf("run %s: %w", clip(p.Run), err)
		}
		r.newRuns[rk] = run
	}
	if p.RunTTL > 0 && r.ttls[run] != p.RunTTL {
		if _, err := r.tx.ExecContext(ctx, `UPDATE runs SET ttl = ? WHERE id = ?`, int64(p.RunTTL), run); err != nil {
			return Recorded{}, fmt.Errorf("run %s: ttl: %w", clip(p.Run), err)
		}
		if r.ttls == nil {
			r.ttls = map[int64]time.Duration{}
		}
		r.ttls[run] = p.RunTTL
	}
	// A new blob is charged to the part's group as it is made (see
	// insertBlobSQL); no other part can use it yet, so there is no same
	// content to look for. had: the blob's row was there before.
	blobID, had, err := x.makeBlobRow(ctx, r.stmt(ctx, &r.insertBlob, x.stmts.insertBlob), func() *sql.Stmt {
		return r.stmt(ctx, &r.touchBlob, x.stmts.touchBlob)
	}, p.Blob, p.Bytes, run, p.Tool, now)
	if err != nil {
		return Recorded{}, err
	}
	key, version := p.Key, 1
	id, inserted, err := x.insertNew(ctx, r.stmt(ctx, &r.insertNewKey, x.stmts.insertNewKey), run, rest, p.Step, p.Tool,
		p.CallID, p.Part, string(p.Kind), p.MIME, p.Filename, p.Chars, p.Bytes, blobID, now, rest, prefix)
	if err != nil {
		return Recorded{}, fmt.Errorf("insert %s: %w", p.Key, err)
	}
	if !inserted {
		if key, version, err = freeKey(ctx, r.stmt(ctx, &r.keyOwner, x.stmts.keyOwner), p); err != nil {
			return Recorded{}, err
		}
		_, rest = splitKey(key)
		id, err = x.insertID(ctx, r.stmt(ctx, &r.insertPart, x.stmts.insertPart), run, rest, p.Step, p.Tool, p.CallID, p.Part,
			version, string(p.Kind), p.MIME, p.Filename, p.Chars, p.Bytes, blobID, now)
		if err != nil {
			return Recorded{}, fmt.Errorf("insert %s: %w", key, err)
		}
	}
	p.Key = key
	// The part's own key is left out: looking after its insert finds what
	// looking before it would have.
	var sameAs sql.NullString
	if had {
		err = r.stmt(ctx, &r.sameAsKey, x.stmts.sameAs).QueryRowContext(ctx, blobID, p.Run, run, rest).Scan(&sameAs)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return Recorded{}, fmt.Errorf("same content as %s: %w", p.Key, err)
		}
	}
	return Recorded{ID: id, Key: p.Key, Version: version, SameAs: sameAs.String, CreatedAt: time.Unix(0, now)}, nil
}

// recordable returns ps as Record stores them, or the error of the first
// part that cannot be recorded.
func recordable(ps []NewPart) ([]NewPart, error) {
	ps = storableParts(ps)
	for _, p := range ps {
		if err := checkPart(p); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// makeBlobRow makes the row of blob b, of size bytes, with insert
// (insertBlobSQL), charged to the group of runs row run and tool when it
// has one, or, when b has a row, refreshes its last-referenced time with
// touch's statement (touchBlobSQL), and returns its id and whether it was
// there before.
func (x *Index) makeBlobRow(ctx context.Context, insert *sql.Stmt, touch func() *sql.Stmt, b cas.Blob, size, run int64, tool string,
	now int64) (int64, bool, error) {
	id, inserted, err := x.insertNew(ctx, insert, b.Digest[:], b.Ext, size, now, now, run, tool,
		digestKey(b.Digest), b.Digest[:], b.Ext)
	had := err == nil && !inserted
	if had {
		err = touch().QueryRowContext(ctx, now, digestKey(b.Digest), b.Digest[:], b.Ext).Scan(&id)
	}
	if err != nil {
		return 0, false, fmt.Errorf("blob %s: %w", b, err)
	}
	return id, had, nil
}

// runKey names a runs row: a run and the first element of its keys.
type runKey struct{ name, prefix string }

// runCache remembers the ids of runs rows that Record used, committed: a
// runs row is never deleted or changed once made, so that its id, once
// seen committed, stays right, and a step of a known run costs no lookup.
type runCache struct {
	mu  sync.Mutex
	ids map[runKey]int64
}

// maxCachedRuns bounds the cache; past it, it starts again empty.
const maxCachedRuns = 4096

func (c *runCache) get(k runKey) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.ids[k]
	return id, ok
}

// add remembers the runs rows of a committed transaction.
func (c *runCache) add(m map[runKey]int64) {
	if len(m) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil || len(c.ids)+len(m) > maxCachedRuns {
		c.ids = make(map[runKey]int64, len(m))
	}
	for k, id := range m {
		c.ids[k] = id
	}
}

// insertNew runs an INSERT … SELECT … WHERE NOT EXISTS (insertNewKeySQL,
// insertBlobSQL), prepared with returningID, and returns the new row's id,
// or false when it inserted none.
func (x *Index) insertNew(ctx context.Context, st *sql.Stmt, args ...any) (int64, bool, error) {
	if x.pg {
		var id int64
		err := st.QueryRowContext(ctx, args...).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		return id, err == nil, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, false, err
	}
	id, err := res.LastInsertId()
	return id, err == nil, err
}

// freeKey finds the key a part is recorded under, and its version: the
// first of p.Key, p.Key~2, p.Key~3, … that no row uses or that the part's
// own call uses.
func freeKey(ctx context.Context, keyOwner *sql.Stmt, p NewPart) (string, int, error) {
	for n := 1; n <= maxSuffix; n++ {
		key := suffixed(p.Key, p.Blob.Ext, n)
		var (
			version, step, part int
			run, tool, callID   string
		)
		prefix, rest := splitKey(key)
		err := keyOwner.QueryRowContext(ctx, rest, prefix).Scan(&version, &run, &step, &tool, &callID, &part)
		if errors.Is(err, sql.ErrNoRows) {
			return key, 1, nil
		}
		if err != nil {
			return "", 0, fmt.Errorf("owner of %s: %w", clip(key), err)
		}
		if run == p.Run && step == p.Step && tool == p.Tool && callID == p.CallID && part == p.Part {
			return key, version + 1, nil
		}
	}
	return "", 0, fmt.Errorf("%w %q: %d other calls of the run use this key", ErrInvalidPart, clip(p.Key), maxSuffix)
}

// splitKey splits a key into what its runs row holds, the first element and
// its '/' ("" when it has none), and what its parts row holds, the rest.
func splitKey(key string) (prefix, rest string) {
	i := strings.IndexByte(key, '/')
	return key[:i+1], key[i+1:]
}

// suffixed returns key with "~n" before its extension ext, or key itself
// for n < 2.
func suffixed(key, ext string, n int) string {
	if n < 2 {
		return key
	}
	base, ok := strings.CutSuffix(key, ext)
	if !ok {
		base, ext = key, ""
	}
	return base + "~" + strconv.Itoa(n) + ext
}

// write runs f in a write transaction, retrying the whole transaction while
// other processes hold the lock. On PostgreSQL the transaction first takes
// the writers' advisory lock (see writeLockKey).
func (x *Index) write(ctx context.Context, f func(*sql.Tx) error) error {
	return x.writeTx(ctx, nil, f)
}

// writeTx is write; with syncLog, the transaction commits without syncing
// the log, on the index's connection for that (see logUnsynced), and the
// log is synced after the commit only if f sets *syncLog.
func (x *Index) writeTx(ctx context.Context, syncLog *bool, f func(*sql.Tx) error) error {
	// The steps staged are folded in the transaction itself (see commitTx).
	x.settleQueue()
	// What RecordQueued knows of runs may not hold once f ran.
	defer x.forgetRuns()
	err := retryBusy(ctx, x.retry, func() error {
		if syncLog != nil {
			return x.commitLogUnsynced(ctx, syncLog, f)
		}
		return x.commitTx(ctx, x.db, f)
	})
	if isFull(err) {
		return fmt.Errorf("%w: %w", cas.ErrDiskFull, err)
	}
	return x.connError(err)
}

// beginner is what a transaction begins on: the pool or one connection.
type beginner interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}

// commitTx runs f in a transaction begun on b and commits it.
func (x *Index) commitTx(ctx context.Context, b beginner, f func(*sql.Tx) error) error {
	var beginErr error
	begin := func() (*sql.Tx, error) {
		tx, err := b.BeginTx(ctx, nil)
		if err == nil && x.pg {
			if err = x.lockWrites(ctx, tx); err == nil {
				err = checkBlobLease(ctx, tx) // see WithBlobLease
			}
			if err != nil {
				tx.Rollback()
			}
		}
		beginErr = err
		return tx, err
	}
	// No write decides without the steps staged before it (see staged.go).
	tx, _, dropped, err := x.foldFirst(ctx, begin, 0)
	switch {
	case err != nil && err == beginErr:
		return err
	case err != nil:
		return fmt.Errorf("fold staged steps: %w", err)
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		if x.pg && (connLost(err) || ctx.Err() != nil) {
			return &commitUnknown{err}
		}
		return err
	}
	if dropped != nil {
		x.queue.note(dropped)
	}
	return nil
}

// ListOptions filters List. The zero value lists the newest version of every
// key, newest first.
type ListOptions struct {
	Run   string
	Tool  string
	Kind  catalog.Kind
	Since time.Time // only parts created at or after
	Limit int       // 0: no limit
	// AllVersions lists every version of each key, not only the newest.
	AllVersions bool
}

// List returns the parts matching o, newest first.
func (x *Index) List(ctx context.Context, o ListOptions) ([]Part, error) {
	if !storableText(o.Run) {
		return nil, nil // Record refuses such a run
	}
	o.Tool = storable(o.Tool)
	if o.Run == "" && o.Limit > 0 {
		return x.listNewest(ctx, o)
	}
	return x.listAll(ctx, o)
}

// listAll returns the parts matching o, newest first, in one query: the
// run's index serves a run's parts in order; without a run every part is
// read and sorted.
func (x *Index) listAll(ctx context.Context, o ListOptions) ([]Part, error) {
	var (
		where []string
		args  []any
	)
	if o.Run != "" {
		// The run's ids are looked up first so that the usual one id is an
		// equality, which the run's index serves in created order.
		ids, err := x.runIDs(ctx, o.Run)
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		if len(ids) == 0 {
			return nil, nil
		}
		where = append(where, "p.run_id IN "+placeholders(len(ids)))
		args = append(args, idArgs(ids)...)
		if len(ids) == 1 {
			where[len(where)-1] = "p.run_id = ?"
		}
	}
	if o.Tool != "" {
		where = append(where, "p.tool = ?")
		args = append(args, o.Tool)
	}
	if o.Kind != "" {
		where = append(where, "p.kind = ?")
		args = append(args, string(o.Kind))
	}
	if !o.Since.IsZero() {
		where = append(where, "p.created_at >= ?")
		args = append(args, o.Since.UnixNano())
	}
	if !o.AllVersions {
		where = append(where, "NOT EXISTS (SELECT 1 FROM parts n WHERE n.key = p.key AND n.run_id = p.run_id AND n.version > p.version)")
	}
	q := `SELECT ` + partColumns + ` FROM parts p JOIN blobs b ON b.id = p.blob_id`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY p.created_at DESC, p.id DESC`
	if o.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, o.Limit)
	}
	rows, err := selectRows[partRow](ctx, x, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return parts(rows)
}

// runIDs returns the ids of a run's rows in runs: one for each way its
// keys were rendered, usually one.
func (x *Index) runIDs(ctx context.Context, run string) ([]int64, error) {
	return selectRows[int64](ctx, x, `SELECT id FROM runs WHERE name = ? ORDER BY id`, run)
}

// read runs a query, retrying while a checkpoint or recovery holds the lock.
func (x *Index) read(ctx context.Context, f func() error) error {
	if ctx.Value(withoutFoldKey{}) != nil {
		x.settleQueue()
	} else {
		// A fold that fails (on a full disk, say) leaves the steps staged,
		// nothing of them lost, for the next read or write to fold: the
		// read goes on without them.
		x.settle()
	}
	return x.connError(retryBusy(ctx, x.retry, f))
}

// readTx runs f in a read-only transaction, retried as read retries: the
// queries of f read one snapshot, whatever writers commit meanwhile.
func (x *Index) readTx(ctx context.Context, f func(tx *sqlx.Tx) error) error {
	return x.read(ctx, func() error {
		tx, err := x.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		return f(tx)
	})
}

// Sharing returns every part, in any run and any version, whose bytes are
// in blob b, oldest first.
func (x *Index) Sharing(ctx context.Context, b cas.Blob) ([]Part, error) {
	rows, err := selectRows[partRow](ctx, x, `SELECT `+partColumns+` FROM blobs b JOIN parts p ON p.blob_id = b.id
		WHERE `+blobDigestIs+` AND b.ext = ? ORDER BY p.id`, digestKey(b.Digest), b.Digest[:], b.Ext)
	if err != nil {
		return nil, fmt.Errorf("parts sharing %s: %w", b, err)
	}
	return parts(rows)
}

// SharingFirst returns limit of the parts, in any run and any version,
// whose bytes are in blob b, by run and oldest first within a run (0: all,
// as Sharing): for a blob that very many parts share, a page of them read
// without reading the rest. Blob's Parts counts them all. On SQLite the
// page is each run's oldest; on PostgreSQL, whose index of a blob's parts
// keeps them by run only, those first in the table, almost always the
// oldest too.
func (x *Index) SharingFirst(ctx context.Context, b cas.Blob, limit int) ([]Part, error) {
	if limit <= 0 {
		return x.Sharing(ctx, b)
	}
	// The ids are the first entries of the blob's index, in its order: no
	// sharing row beyond the page is read or sorted.
	args := []any{digestKey(b.Digest), b.Digest[:], b.Ext, limit}
	var (
		rows []partRow
		err  error
	)
	if !x.pg {
		rows, err = selectRows[partRow](ctx, x, sharingFirstSQL, args...)
	} else {
		// PostgreSQL plans the page for the few parts an average blob has:
		// every entry of the blob's, read by bitmap and sorted, however
		// many parts share it. Without bitmap scans it walks parts_blob.
		err = x.readTx(ctx, func(tx *sqlx.Tx) error {
			rows = rows[:0]
			if _, err := tx.ExecContext(ctx, walkIndexSQL); err != nil {
				return err
			}
			return tx.SelectContext(ctx, &rows, sharingFirstSQL, args...)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("parts sharing %s: %w", b, err)
	}
	return parts(rows)
}

// sharingPageSQL is the ids of SharingFirst's page, a walk of parts_blob
// in its order that stops at the limit: by run, and within a run by id on
// SQLite, whose index entries end with the row's id, and by place in the
// table on PostgreSQL, whose index has no id to order by.
const sharingPageSQL = `SELECT q.id FROM parts q WHERE q.blob_id = (SELECT id FROM blobs WHERE ` + digestIs + ` AND ext = ?)
		ORDER BY q.blob_id, q.run_id LIMIT ?`

// walkIndexSQL keeps PostgreSQL, for the rest of a transaction, from
// reading an index by bitmap, which reads all of its entries that match
// and sorts them.
const walkIndexSQL = `SET LOCAL enable_bitmapscan = off`

const sharingFirstSQL = `SELECT ` + partColumns + ` FROM parts p JOIN blobs b ON b.id = p.blob_id
	WHERE p.id IN (` + sharingPageSQL + `)
	ORDER BY p.run_id, p.id`

// Versions returns every version of a key, newest first.
func (x *Index) Versions(ctx context.Context, key string) ([]Part, error) {
	prefix, rest := splitKey(key)
	rows, err := selectRows[partRow](ctx, x, `SELECT `+partColumns+` FROM parts p JOIN blobs b ON b.id = p.blob_id
		WHERE p.key = ? AND (SELECT prefix FROM runs WHERE id = p.run_id) = ? ORDER BY p.version DESC`, rest, prefix)
	if err != nil {
		return nil, fmt.Errorf("versions of %s: %w", clip(key), err)
	}
	return parts(rows)
}

func clip(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
