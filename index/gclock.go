package index

import (
	"context"
	"fmt"
	"sync"
)

// LockGC takes the index's gc lock, so that one gc at a time runs on an
// index that many machines share. On PostgreSQL it is a session advisory
// lock (pg_try_advisory_lock) held on a connection of its own until release
// is called, or until that connection breaks: a gc that dies frees it. It
// returns ErrGCRunning at once when another session holds it. On SQLite,
// whose store is on one machine and locks gc with a file, it takes nothing
// and release does nothing.
func (x *Index) LockGC(ctx context.Context) (release func() error, err error) {
	if !x.pg {
		return func() error { return nil }, nil
	}
	conn, err := x.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("index: lock gc: %w", x.connError(err))
	}
	var ok bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(?)`, int64(gcLockKey)).Scan(&ok); err != nil {
		conn.Close()
		return nil, fmt.Errorf("index: lock gc: %w", x.connError(err))
	}
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("index: %w on %s", ErrGCRunning, x.path)
	}
	var once sync.Once
	return func() error {
		err := error(nil)
		once.Do(func() {
			_, err = conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock(?)`, int64(gcLockKey))
			if cerr := conn.Close(); err == nil {
				err = cerr
			}
		})
		if err != nil {
			return fmt.Errorf("index: unlock gc: %w", x.connError(err))
		}
		return nil
	}, nil
}
