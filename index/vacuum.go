package index

import (
	"context"
	"errors"
	"fmt"
)

// VacuumResult says what Vacuum did: the database's size, in bytes of
// pages, before and after, and how many of the pages before were free.
type VacuumResult struct {
	Before, After, Free int64
}

// Vacuum rewrites the database table by table (SQLite's VACUUM), so that
// the pages of each table and of each of its indexes lie side by side in
// the order of their keys, and free pages are given back. Rows written
// over months leave a table's pages spread across the file between those
// of every other table, and a read of many rows touches a page of the
// file for nearly each row: on a store of 140,000 results, a search that
// reads the rows of a few thousand blobs took about a tenth less time
// once the index was vacuumed. Vacuum holds the database's write lock
// while it runs (seconds for an index of tens of megabytes): other
// writers wait for it, for up to the index's busy timeout and retries,
// and readers go on. It needs free space in the temporary directory and
// beside the database for a copy of it. The log is checkpointed after, so
// that the file shows the new size. On PostgreSQL, whose autovacuum keeps
// its tables, Vacuum returns an error wrapping errors.ErrUnsupported.
func (x *Index) Vacuum(ctx context.Context) (VacuumResult, error) {
	var res VacuumResult
	if x.pg {
		return res, fmt.Errorf("%w: the index %s is in PostgreSQL, whose autovacuum keeps it", errors.ErrUnsupported, x.Path())
	}
	size := func() (bytes, free int64, err error) {
		err = x.read(ctx, func() error {
			var pages, sz, f int64
			for q, v := range map[string]*int64{`PRAGMA page_count`: &pages, `PRAGMA page_size`: &sz, `PRAGMA freelist_count`: &f} {
				if err := x.db.QueryRowContext(ctx, q).Scan(v); err != nil {
					return err
				}
			}
			bytes, free = pages*sz, f*sz
			return nil
		})
		return bytes, free, err
	}
	var err error
	if res.Before, res.Free, err = size(); err != nil {
		return res, fmt.Errorf("vacuum %s: %w", x.path, err)
	}
	err = retryBusy(ctx, x.retry, func() error {
		_, err := x.db.ExecContext(ctx, `VACUUM`)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("vacuum %s: %w", x.path, err)
	}
	if err := x.Checkpoint(ctx); err != nil {
		return res, fmt.Errorf("vacuum %s: checkpoint: %w", x.path, err)
	}
	if res.After, _, err = size(); err != nil {
		return res, fmt.Errorf("vacuum %s: %w", x.path, err)
	}
	return res, nil
}
