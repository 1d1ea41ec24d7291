package store

import (
	"context"
	"slices"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// wholeRows holds the rows verify found whole until it marks them, once
// the walk is done, in the order of their ids: a row in a bit and the
// 16-bit check of its blob (index.RowCheck), in blocks of wholeBlockIDs
// consecutive ids, two bytes and a bit a row. Verify finds rows in the
// order of their digests, which is no order of their ids: marking them as
// found wrote most pages of the table once per chunk of marks.
type wholeRows struct {
	blocks map[int64]*wholeBlock
	n      int
}

// wholeBlockIDs is how many consecutive ids a block holds.
const wholeBlockIDs = 512

type wholeBlock struct {
	has   [wholeBlockIDs / 64]uint64
	check [wholeBlockIDs]uint16
}

func newWholeRows() *wholeRows {
	return &wholeRows{blocks: map[int64]*wholeBlock{}}
}

// add records that the row id, of blob b, was found whole.
func (w *wholeRows) add(id int64, b cas.Blob) {
	k, i := id/wholeBlockIDs, id%wholeBlockIDs
	if i < 0 {
		k, i = k-1, i+wholeBlockIDs
	}
	bl := w.blocks[k]
	if bl == nil {
		bl = &wholeBlock{}
		w.blocks[k] = bl
	}
	if bl.has[i/64]&(1<<(i%64)) == 0 {
		w.n++
	}
	bl.has[i/64] |= 1 << (i % 64)
	bl.check[i] = index.RowCheck(b.Digest, b.Ext)
}

// len returns how many rows there are.
func (w *wholeRows) len() int { return w.n }

// mark marks the rows verified at t, a check begun at since, in the order
// of their ids, a batch of wholeMarkBatch at a time, and forgets them.
func (w *wholeRows) mark(ctx context.Context, x *index.Index, since, t time.Time) error {
	keys := make([]int64, 0, len(w.blocks))
	for k := range w.blocks {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	batch := make([]index.CheckedRow, 0, min(w.n, wholeMarkBatch))
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := x.MarkVerifiedChecked(ctx, batch, since, t)
		batch = batch[:0]
		return err
	}
	for _, k := range keys {
		bl := w.blocks[k]
		for i := range int64(wholeBlockIDs) {
			if bl.has[i/64]&(1<<(i%64)) == 0 {
				continue
			}
			batch = append(batch, index.CheckedRow{ID: k*wholeBlockIDs + i, Check: bl.check[i]})
			if len(batch) == wholeMarkBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		delete(w.blocks, k)
	}
	if err := flush(); err != nil {
		return err
	}
	w.n = 0
	return nil
}

// wholeMarkBatch is how many rows mark hands the index at once (which
// commits them in chunks of its own).
const wholeMarkBatch = 10000
