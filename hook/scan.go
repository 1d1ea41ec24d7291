package hook

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/toolcas/toolcas/internal/cancel"
	"github.com/toolcas/toolcas/search"
)

// The stores of this package search by reading every text part of the run:
// they have no index to rule parts out, and hold few enough parts for that
// to do.

// compileSearch checks a query as every Searcher of this package takes it
// and compiles its pattern.
func compileSearch(run string, q SearchQuery) (*search.Matcher, error) {
	if run == "" {
		return nil, fmt.Errorf("%w: a search is scoped to a run", ErrRefused)
	}
	if q.Width < 0 {
		return nil, fmt.Errorf("negative width %d", q.Width)
	}
	return search.Compile(search.Pattern{Expr: q.Pattern, Fixed: q.Fixed, IgnoreCase: q.IgnoreCase})
}

// binaryHead is how much of a part is looked at for a NUL byte, which
// makes it binary content that a search skips, as the toolcas store does.
const binaryHead = 8 << 10

// scanBytes calls fn with each line of data, the part key, that m matches,
// cut to width, in order. It stops at fn's first error and returns it, or
// when ctx ends, checked between chunks of a large part.
func scanBytes(ctx context.Context, m *search.Matcher, key string, data []byte, width int, fold *[]byte, fn func(SearchHit) error) error {
	if len(data) > search.ChunkSize {
		return scanReader(ctx, m, key, bytes.NewReader(data), width, fn)
	}
	if bytes.IndexByte(data[:min(len(data), binaryHead)], 0) >= 0 {
		return nil
	}
	var err error
	m.Lines(data, 1, fold, func(n int64, line []byte, col int) bool {
		text, _ := search.Cut(line, col, width)
		err = fn(SearchHit{Key: key, Line: n, Text: text})
		return err == nil
	})
	return err
}

// scanReader is scanBytes for a part read as it streams, holding at most
// about 2 × search.ChunkSize bytes of it; it stops when ctx ends.
func scanReader(ctx context.Context, m *search.Matcher, key string, r io.Reader, width int, fn func(SearchHit) error) error {
	head := make([]byte, binaryHead)
	k, err := io.ReadFull(r, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return err
	}
	if bytes.IndexByte(head[:k], 0) >= 0 {
		return nil
	}
	var fnErr error
	err = m.Scan(cancel.NewReader(ctx, io.MultiReader(bytes.NewReader(head[:k]), r)), func(n int64, line []byte, col int) bool {
		text, _ := search.Cut(line, col, width)
		fnErr = fn(SearchHit{Key: key, Line: n, Text: text})
		return fnErr == nil
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}
