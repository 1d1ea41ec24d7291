package index

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolcas/toolcas/cas"
)

// queryRows runs q on db and calls each with every row it returns, in
// order, until each fails: the loop every read of many rows needs, with
// the rows closed however it ends.
func queryRows(ctx context.Context, db queryer, q string, args []any, each func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q, args...)
	return eachRow(rows, err, each)
}

// eachRow is queryRows's loop over the rows a query returned (or its
// error).
func eachRow(rows *sql.Rows, err error, each func(*sql.Rows) error) error {
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

// joinIDs returns the start of a FROM clause that joins a table of ids
// (one row each, its column j.value) with the table named after it, whose
// ON clause follows, in place of an IN list; and the statement's argument
// that fills the table: in SQLite json_each of the ids as one JSON array
// (CROSS JOIN keeps the ids outside, so that each is a lookup), in
// PostgreSQL unnest of an array. The statement is the same whatever the
// number of ids: a list of placeholders made one to parse for each size,
// and SQLite sorted the list into a temporary index before its lookups. A
// process that reads thousands of blob rows once read them a quarter
// faster so.
func (x *Index) joinIDs(ids []int64) (string, any) {
	if x.pg {
		return `unnest(CAST(? AS bigint[])) AS j(value) JOIN`, ids
	}
	b := make([]byte, 0, 8*len(ids)+2)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return `json_each(?) AS j CROSS JOIN`, string(append(b, ']'))
}

// idArgs returns ids as a statement's arguments, for placeholders.
func idArgs(ids []int64) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return args
}
