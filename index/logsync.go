package index

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
)

// RecordGatheringLogUnsynced is recordGathering for a writer that may make
// the commit durable itself, with one barrier for its blobs' names and
// the log (see cas.Store.Barrier): once gather has returned no more
// parts, logSync is called, and when it returns false the transaction
// commits without syncing SQLite's log. Such a commit is seen at once by
// every reader, but a power cut may lose it until the file system holding
// the index has been synced. logSync may be called more than once, as
// gather is. Where commits do not sync the log anyway (on PostgreSQL, or
// with cas.SyncNone or RecentKeysMayBeLostOnPowerCut), it is recordGathering.
//
// Should the log's sync after a commit fail, the error wraps
// ErrCommitUnknown: the parts are recorded, but may not survive a power
// cut.
func (x *Index) RecordGatheringLogUnsynced(ctx context.Context, ps []NewPart, gather func() ([]NewPart, error),
	logSync func() bool) ([]Recorded, error) {
	if !x.logSynced || x.pg {
		return x.recordGathering(ctx, ps, gather, nil)
	}
	return x.recordGathering(ctx, ps, gather, logSync)
}

// logUnsynced is the connection on which the index commits without
// syncing SQLite's log (synchronous=NORMAL, which SQLite lets a connection
// change only between transactions): one, kept open, so that the setting
// never reaches a connection of the pool's, and used by one transaction at
// a time.
type logUnsynced struct {
	mu   sync.Mutex
	conn *sql.Conn
}

// commitLogUnsynced runs f in a transaction on the index's connection that
// commits without syncing the log, and then syncs the log itself when f
// has set *syncLog: as a commit with synchronous=FULL does, a moment later.
func (x *Index) commitLogUnsynced(ctx context.Context, syncLog *bool, f func(*sql.Tx) error) error {
	u := &x.unsynced
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn == nil {
		conn, err := x.db.Conn(ctx)
		if err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
			conn.Close()
			return err
		}
		u.conn = conn
	}
	*syncLog = false
	if err := x.commitTx(ctx, u.conn, f); err != nil {
		// Made again for the next transaction, whatever became of it.
		u.conn.Close()
		u.conn = nil
		return err
	}
	if !*syncLog {
		return nil
	}
	// The connection is open, so that the log is not removed meanwhile:
	// SQLite removes it when the last connection to the database closes.
	if err := syncFile(x.path + "-wal"); err != nil {
		return fmt.Errorf("sync the log after the commit: %w: %w", ErrCommitUnknown, err)
	}
	return nil
}

// syncFile makes the file at path durable.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// closeLogUnsynced closes the connection of commitLogUnsynced.
func (x *Index) closeLogUnsynced() {
	u := &x.unsynced
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn != nil {
		u.conn.Close()
		u.conn = nil
	}
}
