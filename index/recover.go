package index

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// MaxBlobID returns the largest id of the blobs table, 0 when it is empty:
// blobs recorded later have larger ids, unless the largest is deleted
// meanwhile (see BlobsSince).
func (x *Index) MaxBlobID(ctx context.Context) (int64, error) {
	var id int64
	if err := x.read(ctx, func() error {
		return x.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM blobs`).Scan(&id)
	}); err != nil {
		return 0, fmt.Errorf("largest blob id: %w", err)
	}
	return id, nil
}

// BlobsSince returns the blobs recorded after the blob with id afterID, or
// referenced by a write at since or later: every blob a write recorded or
// used since a moment when afterID was the largest id and the clock said
// since, whatever was deleted meanwhile.
func (x *Index) BlobsSince(ctx context.Context, afterID int64, since time.Time) ([]cas.Blob, error) {
	rows, err := selectRows[digestExt](ctx, x, `SELECT digest, ext FROM blobs WHERE id > ? OR last_referenced >= ? ORDER BY id`,
		afterID, since.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("blobs since %d: %w", afterID, err)
	}
	return convertRows(rows, digestExt.blob)
}

// DeleteParts deletes the parts with the given ids, in one transaction; an
// id with no part is no error. A writer whose blob failed to become
// durable after its rows were committed takes them back with it.
func (x *Index) DeleteParts(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	err := x.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM parts WHERE id IN `+placeholders(len(ids)), idArgs(ids)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete parts: %w", err)
	}
	return nil
}
