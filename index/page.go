package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrBadCursor is returned by ParsePageCursor for text that is no cursor.
var ErrBadCursor = errors.New("not a listing cursor")

// A PageCursor is where a page of a listing, newest first, ended: the next
// page begins after it. The zero PageCursor is the start of a listing.
type PageCursor struct{ at, id int64 }

// IsZero reports whether c is the start of a listing.
func (c PageCursor) IsZero() bool { return c == PageCursor{} }

// String renders c for a client to hand back as it is: "" for the start.
func (c PageCursor) String() string {
	if c.IsZero() {
		return ""
	}
	return strconv.FormatInt(c.at, 36) + "." + strconv.FormatInt(c.id, 36)
}

// ParsePageCursor reads a cursor that String rendered; "" is the start.
func ParsePageCursor(s string) (PageCursor, error) {
	if s == "" {
		return PageCursor{}, nil
	}
	a, b, ok := strings.Cut(s, ".")
	at, err1 := strconv.ParseInt(a, 36, 64)
	id, err2 := strconv.ParseInt(b, 36, 64)
	if !ok || err1 != nil || err2 != nil || id <= 0 {
		return PageCursor{}, fmt.Errorf("%w: %q", ErrBadCursor, clip(s))
	}
	return PageCursor{at: at, id: id}, nil
}

// CursorAfter returns the cursor after the part of this id, created at
// this time, for a listing to go on after it.
func CursorAfter(created time.Time, id int64) PageCursor {
	return PageCursor{at: created.UnixNano(), id: id}
}

// PageOptions filters ListPage and ListEach: what List takes, and more.
type PageOptions struct {
	ListOptions
	// KeyContains lists only the parts whose key contains it (byte for
	// byte, case counting).
	KeyContains string
	// After lists the parts after this cursor, which a page returned.
	After PageCursor
}

// ListPage returns up to o.Limit parts (at least 1) matching o, newest
// first, and the cursor to list the next page from, zero when no part
// follows. Each page is one query that holds at most a page of rows, so
// that paging through any number of parts takes memory of a page.
func (x *Index) ListPage(ctx context.Context, o PageOptions) ([]Part, PageCursor, error) {
	if o.Limit <= 0 {
		return nil, PageCursor{}, fmt.Errorf("list page: limit %d", o.Limit)
	}
	n := o.Limit
	o.Limit++ // one more tells whether another page follows
	var out []Part
	err := x.ListEach(ctx, o, func(p Part) error {
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, PageCursor{}, err
	}
	if len(out) <= n {
		return out, PageCursor{}, nil
	}
	out = out[:n]
	return out, CursorAfter(out[n-1].CreatedAt, out[n-1].ID), nil
}

// ListEach calls each with every part matching o (at most o.Limit, unless
// 0), newest first, as the database returns them, and stops at each's first
// error, returning it. It holds one row at a time, whatever the number of
// parts: what lists every part of a large store uses.
func (x *Index) ListEach(ctx context.Context, o PageOptions, each func(Part) error) error {
	if !storableText(o.Run) || !storableText(o.KeyContains) {
		return nil // Record refuses such runs and keys
	}
	o.Tool = storable(o.Tool)
	var ids []int64
	if o.Run != "" {
		var err error
		if ids, err = x.runIDs(ctx, o.Run); err != nil {
			return fmt.Errorf("list: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
	}
	q, args := x.pageSQL(o, ids)
	delivered := false
	err := x.read(ctx, func() error {
		err := queryRows(ctx, x.db, q, args, func(rows *sql.Rows) error {
			var r partRow
			if err := rows.Scan(&r.ID, &r.Key, &r.Run, &r.Step, &r.Tool, &r.CallID, &r.Part, &r.Version, &r.Kind,
				&r.MIME, &r.Filename, &r.Chars, &r.Bytes, &r.Digest, &r.Ext, &r.CreatedAt); err != nil {
				return err
			}
			p, err := r.part()
			if err != nil {
				return err
			}
			delivered = true
			return each(p)
		})
		if err != nil && delivered {
			// Parts were handed out: a try again would hand them out twice.
			return noRetry{err}
		}
		return err
	})
	if nr, ok := errors.AsType[noRetry](err); ok {
		err = nr.err
	}
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	return nil
}

// noRetry keeps an error from being tried again: it hides what it wraps
// from the retry loop's checks.
type noRetry struct{ err error }

func (e noRetry) Error() string { return e.err.Error() }

// pageSQL is the query of ListEach: List's filters, the key's text, and
// the cursor, newest first. ids are the run's rows in runs, when o has a
// run.
func (x *Index) pageSQL(o PageOptions, ids []int64) (string, []any) {
	var (
		where []string
		args  []any
	)
	switch len(ids) {
	case 0:
	case 1:
		where, args = append(where, "p.run_id = ?"), append(args, ids[0])
	default:
		where, args = append(where, "p.run_id IN "+placeholders(len(ids))), append(args, idArgs(ids)...)
	}
	if o.Tool != "" {
		where, args = append(where, "p.tool = ?"), append(args, o.Tool)
	}
	if o.Kind != "" {
		where, args = append(where, "p.kind = ?"), append(args, string(o.Kind))
	}
	if !o.Since.IsZero() {
		where, args = append(where, "p.created_at >= ?"), append(args, o.Since.UnixNano())
	}
	if !o.After.IsZero() {
		where = append(where, "(p.created_at < ? OR (p.created_at = ? AND p.id < ?))")
		args = append(args, o.After.at, o.After.at, o.After.id)
	}
	from := `parts p`
	if o.KeyContains != "" {
		from += ` JOIN runs r ON r.id = p.run_id`
		// The key's first element is its run's row's.
		find := "instr"
		if x.pg {
			find = "strpos"
		}
		where = append(where, find+"(r.prefix || p.key, ?) > 0")
		args = append(args, o.KeyContains)
	}
	if !o.AllVersions {
		where = append(where, "NOT EXISTS (SELECT 1 FROM parts n WHERE n.key = p.key AND n.run_id = p.run_id AND n.version > p.version)")
	}
	cond := ""
	if len(where) > 0 {
		cond = ` WHERE ` + strings.Join(where, " AND ")
	}
	const order = ` ORDER BY p.created_at DESC, p.id DESC`
	if o.Limit <= 0 {
		return `SELECT ` + partColumns + ` FROM ` + from + ` JOIN blobs b ON b.id = p.blob_id` + cond + order, args
	}
	// A page: the ids first, by a narrow query that may read every part,
	// then the page's rows alone in full.
	return `SELECT ` + partColumns + ` FROM parts p JOIN blobs b ON b.id = p.blob_id
		WHERE p.id IN (SELECT p.id FROM ` + from + cond + order + ` LIMIT ?)` + order, append(args, o.Limit)
}
