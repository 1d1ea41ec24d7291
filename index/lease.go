package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// sweepLockKey is the session-scoped advisory lock that writers of blobs
// to a shared object store hold shared from a blob's put to its row's
// commit, and gc exclusively while it re-checks and deletes a batch of
// objects. See BlobLease.
const sweepLockKey = writeLockKey + 3

// ErrLeaseLost is returned by BlobLease.Held when the lease's session
// ended before it was released (the server restarted, the connection
// broke): gc may have deleted objects since.
var ErrLeaseLost = errors.New("blob lease lost")

// ErrSweepBusy is returned by AcquireBlobLease and AcquireSweepLock when
// the sweep lock stayed taken for longer than they were told to wait.
var ErrSweepBusy = errors.New("sweep lock busy")

// A BlobLease is a writer's shared hold on the index's sweep lock, from
// before it stores a blob in a shared object store to after it commits the
// blob's row. gc takes the same lock exclusively (SweepLock) around its
// last look at a batch of candidates and their deletion, so that no writer
// is then between its put, which may have found the object already there,
// and its commit, which makes a row name it: gc never deletes an object a
// row is about to name. On SQLite, whose store is on one machine and locks
// with a file, it takes nothing.
//
// The lock is a PostgreSQL session advisory lock on a connection of the
// lease's own: a writer that dies frees it when its session ends, and a
// put that takes minutes holds it without a transaction left open.
type BlobLease struct {
	x    *Index
	conn *sql.Conn // nil on SQLite
	key  int64

	once sync.Once
	err  error
}

// AcquireBlobLease takes a BlobLease, waiting while gc deletes a batch,
// until ctx ends or wait has passed (0: ctx alone decides); past it, it
// fails with an error wrapping ErrSweepBusy.
func (x *Index) AcquireBlobLease(ctx context.Context, wait time.Duration) (*BlobLease, error) {
	conn, err := x.advisoryLock(ctx, `SELECT pg_advisory_lock_shared(?)`, wait)
	if err != nil {
		return nil, fmt.Errorf("index: blob lease: %w", err)
	}
	return &BlobLease{x: x, conn: conn, key: x.lockKey(sweepLockKey)}, nil
}

// Held returns nil while the lease holds, and an error wrapping
// ErrLeaseLost once its session has ended.
func (l *BlobLease) Held(ctx context.Context) error {
	if l.conn == nil {
		return nil
	}
	var held bool
	err := l.conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
		WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
		AND classid::bigint = ? AND objid::bigint = ? AND objsubid = 1)`, l.key>>32, l.key&0xffffffff).Scan(&held)
	switch {
	case err != nil:
		return fmt.Errorf("index: %w on %s: %w", ErrLeaseLost, l.x.path, l.x.connError(err))
	case !held:
		return fmt.Errorf("index: %w on %s", ErrLeaseLost, l.x.path)
	}
	return nil
}

// Release ends the lease; calling it again does nothing. A release the
// server does not answer drops the connection, which ends the lease as
// surely.
func (l *BlobLease) Release() error {
	if l.conn == nil {
		return nil
	}
	l.once.Do(func() { l.err = l.x.advisoryUnlock(l.conn, `SELECT pg_advisory_unlock_shared(?)`) })
	return l.err
}

// SweepLock is gc's exclusive hold on the sweep lock: while it is held no
// writer holds a BlobLease. See BlobLease.
type SweepLock struct {
	x    *Index
	conn *sql.Conn // nil on SQLite

	once sync.Once
	err  error
}

// AcquireSweepLock takes the sweep lock exclusively, waiting for the
// writers that hold a BlobLease to commit, until ctx ends or wait has
// passed (0: ctx alone decides); past it, it fails with an error wrapping
// ErrSweepBusy. Writers asking for a lease meanwhile wait behind it.
func (x *Index) AcquireSweepLock(ctx context.Context, wait time.Duration) (*SweepLock, error) {
	conn, err := x.advisoryLock(ctx, `SELECT pg_advisory_lock(?)`, wait)
	if err != nil {
		return nil, fmt.Errorf("index: sweep lock: %w", err)
	}
	return &SweepLock{x: x, conn: conn}, nil
}

// Release releases the sweep lock; calling it again does nothing.
func (l *SweepLock) Release() error {
	if l.conn == nil {
		return nil
	}
	l.once.Do(func() { l.err = l.x.advisoryUnlock(l.conn, `SELECT pg_advisory_unlock(?)`) })
	return l.err
}

// advisoryLock runs q, a statement taking the sweep lock, on a connection
// of its own, trying again while the server's lock_timeout cuts the wait
// short, until ctx ends or wait has passed. It returns the connection that
// holds the lock, or nil on SQLite.
func (x *Index) advisoryLock(ctx context.Context, q string, wait time.Duration) (*sql.Conn, error) {
	if !x.pg {
		return nil, nil
	}
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	busy := func() error {
		return fmt.Errorf("%w: waited %v on %s", ErrSweepBusy, wait, x.path)
	}
	for lost := 0; ; {
		conn, err := x.db.Conn(ctx)
		if err != nil {
			return nil, x.connError(err)
		}
		// The wait is bounded by the deadline as well as by the server's
		// lock_timeout, whichever comes first.
		actx, cancel := ctx, context.CancelFunc(func() {})
		if !deadline.IsZero() {
			actx, cancel = context.WithDeadline(ctx, deadline)
		}
		_, err = conn.ExecContext(actx, q, x.lockKey(sweepLockKey))
		timedOut := actx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return conn, nil
		}
		dropConn(conn)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case timedOut:
			return nil, busy()
		case connLost(err) && lost < 10:
			lost++
			continue
		case !isBusy(err):
			return nil, x.connError(err)
		case !deadline.IsZero() && time.Now().After(deadline):
			return nil, busy()
		}
	}
}

// advisoryUnlock runs q, which releases the sweep lock, on conn and
// returns conn to the pool; when the server does not answer, or says the
// lock was not held, it drops conn instead, which frees whatever it held.
func (x *Index) advisoryUnlock(conn *sql.Conn, q string) error {
	ctx, cancel := context.WithTimeout(context.Background(), gcUnlockTimeout)
	defer cancel()
	var ok bool
	err := conn.QueryRowContext(ctx, q, x.lockKey(sweepLockKey)).Scan(&ok)
	switch {
	case err != nil:
		dropConn(conn)
		return fmt.Errorf("index: release sweep lock: %w", x.connError(err))
	case !ok:
		dropConn(conn)
		return fmt.Errorf("index: release sweep lock on %s: %w", x.path, ErrLeaseLost)
	}
	return conn.Close()
}
