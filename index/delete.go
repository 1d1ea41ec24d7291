package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// DeleteKey removes the row of one version of a key, or of every version
// when version is 0, and returns how many rows went. Their blobs stay until
// gc finds them unused. A key or version with no row is not an error: it
// removes nothing. The next write of the key takes the version after the
// newest that is left, so a key whose rows are all gone starts again at 1.
func (x *Index) DeleteKey(ctx context.Context, key string, version int) (int64, error) {
	if key == "" {
		return 0, errors.New("delete: no key")
	}
	if version < 0 {
		return 0, fmt.Errorf("delete %s: version %d is negative", key, version)
	}
	var n int64
	err := x.write(ctx, func(tx *sql.Tx) error {
		prefix, rest := splitKey(key)
		res, err := tx.ExecContext(ctx, `DELETE FROM parts WHERE key = ? AND (SELECT prefix FROM runs WHERE id = run_id) = ?
			AND (? = 0 OR version = ?)`, rest, prefix, version, version)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete %s version %d: %w", key, version, err)
	}
	return n, nil
}
