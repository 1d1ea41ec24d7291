// Package migrations holds the index's schema as goose SQL migrations,
// embedded in every build so that an index is created or brought up to date
// when it is opened.
package migrations

import (
	"embed"
	"io/fs"
)

// FS holds the SQLite migrations, named NNNNN_what.sql, applied in order.
//
//go:embed *.sql
var FS embed.FS

// postgres holds the PostgreSQL twins of FS's migrations: the same schema in
// PostgreSQL's types, under the same version numbers, one file for each.
// Their SQL must not hold a ? (in a string or a comment): the index's
// PostgreSQL connections rewrite ? into $n placeholders.
//
//go:embed postgres/*.sql
var postgres embed.FS

// Postgres returns the PostgreSQL migrations, named as FS's are, applied in
// order. Times are Unix nanoseconds in BIGINT columns, as on SQLite, so that
// both hold the same values.
func Postgres() fs.FS {
	sub, err := fs.Sub(postgres, "postgres")
	if err != nil {
		panic(err) // the directory is embedded: it is always there
	}
	return sub
}
