// Package cancel holds the pauses and reads that end when their context
// does: a retry loop's wait, a long read of a blob a caller gave up on.
package cancel

import (
	"context"
	"io"
	"time"
)

// Sleep waits for d, or until ctx ends, when it returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Reader reads from another reader until its context ends, and from then
// on fails with the context's error; it counts the bytes it read.
type Reader struct {
	ctx context.Context
	r   io.Reader
	n   int64
}

// NewReader returns a Reader of r that stops once ctx ends.
func NewReader(ctx context.Context, r io.Reader) *Reader {
	return &Reader{ctx: ctx, r: r}
}

// Read reads from the underlying reader, or returns ctx's error once ctx
// has ended.
func (c *Reader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

// Count returns how many bytes were read.
func (c *Reader) Count() int64 { return c.n }
