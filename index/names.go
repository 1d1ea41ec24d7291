package index

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolcas/toolcas/cas"
)

// Runs returns the names of the runs that have parts and start with prefix,
// sorted, at most limit of them (0: all). Shells complete run names with it.
func (x *Index) Runs(ctx context.Context, prefix string, limit int) ([]string, error) {
	return x.names(ctx, "run", prefix, limit)
}

// Tools returns the names of the tools that have parts and start with
// prefix, sorted, at most limit of them (0: all).
func (x *Index) Tools(ctx context.Context, prefix string, limit int) ([]string, error) {
	return x.names(ctx, "tool", prefix, limit)
}

// Keys returns the distinct keys starting with prefix, sorted, at most limit
// of them (0: all).
func (x *Index) Keys(ctx context.Context, prefix string, limit int) ([]string, error) {
	return x.names(ctx, "key", prefix, limit)
}

// names lists the distinct values of a column of parts that start with
// prefix. The column name is one of the three above, never user input.
func (x *Index) names(ctx context.Context, column, prefix string, limit int) ([]string, error) {
	if column == "tool" {
		prefix = storable(prefix)
	} else if !storableText(prefix) {
		return nil, nil // Record refuses such runs and keys
	}
	var q string
	switch column {
	case "run":
		q = `SELECT DISTINCT name FROM runs r WHERE substr(name, 1, ?) = ?
			AND EXISTS (SELECT 1 FROM parts p WHERE p.run_id = r.id) ORDER BY name`
	case "key":
		q = `SELECT DISTINCT k FROM (SELECT r.prefix || p.key AS k FROM parts p JOIN runs r ON r.id = p.run_id) AS keys
			WHERE substr(k, 1, ?) = ? ORDER BY k`
	default:
		q = `SELECT DISTINCT ` + column + ` FROM parts WHERE substr(` + column + `, 1, ?) = ? ORDER BY ` + column
	}
	// substr counts characters, on SQLite and on PostgreSQL alike.
	args := []any{utf8.RuneCountInString(prefix), prefix}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	out, err := selectRows[string](ctx, x, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", column, err)
	}
	return out, nil
}

// storableText reports whether s can be stored in a text column of either
// database as it is: UTF-8 without NUL. PostgreSQL refuses anything else,
// SQLite would keep it. Record refuses a key or run that is not; lookups of
// such a key or run find nothing, on both databases alike.
func storableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// storable returns s with each invalid UTF-8 sequence and each NUL replaced
// by U+FFFD: what Record stores of a part's tool, call id, MIME type and
// file name, which hostile tools may name with any bytes (the key, escaped,
// still tells such calls apart), and what lookups by tool look for.
func storable(s string) string {
	if storableText(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// storableParts returns ps with each part's free text made storable,
// copied only when something changes.
func storableParts(ps []NewPart) []NewPart {
	out := ps
	for i, p := range ps {
		q := p
		q.Tool, q.CallID, q.MIME, q.Filename = storable(p.Tool), storable(p.CallID), storable(p.MIME), storable(p.Filename)
		if q != p {
			if &out[0] == &ps[0] {
				out = slices.Clone(ps)
			}
			out[i] = q
		}
	}
	return out
}

// HasRun reports whether any part belongs to run.
func (x *Index) HasRun(ctx context.Context, run string) (bool, error) {
	return x.has(ctx, "run", run)
}

// HasTool reports whether any part was made by tool.
func (x *Index) HasTool(ctx context.Context, tool string) (bool, error) {
	return x.has(ctx, "tool", tool)
}

func (x *Index) has(ctx context.Context, column, value string) (bool, error) {
	if column == "tool" {
		value = storable(value)
	} else if !storableText(value) {
		return false, nil // Record refuses such runs
	}
	var one int
	cond := column + ` = ?`
	if column == "run" {
		cond = `run_id IN (SELECT id FROM runs WHERE name = ?)`
	}
	err := x.read(ctx, func() error {
		return x.db.QueryRowContext(ctx, `SELECT 1 FROM parts WHERE `+cond+` LIMIT 1`, value).Scan(&one)
	})
	if err == sql.ErrNoRows {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up %s %q: %w", column, clip(value), err)
	}
	return true, nil
}

// DeletePartsOf deletes every part, of any run and version, stored in one
// of blobs, and the blobs' rows, in one transaction. It returns the parts
// deleted. Repair uses it for blobs whose files are lost.
func (x *Index) DeletePartsOf(ctx context.Context, blobs []cas.Blob) ([]Part, error) {
	var gone []Part
	err := x.write(ctx, func(tx *sql.Tx) error {
		gone = gone[:0]
		for _, b := range blobs {
			rows, err := tx.QueryContext(ctx, `SELECT `+partColumns+` FROM blobs b JOIN parts p ON p.blob_id = b.id
				WHERE `+blobDigestIs+` AND b.ext = ? ORDER BY p.id`, digestKey(b.Digest), b.Digest[:], b.Ext)
			if err != nil {
				return err
			}
			var prs []partRow
			for rows.Next() {
				var r partRow
				if err := rows.Scan(&r.ID, &r.Key, &r.Run, &r.Step, &r.Tool, &r.CallID, &r.Part, &r.Version, &r.Kind,
					&r.MIME, &r.Filename, &r.Chars, &r.Bytes, &r.Digest, &r.Ext, &r.CreatedAt); err != nil {
					rows.Close()
					return err
				}
				prs = append(prs, r)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			ps, err := parts(prs)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM parts WHERE blob_id IN (SELECT id FROM blobs WHERE `+digestIs+` AND ext = ?)`,
				digestKey(b.Digest), b.Digest[:], b.Ext); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM blobs WHERE `+digestIs+` AND ext = ?`, digestKey(b.Digest), b.Digest[:], b.Ext); err != nil {
				return err
			}
			gone = append(gone, ps...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete parts of lost blobs: %w", err)
	}
	return gone, nil
}
