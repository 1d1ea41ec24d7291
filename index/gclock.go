package index

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrGCLockLost is returned by GCLock.Held when the gc lock is no longer
// held: its session ended (the server restarted, the connection broke or was
// terminated), so another gc may have started.
var ErrGCLockLost = errors.New("gc lock lost")

// gcUnlockTimeout bounds how long releasing the gc lock waits for the
// server; a release that does not answer in time drops the connection,
// which frees the lock as surely.
const gcUnlockTimeout = 10 * time.Second

// GCLock is the index's gc lock, held until Release. See AcquireGCLock.
type GCLock struct {
	sessionLock
}

// lockGC takes the index's gc lock, as AcquireGCLock does, and returns the
// function that releases it.
func (x *Index) lockGC(ctx context.Context) (release func() error, err error) {
	l, err := x.AcquireGCLock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// AcquireGCLock takes the index's gc lock, so that one gc at a time runs on
// an index that many machines share. On PostgreSQL it is a session advisory
// lock (pg_try_advisory_lock) held on a connection of its own until Release
// is called, or until that connection's session ends: a gc that dies frees
// it (the server notices a machine that died by TCP keepalive; see Open). A
// long gc checks with Held that it still has it before it deletes. It
// returns ErrGCRunning at once when another session holds it. On SQLite,
// whose store is on one machine and locks gc with a file, it takes nothing,
// and Held and Release do nothing.
func (x *Index) AcquireGCLock(ctx context.Context) (*GCLock, error) {
	if !x.pg {
		return &GCLock{sessionLock{x: x}}, nil
	}
	conn, err := x.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock gc: %w", x.connError(err))
	}
	var ok bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(?)`, x.lockKey(gcLockKey)).Scan(&ok); err != nil {
		dropConn(conn)
		return nil, fmt.Errorf("lock gc: %w", x.connError(err))
	}
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("%w on %s", ErrGCRunning, x.path)
	}
	return &GCLock{sessionLock{x: x, conn: conn}}, nil
}

// Held returns nil when the lock is still held, ErrGCLockLost (or the
// error that kept it from telling) when it is not, or after Release.
func (l *GCLock) Held(ctx context.Context) error {
	if l.conn == nil {
		return nil
	}
	held, err := l.holds(ctx, l.x.lockKey(gcLockKey), "")
	switch {
	case err != nil && errors.Is(err, sql.ErrConnDone):
		return fmt.Errorf("%w on %s: released", ErrGCLockLost, l.x.path)
	case err != nil && (connLost(err) || errors.Is(l.x.connError(err), ErrUnreachable)):
		return fmt.Errorf("%w on %s: %w", ErrGCLockLost, l.x.path, l.x.connError(err))
	case err != nil:
		return fmt.Errorf("check gc lock: %w", l.x.connError(err))
	case !held:
		return fmt.Errorf("%w on %s", ErrGCLockLost, l.x.path)
	}
	return nil
}

// Release releases the lock; calling it again does nothing. When the
// server does not answer in time, or says the lock was not held, the
// connection is dropped rather than returned to the pool, which ends its
// session and with it any lock it still held.
func (l *GCLock) Release() error {
	return l.release(`SELECT pg_advisory_unlock(?)`, l.x.lockKey(gcLockKey), "unlock gc",
		fmt.Errorf("unlock gc: %w on %s", ErrGCLockLost, l.x.path))
}

// sessionLock is what GCLock, BlobLease and SweepLock share: an advisory
// lock that a PostgreSQL session of its own holds, on conn, until it is
// released, once, or the session ends. On SQLite conn is nil and nothing
// is held.
type sessionLock struct {
	x    *Index
	conn *sql.Conn // nil on SQLite

	once sync.Once
	err  error
}

// heldSQL is the query of whether the backend pid (an expression:
// pg_backend_pid() for the asking session's own) holds the advisory lock
// whose key's halves are its last two parameters, in mode when mode is not
// empty, as pg_locks shows it.
func heldSQL(pid, mode string) string {
	q := `SELECT EXISTS (SELECT 1 FROM pg_locks
		WHERE locktype = 'advisory' AND pid = ` + pid + ` AND granted`
	if mode != "" {
		q += ` AND mode = '` + mode + `'`
	}
	return q + `
		AND classid::bigint = ? AND objid::bigint = ? AND objsubid = 1)`
}

// holds reports whether the lock's session holds the advisory lock key, in
// mode when mode is not empty.
func (s *sessionLock) holds(ctx context.Context, key int64, mode string) (bool, error) {
	var held bool
	err := s.conn.QueryRowContext(ctx, heldSQL("pg_backend_pid()", mode), key>>32, key&0xffffffff).Scan(&held)
	return held, err
}

// heldOr is Held for a lock lost only with its session: nil while the
// session holds key (in mode), an error wrapping lost once it does not, or
// cannot say.
func (s *sessionLock) heldOr(ctx context.Context, key int64, mode string, lost error) error {
	if s.conn == nil {
		return nil
	}
	held, err := s.holds(ctx, key, mode)
	switch {
	case err != nil:
		return fmt.Errorf("%w on %s: %w", lost, s.x.path, s.x.connError(err))
	case !held:
		return fmt.Errorf("%w on %s", lost, s.x.path)
	}
	return nil
}

// release runs q, which releases the advisory lock key, on the lock's
// session, once, and returns its connection to the pool; when the server
// does not answer in time, or says the lock was not held, it drops the
// connection instead, which ends the session and with it any lock it still
// held. It returns, then and at every later call, the error, which begins
// with what, or notHeld.
func (s *sessionLock) release(q string, key int64, what string, notHeld error) error {
	if s.conn == nil {
		return nil
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), gcUnlockTimeout)
		defer cancel()
		var ok bool
		err := s.conn.QueryRowContext(ctx, q, key).Scan(&ok)
		switch {
		case err != nil:
			dropConn(s.conn)
			s.err = fmt.Errorf("%s: %w", what, s.x.connError(err))
		case !ok:
			dropConn(s.conn)
			s.err = notHeld
		default:
			s.err = s.conn.Close()
		}
	})
	return s.err
}

// dropConn closes conn's physical connection instead of returning it to
// the pool.
func dropConn(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}
