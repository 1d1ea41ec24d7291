package index

import (
	"context"
	"fmt"
	"unicode/utf8"
)

// KeyHeads returns the first elements of keys (each run's, as its keys
// render it: usually its name) that start with prefix, sorted, at most
// limit of them (0: all); with run set, only that run's. Clients complete
// the run of a key, as toolcas:// resources name it, with it.
func (x *Index) KeyHeads(ctx context.Context, run, prefix string, limit int) ([]string, error) {
	if !storableText(run) || !storableText(prefix) {
		return nil, nil // Record refuses such runs and keys
	}
	q := `SELECT DISTINCT substr(prefix, 1, length(prefix) - 1) AS head FROM runs r
		WHERE prefix <> '' AND substr(prefix, 1, ?) = ? AND EXISTS (SELECT 1 FROM parts p WHERE p.run_id = r.id)`
	// substr and length count characters, on SQLite and on PostgreSQL alike.
	args := []any{utf8.RuneCountInString(prefix), prefix}
	if run != "" {
		q += ` AND name = ?`
		args = append(args, run)
	}
	q += ` ORDER BY head`
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	out, err := selectRows[string](ctx, x, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list key heads: %w", err)
	}
	return out, nil
}
