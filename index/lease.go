package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/cancel"
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

// ErrSweepLockLost is returned by SweepLock.Held when the sweep lock's
// session ended (the server restarted, the connection broke or was
// terminated): writers may hold leases since.
var ErrSweepLockLost = errors.New("sweep lock lost")

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
//
// A gc whose sweep lock ended while it still deleted objects (its session
// was terminated, the server restarted) leaves a sweep fence in force
// until a time by the server's clock past which it deletes nothing more
// (see SweepLock.DeleteUnreferenced); AcquireBlobLease waits for the fence
// to pass before it returns.
type BlobLease struct {
	sessionLock
	key int64
	pid int64 // the lease's backend
}

// AcquireBlobLease takes a BlobLease, waiting while gc deletes a batch,
// and then while a sweep fence is in force, until ctx ends or wait has
// passed (0: ctx alone decides); past it, it fails with an error wrapping
// ErrSweepBusy.
func (x *Index) AcquireBlobLease(ctx context.Context, wait time.Duration) (*BlobLease, error) {
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	l := &BlobLease{sessionLock: sessionLock{x: x}, key: x.lockKey(sweepLockKey)}
	var left int64
	// blob_lease (migration 00007) takes the lock and reads the fence in
	// one round trip.
	conn, err := x.advisoryLock(ctx, `SELECT pid, fence_us FROM blob_lease(?)`, deadline,
		func() error {
			return fmt.Errorf("%w: a write waited %v for gc to end its sweep of a batch on %s", ErrSweepBusy, wait, x.path)
		}, &l.pid, &left)
	if err != nil {
		return nil, fmt.Errorf("blob lease: %w", err)
	}
	l.conn = conn
	if conn == nil {
		return l, nil
	}
	for left > 0 {
		// A lease held while a fence is in force: the gc that set it lost
		// its sweep lock mid-sweep and may still delete until then.
		d := time.Duration(left) * time.Microsecond
		if !deadline.IsZero() && time.Now().Add(d).After(deadline) {
			l.Release()
			return nil, fmt.Errorf("blob lease: %w: a gc that lost its sweep lock mid-sweep fences writes off for %v more, past the write's wait of %v on %s",
				ErrSweepBusy, d.Round(time.Millisecond), wait, x.path)
		}
		if err := cancel.Sleep(ctx, d); err != nil {
			l.Release()
			return nil, err
		}
		err := conn.QueryRowContext(ctx, `SELECT
			COALESCE((SELECT until_us FROM sweep_fence WHERE id = 1), 0) - (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`).Scan(&left)
		if err != nil {
			l.Release()
			return nil, fmt.Errorf("blob lease: read the sweep fence: %w", x.connError(err))
		}
	}
	return l, nil
}

// Held returns nil while the lease holds, and an error wrapping
// ErrLeaseLost once its session has ended.
func (l *BlobLease) Held(ctx context.Context) error {
	return l.heldOr(ctx, l.key, "", ErrLeaseLost)
}

// Release ends the lease; calling it again does nothing. A release the
// server does not answer drops the connection, which ends the lease as
// surely.
func (l *BlobLease) Release() error {
	return l.releaseSweep(`SELECT pg_advisory_unlock_shared(?)`)
}

type leaseKey struct{}

// WithBlobLease returns ctx carrying l: a write of the index under that
// context (Record) checks, in its transaction and after it holds the
// index's write lock, that the lease still holds, and fails with an error
// wrapping ErrLeaseLost, committing nothing, when it does not. So a row is
// committed only while the lease that covered its blob's put still holds,
// whatever becomes of the commit's answer.
func WithBlobLease(ctx context.Context, l *BlobLease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// checkBlobLease is the check WithBlobLease asks for, in tx.
func checkBlobLease(ctx context.Context, tx *sql.Tx) error {
	l, _ := ctx.Value(leaseKey{}).(*BlobLease)
	if l == nil || l.conn == nil {
		return nil
	}
	var held bool
	err := tx.QueryRowContext(ctx, heldSQL("?", "ShareLock"), l.pid, l.key>>32, l.key&0xffffffff).Scan(&held)
	switch {
	case err != nil:
		return err
	case !held:
		return fmt.Errorf("%w on %s: its session ended before the commit", ErrLeaseLost, l.x.path)
	}
	return nil
}

// SweepLock is gc's exclusive hold on the sweep lock: while it is held no
// writer holds a BlobLease. See BlobLease.
type SweepLock struct {
	sessionLock
	fence int64 // the sweep fence this lock set, 0 if none
}

// AcquireSweepLock takes the sweep lock exclusively, trying again with a
// short backoff while writers hold a BlobLease, until ctx ends or wait has
// passed (0: ctx alone decides); past it, it fails with an error wrapping
// ErrSweepBusy. It never waits in the server's lock queue, where it would
// hold up every writer asking for a lease behind it.
func (x *Index) AcquireSweepLock(ctx context.Context, wait time.Duration) (*SweepLock, error) {
	if !x.pg {
		return &SweepLock{sessionLock: sessionLock{x: x}}, nil
	}
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	pause := 2 * time.Millisecond
	for lost := 0; ; {
		conn, err := x.db.Conn(ctx)
		if err != nil {
			return nil, fmt.Errorf("sweep lock: %w", x.connError(err))
		}
		for {
			var ok bool
			// The column's name shows in pg_stat_activity what the session tries for.
			err = conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(?) AS sweep_lock`, x.lockKey(sweepLockKey)).Scan(&ok)
			if err != nil {
				break
			}
			if ok {
				return &SweepLock{sessionLock: sessionLock{x: x, conn: conn}}, nil
			}
			if x.sweepTried != nil {
				x.sweepTried()
			}
			if !deadline.IsZero() && time.Now().After(deadline) {
				conn.Close()
				return nil, fmt.Errorf("sweep lock: %w: gc waited %v for the writes holding blob leases to commit on %s", ErrSweepBusy, wait, x.path)
			}
			if err := cancel.Sleep(ctx, pause/2+rand.N(pause)); err != nil {
				conn.Close()
				return nil, err
			}
			pause = min(2*pause, 100*time.Millisecond)
		}
		dropConn(conn)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case connLost(err) && lost < 10:
			lost++
			continue
		}
		return nil, fmt.Errorf("sweep lock: %w", x.connError(err))
	}
}

// Held returns nil while the sweep lock is held, and an error wrapping
// ErrSweepLockLost once its session has ended.
func (l *SweepLock) Held(ctx context.Context) error {
	return l.heldOr(ctx, l.x.lockKey(sweepLockKey), "ExclusiveLock", ErrSweepLockLost)
}

// DeleteUnreferenced is Index.DeleteUnreferencedAt under the sweep lock.
// On PostgreSQL its transaction runs in the lock's own session, so that it
// commits only while the lock is held, and sets the sweep fence to window
// past the server's clock: from then until the fence passes or ClearFence
// clears it, a writer that takes a BlobLease (which it can only if the
// sweep lock ended) waits. The caller must delete the returned blobs'
// objects within window of a moment before it called, by its own clock,
// less a margin for the clocks' rates, and stop there.
func (l *SweepLock) DeleteUnreferenced(ctx context.Context, blobs []cas.Blob, cutoff, now time.Time, window time.Duration) ([]cas.Blob, error) {
	if l.conn == nil {
		return l.x.DeleteUnreferencedAt(ctx, blobs, cutoff, now)
	}
	var gone []cas.Blob
	err := retryBusy(ctx, l.x.retry, func() error {
		tx, err := l.conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := l.x.lockWrites(ctx, tx); err != nil {
			return err
		}
		if gone, err = deleteUnreferenced(ctx, tx, blobs, cutoff, now); err != nil {
			return err
		}
		var fence int64
		err = tx.QueryRowContext(ctx, `INSERT INTO sweep_fence (id, until_us)
			VALUES (1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint + ?)
			ON CONFLICT (id) DO UPDATE SET until_us = excluded.until_us RETURNING until_us`, window.Microseconds()).Scan(&fence)
		if err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		l.fence = fence
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete unreferenced blobs: %w", l.x.connError(err))
	}
	return gone, nil
}

// ClearFence ends the sweep fence DeleteUnreferenced set, unless another
// gc set one since: for a gc whose deletes of the batch have all returned.
func (l *SweepLock) ClearFence(ctx context.Context) error {
	if l.fence == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, gcUnlockTimeout)
	defer cancel()
	if _, err := l.x.db.ExecContext(ctx, `UPDATE sweep_fence SET until_us = 0 WHERE id = 1 AND until_us = ?`, l.fence); err != nil {
		return fmt.Errorf("clear the sweep fence: %w", l.x.connError(err))
	}
	l.fence = 0
	return nil
}

// Release releases the sweep lock; calling it again does nothing.
func (l *SweepLock) Release() error {
	return l.releaseSweep(`SELECT pg_advisory_unlock(?)`)
}

// advisoryLock runs q, a query taking the sweep lock whose row it scans
// into dest, on a connection of its own, trying again while the server's
// lock_timeout cuts the wait short, until ctx ends or the deadline (zero:
// none) has passed, when it returns busy(). It returns the connection that
// holds the lock, or nil on SQLite.
func (x *Index) advisoryLock(ctx context.Context, q string, deadline time.Time, busy func() error, dest ...any) (*sql.Conn, error) {
	if !x.pg {
		return nil, nil
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
		err = conn.QueryRowContext(actx, q, x.lockKey(sweepLockKey)).Scan(dest...)
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

// releaseSweep is the Release of a hold on the sweep lock: q releases it,
// shared or exclusive.
func (s *sessionLock) releaseSweep(q string) error {
	return s.release(q, s.x.lockKey(sweepLockKey), "release sweep lock",
		fmt.Errorf("release sweep lock on %s: %w", s.x.path, ErrLeaseLost))
}
