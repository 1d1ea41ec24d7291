// Package migrations holds the index's schema as goose SQL migrations,
// embedded in every build so that an index is created or brought up to date
// when it is opened.
package migrations

import "embed"

// FS holds the migrations, named NNNNN_what.sql, applied in order.
//
//go:embed *.sql
var FS embed.FS
