package store

import (
	"context"

	"github.com/toolcas/toolcas/index"
)

// A PageCursor is where a page of a listing ended (see ListPage); the zero
// PageCursor is the start. Its String is what a client hands back, and
// ParsePageCursor reads it.
type PageCursor = index.PageCursor

// ErrBadCursor is returned by ParsePageCursor for text that is no cursor.
var ErrBadCursor = index.ErrBadCursor

// ParsePageCursor reads a cursor's String; "" is the start of a listing.
func ParsePageCursor(s string) (PageCursor, error) { return index.ParsePageCursor(s) }

// CursorAfter returns the cursor after part p, for a listing to go on
// after it.
func CursorAfter(p Part) PageCursor { return index.CursorAfter(p.CreatedAt, p.ID) }

// PageOptions filters ListPage and ListEach: what List takes, and more.
type PageOptions struct {
	ListOptions
	// KeyContains lists only the parts whose key contains it.
	KeyContains string
	// After lists the parts after this cursor, which a page returned.
	After PageCursor
}

func (o PageOptions) index() index.PageOptions {
	return index.PageOptions{ListOptions: o.ListOptions.index(), KeyContains: o.KeyContains, After: o.After}
}

// ListPage returns up to o.Limit parts (at least 1) matching o, newest
// first, and the cursor to list the next page from, zero when no part
// follows. A page takes memory of a page, however many parts match.
func (s *Store) ListPage(ctx context.Context, o PageOptions) ([]Part, PageCursor, error) {
	return s.ix.ListPage(ctx, o.index())
}

// ListEach calls each with every part matching o (at most o.Limit, unless
// 0), newest first, holding one at a time, and stops at each's first error,
// returning it: a listing of any number of parts in bounded memory.
func (s *Store) ListEach(ctx context.Context, o PageOptions, each func(Part) error) error {
	return s.ix.ListEach(ctx, o.index(), each)
}

// KeyHeads lists the first elements of keys (each run's, as its keys
// render it: usually its name) that start with prefix, in order, at most
// limit of them (0: all); with run set, only that run's.
func (s *Store) KeyHeads(ctx context.Context, run, prefix string, limit int) ([]string, error) {
	return s.ix.KeyHeads(ctx, run, prefix, limit)
}
