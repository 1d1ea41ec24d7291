package index

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
)

// BlobRow is a row of the blobs table.
type BlobRow = catalog.BlobRow

type blobRow struct {
	Digest         []byte `db:"digest"`
	Ext            string `db:"ext"`
	Size           int64  `db:"size"`
	FirstStored    int64  `db:"first_stored"`
	LastReferenced int64  `db:"last_referenced"`
	Parts          int64  `db:"parts"`
	VerifiedAt     *int64 `db:"verified_at"`
}

// row returns the BlobRow the row read says, or an error for a damaged
// row.
func (r blobRow) row() (BlobRow, error) {
	d, err := digestOf(r.Digest)
	if err != nil {
		return BlobRow{}, err
	}
	row := BlobRow{
		Blob: cas.Blob{Digest: d, Ext: r.Ext}, Size: r.Size,
		FirstStored: time.Unix(0, r.FirstStored), LastReferenced: time.Unix(0, r.LastReferenced), Parts: r.Parts,
	}
	if r.VerifiedAt != nil {
		row.VerifiedAt = time.Unix(0, *r.VerifiedAt)
	}
	return row, nil
}

// blobRows reads the blob rows q gives, in a read retried while busy.
func (x *Index) blobRows(ctx context.Context, q string, args ...any) ([]BlobRow, error) {
	rows, err := selectRows[blobRow](ctx, x, q, args...)
	if err != nil {
		return nil, err
	}
	return convertRows(rows, blobRow.row)
}

// ReferencedBlobs returns every blob that at least one part uses, with the
// number of parts using it.
func (x *Index) ReferencedBlobs(ctx context.Context) ([]BlobRow, error) {
	rows, err := x.blobRows(ctx, `SELECT b.digest, b.ext, b.size, b.first_stored, b.last_referenced, b.verified_at, count(*) AS parts
		FROM blobs b JOIN parts p ON p.blob_id = b.id GROUP BY b.id`)
	if err != nil {
		return nil, fmt.Errorf("referenced blobs: %w", err)
	}
	return rows, nil
}

// unreferencedSQL is gc's anti-join: blobs that no part uses.
const unreferencedSQL = `SELECT b.digest, b.ext, b.size, b.first_stored, b.last_referenced, b.verified_at, 0 AS parts
	FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM parts p WHERE p.blob_id = b.id)`

// UnreferencedBlobs returns every blob row that no part uses.
func (x *Index) UnreferencedBlobs(ctx context.Context) ([]BlobRow, error) {
	rows, err := x.blobRows(ctx, unreferencedSQL)
	if err != nil {
		return nil, fmt.Errorf("unreferenced blobs: %w", err)
	}
	return rows, nil
}

// blobSQL reads a blob's row by its digest and extension. Its parts are
// the count its row keeps (part_count, kept by the triggers on parts):
// counting them in parts_blob would read an entry for each of the parts
// sharing it, tens of thousands for a blob many steps return.
const blobSQL = `SELECT b.digest, b.ext, b.size, b.first_stored, b.last_referenced, b.verified_at, b.part_count AS parts
	FROM blobs b WHERE ` + blobDigestIs + ` AND b.ext = ?`

// Blob returns a blob's row, with ErrNotFound when there is none.
func (x *Index) Blob(ctx context.Context, b cas.Blob) (BlobRow, error) {
	rows, err := x.blobRows(ctx, blobSQL, digestKey(b.Digest), b.Digest[:], b.Ext)
	if err != nil {
		return BlobRow{}, fmt.Errorf("blob %s: %w", b, err)
	}
	if len(rows) == 0 {
		return BlobRow{}, fmt.Errorf("blob %s: %w", b, ErrNotFound)
	}
	return rows[0], nil
}

// DeleteUnreferenced deletes the rows of those blobs that no part uses and
// that were last referenced no later than cutoff, and returns the blobs whose rows
// it deleted: only those may gc unlink. Blobs without a row are returned as
// they are, since no part can use them.
func (x *Index) DeleteUnreferenced(ctx context.Context, blobs []cas.Blob, cutoff time.Time) ([]cas.Blob, error) {
	return x.DeleteUnreferencedAt(ctx, blobs, cutoff, x.now())
}

// DeleteUnreferencedAt is DeleteUnreferenced for a caller whose clock said
// now: a row last referenced after now (a clock set back since) counts as
// referenced at now.
func (x *Index) DeleteUnreferencedAt(ctx context.Context, blobs []cas.Blob, cutoff, now time.Time) ([]cas.Blob, error) {
	var gone []cas.Blob
	err := x.write(ctx, func(tx *sql.Tx) error {
		var err error
		gone, err = deleteUnreferenced(ctx, tx, blobs, cutoff, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete unreferenced blobs: %w", err)
	}
	return gone, nil
}

// deleteUnreferenced is DeleteUnreferencedAt's work in tx.
func deleteUnreferenced(ctx context.Context, tx *sql.Tx, blobs []cas.Blob, cutoff, now time.Time) ([]cas.Blob, error) {
	var gone []cas.Blob
	for _, b := range blobs {
		var id int64
		var last int64
		err := tx.QueryRowContext(ctx, `SELECT id, last_referenced FROM blobs WHERE `+digestIs+` AND ext = ?`,
			digestKey(b.Digest), b.Digest[:], b.Ext).Scan(&id, &last)
		if err == sql.ErrNoRows {
			gone = append(gone, b)
			continue
		}
		if err != nil {
			return nil, err
		}
		// A time in the future (a clock set back) counts as now.
		if min(last, now.UnixNano()) > cutoff.UnixNano() {
			continue
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM blobs WHERE id = ? AND NOT EXISTS (SELECT 1 FROM parts p WHERE p.blob_id = ?)`, id, id)
		if err != nil {
			return nil, err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			gone = append(gone, b)
		}
	}
	return gone, nil
}

// DeleteBlobRows deletes the rows of blobs no part uses, whatever their age:
// for rows whose files are already gone.
func (x *Index) DeleteBlobRows(ctx context.Context, blobs []cas.Blob) (int64, error) {
	var n int64
	err := x.write(ctx, func(tx *sql.Tx) error {
		n = 0
		for _, b := range blobs {
			res, err := tx.ExecContext(ctx, `DELETE FROM blobs WHERE `+digestIs+` AND ext = ?
				AND NOT EXISTS (SELECT 1 FROM parts p WHERE p.blob_id = blobs.id)`, digestKey(b.Digest), b.Digest[:], b.Ext)
			if err != nil {
				return err
			}
			k, _ := res.RowsAffected()
			n += k
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete blob rows: %w", err)
	}
	return n, nil
}

// PartsMissingBlob returns the parts whose blob fails present: for verify,
// the rows that point at a blob file that is not there.
func (x *Index) PartsMissingBlob(ctx context.Context, present func(cas.Blob) bool) ([]Part, error) {
	refs, err := x.ReferencedBlobs(ctx)
	if err != nil {
		return nil, err
	}
	var out []Part
	for _, r := range refs {
		if present(r.Blob) {
			continue
		}
		ps, err := x.Sharing(ctx, r.Blob)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// markChunk is how many blobs MarkVerified marks per transaction: one
// transaction for a million blobs held the write lock, and a log of every
// page it changed, for as long as it took.
const markChunk = 10000

// MarkVerified records that verify found these blobs whole at time t. It
// commits every markChunk blobs, so that writers wait for one chunk at
// most; an error leaves the chunks before it marked.
func (x *Index) MarkVerified(ctx context.Context, blobs []cas.Blob, t time.Time) error {
	for len(blobs) > 0 {
		n := min(len(blobs), markChunk)
		if err := x.markVerified(ctx, blobs[:n], t); err != nil {
			return err
		}
		blobs = blobs[n:]
	}
	return nil
}

func (x *Index) markVerified(ctx context.Context, blobs []cas.Blob, t time.Time) error {
	err := x.write(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `UPDATE blobs SET verified_at = ? WHERE `+digestIs+` AND ext = ?`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, b := range blobs {
			if _, err := stmt.ExecContext(ctx, t.UnixNano(), digestKey(b.Digest), b.Digest[:], b.Ext); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mark verified: %w", err)
	}
	return nil
}
