package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/s3blob"
)

var (
	// ErrCopySameStore is returned by Copy when the source and the
	// destination are one store: the same directory, or the same index.
	ErrCopySameStore = errors.New("source and destination are the same store")

	// ErrCopyConflict is returned by Copy, before it writes anything, when
	// the destination holds something else under a key and version of the
	// source, or a key of the source belongs to another call there. It is
	// index.ErrImportConflict.
	ErrCopyConflict = index.ErrImportConflict

	// ErrCopyMismatch is returned by Copy when its last pass finds a part
	// of the source that the destination lacks or holds otherwise, or whose
	// blob there does not read back whole.
	ErrCopyMismatch = errors.New("destination does not match the source")
)

// DefaultCopyBatch is how many parts Copy records in one transaction.
const DefaultCopyBatch = 256

// CopyOptions configures Copy.
type CopyOptions struct {
	// Progress, when set, is called after each batch of parts checked,
	// copied or verified.
	Progress func(CopyProgress)
	// Batch is how many parts are recorded in one transaction (default
	// DefaultCopyBatch).
	Batch int
}

// CopyStage names Copy's passes over the source.
type CopyStage string

// Copy's passes, in order.
const (
	CopyChecking  CopyStage = "check"
	CopyCopying   CopyStage = "copy"
	CopyVerifying CopyStage = "verify"
)

// CopyProgress is how far Copy is.
type CopyProgress struct {
	Stage CopyStage
	// Done counts the parts of the source the stage has been through;
	// Total is every part of the source (0 while checking, which counts
	// them).
	Done, Total int64
	// Result is what Copy has done so far.
	Result CopyResult
}

// CopyResult says what Copy did.
type CopyResult struct {
	// Parts counts the parts of the source: every version of every key.
	Parts int64
	// PartsCopied were recorded in the destination, PartsSkipped were
	// there already.
	PartsCopied, PartsSkipped int64
	// BlobsCopied were written to the destination, BlobsSkipped were there
	// already; BytesCopied is the size of the blobs copied.
	BlobsCopied, BlobsSkipped int64
	BytesCopied               int64
	// PartsVerified and BlobsVerified were found in the destination as in
	// the source, the blobs read back whole.
	PartsVerified, BlobsVerified int64
	// BlobsRepaired were missing or damaged in the destination, under
	// parts it held already, and were copied again from the source.
	BlobsRepaired int64
	// Passes counts the copying passes: more than one when parts were
	// written to the source while Copy ran.
	Passes int
}

// Copy copies every part of the source store into the destination: every
// version of every key of every run, with its key, version number, creation
// time, kind, MIME type, file name and sizes as the source's index holds
// them, and every blob the parts name, read from the source checked (a
// packed blob too) and written to the destination, which hashes it again.
// Blobs the source holds that no part uses are not copied. The destination
// must be another store; what it holds already stays, and its runs may be
// others. Either store may be a directory, with its index in SQLite or in
// PostgreSQL, or a store in an object store.
//
// Copy makes three passes over the source's parts, a blob's parts together.
// The first checks them all against the destination and writes nothing:
// a key and version that the destination holds with other content, or a
// key that another call owns there, is ErrCopyConflict, naming the key. The
// second copies, a batch at a time: the batch's blobs durably first, then
// its rows in one transaction, under the destination's writers' lock (on
// an object store, a blob lease), as every write does. A part the destination holds already, the same, is
// skipped, and so is its blob: Copy run again after it finished copies
// nothing, and Copy stopped at any point (the process killed, say) and run
// again finishes the job. The last pass verifies: every part of the source
// resolves in the destination, the same, and every blob reads back from
// the destination checked. A blob missing or damaged in the destination
// under a part it holds already (a blob lost there since an earlier copy)
// is copied again from the source, checked, and counted in BlobsRepaired;
// anything else is ErrCopyMismatch naming the key.
//
// The source is only read: it may be opened ReadOnly, and written to by
// others while Copy runs. A pass over the source's parts, in the order of
// their blobs, misses a part written behind it; so the copying pass is
// made again until one finds nothing to copy (at most CopyPassesMax), and
// the verifying pass copies a part it finds missing from the destination,
// one written after the last copying pass went by. A part written after
// the verifying pass went by is copied by the next Copy.
func Copy(ctx context.Context, dst, src *Store, o CopyOptions) (CopyResult, error) {
	var res CopyResult
	if _, err := dst.writer("copy"); err != nil {
		return res, err
	}
	if sameStore(dst, src) {
		return res, fmt.Errorf("copy %s to %s: %w", src.Location(), dst.Location(), ErrCopySameStore)
	}
	batch := o.Batch
	switch {
	case batch < 0:
		return res, fmt.Errorf("copy: negative batch size %d", batch)
	case batch == 0:
		batch = DefaultCopyBatch
	}
	r := &copyRun{ctx: ctx, dst: dst, src: src, batch: batch, o: o, res: &res}
	err := r.check()
	if errors.Is(err, ErrCopyConflict) {
		return res, fmt.Errorf("copy: refused, nothing copied: %w", err)
	}
	if err != nil {
		return res, fmt.Errorf("copy: %w", err)
	}
	if err := r.copy(); err != nil {
		return res, fmt.Errorf("copy: %w", err)
	}
	if err := r.verify(); err != nil {
		return res, fmt.Errorf("copy: verify: %w", err)
	}
	return res, nil
}

// copyRun is one Copy: its stores, its options and what it did so far.
type copyRun struct {
	ctx      context.Context
	dst, src *Store
	batch    int
	o        CopyOptions
	res      *CopyResult
}

func (r *copyRun) progress(stage CopyStage, done int64) {
	if r.o.Progress != nil {
		r.o.Progress(CopyProgress{Stage: stage, Done: done, Total: r.res.Parts, Result: *r.res})
	}
}

// check is the first pass: nothing is written while a conflict may still
// turn up.
func (r *copyRun) check() error {
	var done int64
	err := eachPage(r.ctx, r.src.ix, r.batch, func(ps []index.Part) error {
		if _, err := r.dst.ix.CheckImport(r.ctx, ps); err != nil {
			return err
		}
		done += int64(len(ps))
		r.progress(CopyChecking, done)
		return nil
	})
	if err == nil {
		r.res.Parts = done
	}
	return err
}

// copy is the second pass, made again while a pass finds parts written to
// the source meanwhile. Only the first pass counts what it skips: the
// later ones skip what the first copied.
func (r *copyRun) copy() error {
	for {
		c := copier{ctx: r.ctx, dst: r.dst, src: r.src, res: r.res, first: r.res.Passes == 0}
		copied := r.res.PartsCopied
		var done int64
		err := eachPage(r.ctx, r.src.ix, r.batch, func(ps []index.Part) error {
			if err := c.page(ps); err != nil {
				return err
			}
			done += int64(len(ps))
			r.progress(CopyCopying, done)
			return nil
		})
		if err != nil {
			return err
		}
		c.endBlob()
		r.res.Passes++
		r.res.Parts = max(r.res.Parts, done)
		if r.res.PartsCopied == copied || r.res.Passes >= CopyPassesMax {
			return nil
		}
	}
}

// verify is the last pass: every part of the source resolves in the
// destination, the same, and its blob reads back from there checked.
func (r *copyRun) verify() error {
	var done int64
	v := copyVerifier{run: r, late: copier{ctx: r.ctx, dst: r.dst, src: r.src, res: r.res}}
	return eachPage(r.ctx, r.src.ix, r.batch, func(ps []index.Part) error {
		for _, p := range ps {
			if err := v.part(p); err != nil {
				return err
			}
		}
		done += int64(len(ps))
		r.progress(CopyVerifying, done)
		return nil
	})
}

// copyVerifier checks the parts of the source in the destination, one
// after another in the order of their blobs.
type copyVerifier struct {
	run *copyRun
	// late copies what the copying passes missed, and blobs again.
	late copier
	// last is the blob read back last: the parts sharing it come together.
	last cas.Blob
}

func (v *copyVerifier) part(p index.Part) error {
	ctx, dst, res := v.run.ctx, v.run.dst, v.run.res
	q, err := dst.ix.PartAt(ctx, p.Run, p.Key, p.Version)
	if errors.Is(err, index.ErrNotFound) {
		// Written to the source after the last copying pass went by its
		// blob: copied now, then verified as any other.
		if err := v.late.page([]index.Part{p}); err != nil {
			return err
		}
		v.late.endBlob()
		v.late.seen = false
		q, err = dst.ix.PartAt(ctx, p.Run, p.Key, p.Version)
		res.Parts++
	}
	if errors.Is(err, index.ErrNotFound) {
		return fmt.Errorf("%w: %s version %d is not in the destination", ErrCopyMismatch, p.Key, p.Version)
	}
	if err != nil {
		return err
	}
	if !index.SamePart(p, q) {
		return fmt.Errorf("%w: %s version %d is %s of %s in the source, %s of %s in the destination",
			ErrCopyMismatch, p.Key, p.Version, p.Blob, p.CreatedAt.UTC(), q.Blob, q.CreatedAt.UTC())
	}
	res.PartsVerified++
	if q.Blob == v.last {
		return nil
	}
	if err := readBack(ctx, dst.eng.backend(), q.Blob); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s version %d: %w", ErrCopyMismatch, p.Key, p.Version, err)
		}
		// Missing, or damaged however the read says so (the digest, or an
		// object store's own checksum): copied again.
		if rerr := v.late.repairBlob(p); rerr != nil {
			return fmt.Errorf("%w: %s version %d: %w; copying it again: %w", ErrCopyMismatch, p.Key, p.Version, err, rerr)
		}
		if err := readBack(ctx, dst.eng.backend(), q.Blob); err != nil {
			return fmt.Errorf("%w: %s version %d, copied again: %w", ErrCopyMismatch, p.Key, p.Version, err)
		}
		res.BlobsRepaired++
	}
	v.last = q.Blob
	res.BlobsVerified++
	return nil
}

// CopyPassesMax bounds Copy's copying passes over a source that keeps
// being written to.
const CopyPassesMax = 8

// copier is Copy's copying pass. The parts come a blob at a time: blob is
// the blob of the last part seen, and ensured whether this pass has made
// sure the destination holds it. first is set on the first pass, the one
// that counts what is skipped.
type copier struct {
	ctx      context.Context
	dst, src *Store
	res      *CopyResult
	first    bool
	blob     cas.Blob
	seen     bool
	ensured  bool
}

// page copies one batch of parts: the blobs of the parts the destination
// lacks, then their rows, in one transaction, under the writers' lock (on
// an object store, a blob lease).
func (c *copier) page(ps []index.Part) error {
	present, err := c.dst.ix.CheckImport(c.ctx, ps)
	if err != nil {
		return err
	}
	// todo are the parts to record; need one part of each blob that this
	// pass has not yet made sure the destination holds.
	var todo, need []index.Part
	for i, p := range ps {
		if !c.seen || p.Blob != c.blob {
			c.endBlob()
			c.blob, c.seen, c.ensured = p.Blob, true, false
		}
		if present[i] {
			if c.first {
				c.res.PartsSkipped++
			}
			continue
		}
		todo = append(todo, p)
		if !c.ensured {
			need = append(need, p)
			c.ensured = true
		}
	}
	if len(todo) == 0 {
		return nil
	}
	// put may run twice on an object store (see sharedEngine.guard): what
	// it counts is what its last run found.
	var blobs CopyResult
	put := func(ctx context.Context) ([]cas.PutResult, error) {
		blobs = CopyResult{}
		var puts []cas.PutResult
		for _, p := range need {
			r, err := c.copyBlob(ctx, p, &blobs)
			if err != nil {
				return puts, err
			}
			puts = append(puts, r)
		}
		// A test's way to stop a copy with the batch's blobs stored and
		// its rows not yet committed.
		return puts, fault(c.dst.eng, "copy:blobs")
	}
	var n int
	// commit's ctx carries the blob lease on an object store, so that the
	// transaction checks it still holds.
	commit := func(ctx context.Context) (err error) {
		n, err = c.dst.ix.Import(ctx, todo)
		return err
	}
	if err := c.dst.eng.guard(c.ctx, put, commit); err != nil {
		return err
	}
	c.res.BlobsCopied += blobs.BlobsCopied
	if c.first {
		c.res.BlobsSkipped += blobs.BlobsSkipped
	}
	c.res.BytesCopied += blobs.BytesCopied
	c.res.PartsCopied += int64(n)
	c.res.PartsSkipped += int64(len(todo) - n)
	return nil
}

// endBlob counts the last blob seen as skipped when none of its parts
// needed it copied: the destination held them all.
func (c *copier) endBlob() {
	if c.seen && !c.ensured && c.first {
		c.res.BlobsSkipped++
	}
}

// rewriter is a blob backend whose Put trusts an object of the blob's name
// and size as the blob (s3blob's), with a put that overwrites whatever the
// name holds, for a blob a read found damaged.
type rewriter interface {
	Rewrite(ctx context.Context, r io.Reader, ext string) (cas.PutResult, error)
}

var _ rewriter = (*s3blob.Backend)(nil)

// repairBlob copies p's blob from the source into the destination again,
// checked, over whatever the destination holds at its name: the
// destination's rows name it, and a read there found it missing or
// damaged. A directory store's put replaces a file of other bytes; an
// object store's trusts an object of the right size, so it is rewritten.
func (c *copier) repairBlob(p index.Part) error {
	put := func(ctx context.Context) ([]cas.PutResult, error) {
		r, err := c.src.eng.backend().Open(ctx, p.Blob)
		if err != nil {
			return nil, fmt.Errorf("read blob %s from the source: %w", p.Blob, err)
		}
		defer r.Close()
		be := c.dst.eng.backend()
		var res cas.PutResult
		if rw, ok := be.(rewriter); ok {
			res, err = rw.Rewrite(ctx, r, p.Blob.Ext)
		} else {
			res, err = be.Put(ctx, r, p.Blob.Ext)
		}
		if err != nil {
			return nil, fmt.Errorf("copy blob %s: %w", p.Blob, err)
		}
		if res.Blob != p.Blob {
			return nil, fmt.Errorf("blob %s was stored as %s", p.Blob, res.Blob)
		}
		// Not to be left to gc however this ends: rows name it.
		return nil, nil
	}
	return c.dst.eng.guard(c.ctx, put, func(context.Context) error { return nil })
}

// copyBlob makes sure the destination holds p's blob, copying it from the
// source, checked, when it does not, and counts what it did in res. It
// returns what the put did, for the guard to leave to gc a blob it made
// whose rows did not commit.
func (c *copier) copyBlob(ctx context.Context, p index.Part, res *CopyResult) (cas.PutResult, error) {
	have, err := cas.Has(ctx, c.dst.eng.backend(), p.Blob)
	if err != nil {
		return cas.PutResult{}, fmt.Errorf("%s: blob %s in the destination: %w", p.Key, p.Blob, err)
	}
	if have {
		res.BlobsSkipped++
		return cas.PutResult{Blob: p.Blob, Existed: true}, nil
	}
	r, err := c.src.eng.backend().Open(ctx, p.Blob)
	if err != nil {
		return cas.PutResult{}, fmt.Errorf("%s: read blob %s: %w", p.Key, p.Blob, err)
	}
	defer r.Close()
	put, err := c.dst.eng.backend().Put(ctx, r, p.Blob.Ext)
	if err != nil {
		return cas.PutResult{}, fmt.Errorf("%s: copy blob %s: %w", p.Key, p.Blob, err)
	}
	if put.Blob != p.Blob {
		// The source's reader checks the digest: this cannot happen.
		return put, fmt.Errorf("%s: blob %s was stored as %s", p.Key, p.Blob, put.Blob)
	}
	if put.Existed {
		res.BlobsSkipped++
		return put, nil
	}
	res.BlobsCopied++
	res.BytesCopied += put.Size
	return put, nil
}

// readBack reads a blob from where a backend stores it, past any cache,
// checked against its digest.
func readBack(ctx context.Context, b cas.Backend, blob cas.Blob) error {
	r, err := cas.OpenStored(ctx, b, blob)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(io.Discard, r)
	return err
}

// eachPage calls f with the parts of an index, n at a time, a blob's parts
// together (see index.PartsByBlob).
func eachPage(ctx context.Context, x *index.Index, n int, f func([]index.Part) error) error {
	var cur index.Cursor
	for {
		ps, next, err := x.PartsByBlob(ctx, cur, n)
		if err != nil {
			return err
		}
		if len(ps) == 0 {
			return nil
		}
		if err := f(ps); err != nil {
			return err
		}
		cur = next
	}
}

// sameStore reports whether two open stores are one: the same directory,
// the same object store location, or one index (a PostgreSQL database both
// name).
func sameStore(a, b *Store) bool {
	if a.ix.Path() == b.ix.Path() || a.Location() == b.Location() {
		return true
	}
	fa, errA := os.Stat(a.dir)
	fb, errB := os.Stat(b.dir)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
