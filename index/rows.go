package index

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/toolcas/toolcas/cas"
)

// queryRows runs q on db and calls each with every row it returns, in
// order, until each fails: the loop every read of many rows needs, with
// the rows closed however it ends.
func queryRows(ctx context.Context, db queryer, q string, args []any, each func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// selectRows reads the rows of q into Ts, as SelectContext does, in a read
// retried while busy: each try reads them afresh, so that rows a failed
// try read are not read twice.
func selectRows[T any](ctx context.Context, x *Index, q string, args ...any) ([]T, error) {
	var rows []T
	err := x.read(ctx, func() error {
		rows = rows[:0]
		return x.db.SelectContext(ctx, &rows, q, args...)
	})
	return rows, err
}

// convertRows returns rows, as read into their struct, made the package's
// type by f, or f's first error: a damaged row fails the whole read.
func convertRows[R, T any](rows []R, f func(R) (T, error)) ([]T, error) {
	out := make([]T, 0, len(rows))
	for _, r := range rows {
		t, err := f(r)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// digestOf returns the digest a blob row holds. The schema allows no
// other length, so one of another length is a damaged row: an error, not
// a digest cut or padded.
func digestOf(b []byte) (cas.Digest, error) {
	if len(b) != cas.DigestSize {
		return cas.Digest{}, fmt.Errorf("blob row with a %d-byte digest", len(b))
	}
	return cas.Digest(b), nil
}

// digestExt is a row of a blob's digest and extension, as SelectContext
// reads it.
type digestExt struct {
	Digest []byte `db:"digest"`
	Ext    string `db:"ext"`
}

// blob returns the blob the row names.
func (r digestExt) blob() (cas.Blob, error) {
	d, err := digestOf(r.Digest)
	return cas.Blob{Digest: d, Ext: r.Ext}, err
}

// placeholders returns the parameters of an IN list of n values,
// "(?, ?, ?)": n must be at least 1, an empty list being no SQL.
func placeholders(n int) string {
	return `(?` + strings.Repeat(`, ?`, n-1) + `)`
}

// idArgs returns ids as a statement's arguments, for placeholders.
func idArgs(ids []int64) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return args
}
