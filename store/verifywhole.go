package store

import (
	"context"
	"slices"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// wholeRows holds the rows verify found whole until it marks them, once
// the walk is done, in the order of their ids: a row in 10 bytes (the first eight bytes
// of its digest, its extension's number), in blocks of wholeBlockIDs
// consecutive ids. Verify finds rows in the order of their digests, which
// is no order of their ids: marking them as found wrote most pages of the
// table once per chunk of marks.
type wholeRows struct {
	blocks map[int64]*wholeBlock
	// exts are the extensions seen, numbered by their place.
	exts   []string
	extNum map[string]uint16
	n      int
}

// wholeBlockIDs is how many consecutive ids a block holds.
const wholeBlockIDs = 512

type wholeBlock struct {
	has    [wholeBlockIDs / 64]uint64
	prefix [wholeBlockIDs][8]byte
	ext    [wholeBlockIDs]uint16
}

func newWholeRows() *wholeRows {
	return &wholeRows{blocks: map[int64]*wholeBlock{}, extNum: map[string]uint16{}}
}

// add records that the row id, of blob b, was found whole. A row of an
// extension past the 65,536th is left unmarked.
func (w *wholeRows) add(id int64, b cas.Blob) {
	e, ok := w.extNum[b.Ext]
	if !ok {
		if len(w.exts) > 0xffff {
			return
		}
		e = uint16(len(w.exts))
		w.exts = append(w.exts, b.Ext)
		w.extNum[b.Ext] = e
	}
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
	bl.prefix[i] = [8]byte(b.Digest[:8])
	bl.ext[i] = e
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
	batch := make([]index.VerifiedRow, 0, min(w.n, wholeMarkBatch))
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := x.MarkVerifiedIDs(ctx, batch, since, t)
		batch = batch[:0]
		return err
	}
	for _, k := range keys {
		bl := w.blocks[k]
		for i := range int64(wholeBlockIDs) {
			if bl.has[i/64]&(1<<(i%64)) == 0 {
				continue
			}
			batch = append(batch, index.VerifiedRow{ID: k*wholeBlockIDs + i, Prefix: bl.prefix[i], Ext: w.exts[bl.ext[i]]})
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
