package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// BlobID names a blob row by its id, as a mark read it, and the blob it
// was the row of.
type BlobID struct {
	ID   int64
	Blob cas.Blob
}

// DeleteUnusedRows deletes, in one transaction, the rows among these that
// no part uses and that were last referenced no later than cutoff (a time
// after now counting as now), and returns the blobs whose rows it deleted:
// only those rows are gone. A row is found by its id and must still be the
// row of the blob named with it; a row whose id names another blob now (a
// writer's new row took the id of a row deleted since the mark) is left
// alone, and the others are deleted. It is gc's delete for rows a mark
// listed: one statement for them all, the rows taken in the order of their
// ids, so that it touches the table's pages in order.
func (x *Index) DeleteUnusedRows(ctx context.Context, rows []BlobID, cutoff, now time.Time) ([]cas.Blob, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	want, ids := byID(rows, func(r BlobID) (int64, cas.Blob) { return r.ID, r.Blob })
	var gone []cas.Blob
	// First the rows by id alone, each deleted row's blob checked as the
	// delete returns it: an id names another blob's row only when a
	// writer's new row took the id of a row deleted since the mark, and
	// then the transaction is rolled back and done again, each id first
	// read to keep only the rows still of their blobs.
	err := x.write(ctx, func(tx *sql.Tx) error {
		var err error
		gone, err = deleteUnusedByID(ctx, tx, ids, want, cutoff, now)
		return err
	})
	if errors.Is(err, errRowsChanged) {
		err = x.write(ctx, func(tx *sql.Tx) error {
			// The write transaction keeps the rows as they are read here
			// until the delete.
			keep, err := idsStillMatching(ctx, tx, ids, wanted(want))
			if err != nil || len(keep) == 0 {
				gone = nil
				return err
			}
			gone, err = deleteUnusedByID(ctx, tx, keep, want, cutoff, now)
			if errors.Is(err, errRowsChanged) {
				// Cannot be, the rows having been read in this
				// transaction: the delete must not stand. Rolling back
				// keeps every row.
				return fmt.Errorf("%w during the delete; nothing deleted", err)
			}
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("delete unused blob rows: %w", err)
	}
	return gone, nil
}

// deleteUnusedByID deletes the rows with these ids (in order) that no part
// uses and that were last referenced no later than cutoff (any time when
// now is no later than cutoff), and returns their blobs. It fails with
// errRowsChanged, leaving the transaction to be rolled back, when a row it
// deleted is not the row of the blob want gives for its id.
func deleteUnusedByID(ctx context.Context, tx *sql.Tx, ids []int64, want map[int64]cas.Blob, cutoff, now time.Time) ([]cas.Blob, error) {
	args := idArgs(ids)
	q := `DELETE FROM blobs WHERE id IN ` + placeholders(len(ids)) + `
		AND NOT EXISTS (SELECT 1 FROM parts p WHERE p.blob_id = blobs.id)`
	if now.After(cutoff) {
		// Else every time counts as old: now is no later than cutoff.
		q += ` AND last_referenced <= ?`
		args = append(args, cutoff.UnixNano())
	}
	q += ` RETURNING id, digest, ext`
	var gone []cas.Blob
	var other []int64
	same := wanted(want)
	if err := queryBlobRows(ctx, tx, q, args, func(id int64, digest []byte, ext string) error {
		if same(id, digest, ext) {
			gone = append(gone, want[id])
		} else {
			other = append(other, id)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if len(other) > 0 {
		return nil, fmt.Errorf("%w: %d blob rows name other blobs than the mark read, such as id %d", errRowsChanged, len(other), other[0])
	}
	return gone, nil
}

// errRowsChanged says a row id no longer names the blob a mark read.
var errRowsChanged = errors.New("blob rows changed")

// idsStillMatching returns, in order, those of ids (in order) whose rows
// are still the rows same expects for them, read in tx a statement per
// rowsChunk ids: SQLite gives a new row the id of the highest row deleted,
// so an id alone may name another blob's row since it was read.
func idsStillMatching(ctx context.Context, tx *sql.Tx, ids []int64, same blobTest) ([]int64, error) {
	var keep []int64
	for stmt := range slices.Chunk(ids, rowsChunk) {
		err := queryBlobRows(ctx, tx, blobsByIDSQL(len(stmt)), idArgs(stmt), func(id int64, digest []byte, ext string) error {
			if same(id, digest, ext) {
				keep = append(keep, id)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(keep)
	return keep, nil
}

// BlobsWithRows returns those of these blobs that have a row, used or not:
// gc's last look, under gc.lock, before it unlinks the files of rows it
// deleted, since a writer may have stored the same content again since.
func (x *Index) BlobsWithRows(ctx context.Context, blobs []cas.Blob) (map[cas.Blob]bool, error) {
	out := map[cas.Blob]bool{}
	for chunk := range slices.Chunk(blobs, rowsChunk) {
		// The digests' starts, which blobs_digest holds, then the digests.
		args := make([]any, 2*len(chunk))
		for i, b := range chunk {
			args[i], args[len(chunk)+i] = digestKey(b.Digest), b.Digest[:]
		}
		in := placeholders(len(chunk))
		q := `SELECT digest, ext FROM blobs WHERE substr(digest, 1, 8) IN ` + in + ` AND digest IN ` + in
		err := x.read(ctx, func() error {
			return queryRows(ctx, x.db, q, args, func(rows *sql.Rows) error {
				var (
					digest []byte
					ext    string
				)
				if err := rows.Scan(&digest, &ext); err != nil {
					return err
				}
				if len(digest) == cas.DigestSize {
					out[cas.Blob{Digest: cas.Digest(digest), Ext: ext}] = true
				}
				return nil
			})
		})
		if err != nil {
			return nil, fmt.Errorf("blobs with rows: %w", err)
		}
	}
	return out, nil
}

// rowsChunk bounds the blobs of one statement: SQLite takes at most 32,766
// parameters, PostgreSQL 65,535.
const rowsChunk = 1000

// CheckedRow names a blob row verify found whole by its id and a 16-bit
// check of its blob (RowCheck of the blob's digest and extension): the
// least verify can keep of each of a million rows, in two bytes and a bit,
// to tell a row from that of another blob that took its id since. A new
// row takes an id only once verify has begun, and is then left alone by
// its first_stored time; the check is for a clock set back meanwhile.
type CheckedRow struct {
	ID    int64
	Check uint16
}

// RowCheck returns the 16-bit check of a blob that CheckedRow holds: a
// hash of its digest's first eight bytes and its extension.
func RowCheck(d cas.Digest, ext string) uint16 {
	return rowCheck(d[:8], ext)
}

// rowCheck is RowCheck of a digest's bytes as a row gives them.
func rowCheck(prefix []byte, ext string) uint16 {
	// FNV-1a, 32 bits, folded.
	h := uint32(2166136261)
	for _, c := range prefix[:min(len(prefix), 8)] {
		h = (h ^ uint32(c)) * 16777619
	}
	h = (h ^ 0xff) * 16777619
	for i := 0; i < len(ext); i++ {
		h = (h ^ uint32(ext[i])) * 16777619
	}
	return uint16(h>>16) ^ uint16(h)
}

// MarkVerifiedChecked records that verify found these rows whole at time
// t, a check that began at since. The rows come named as CheckedRow, in
// the order of their ids: verify gathers every row it found whole and
// marks them at its end in that order, so that each page of the table is
// written once, where marking them in the order verify found them (of
// their digests) wrote most pages once per chunk. A statement marks
// rowsChunk rows, a transaction markChunk, so that writers wait for one
// such transaction at most. Only a row that is still the row of the blob
// whose check is given with its id, and was first stored before since, is
// marked: gc may have deleted the row verify read and a writer's new row
// taken its id, for another blob or for the same one stored anew, whose
// file verify did not hash. A row stored at since itself is left for the
// next verify: with equal times it may be such a new row. An error leaves
// the chunks before it marked.
func (x *Index) MarkVerifiedChecked(ctx context.Context, rows []CheckedRow, since, t time.Time) error {
	for len(rows) > 0 {
		batch := rows[:min(len(rows), markChunk)]
		rows = rows[len(batch):]
		want, ids := byID(batch, func(r CheckedRow) (int64, uint16) { return r.ID, r.Check })
		same := func(id int64, digest []byte, ext string) bool {
			c, ok := want[id]
			return ok && len(digest) == cas.DigestSize && rowCheck(digest, ext) == c
		}
		if err := x.markVerifiedMatching(ctx, ids, same, since, t); err != nil {
			return err
		}
	}
	return nil
}

// markVerifiedMatching marks verified at t, in one transaction, the rows
// with these ids (in order) first stored before since, when each is the
// row same expects for its id; when one is not, the transaction is done
// again, each id first read to keep only the rows still of their blobs.
func (x *Index) markVerifiedMatching(ctx context.Context, ids []int64, same blobTest, since, t time.Time) error {
	err := x.write(ctx, func(tx *sql.Tx) error {
		return markByIDMatching(ctx, tx, ids, same, since, t)
	})
	if errors.Is(err, errRowsChanged) {
		err = x.write(ctx, func(tx *sql.Tx) error {
			keep, err := idsStillMatching(ctx, tx, ids, same)
			if err != nil {
				return err
			}
			return markByIDMatching(ctx, tx, keep, same, since, t)
		})
	}
	if err != nil {
		return fmt.Errorf("mark verified: %w", err)
	}
	return nil
}

// markByIDMatching marks verified at t the rows with these ids (in order)
// first stored before since, a statement per rowsChunk ids. It fails with
// errRowsChanged, leaving the transaction to be rolled back, when a row it
// marked is not the row same expects for its id.
func markByIDMatching(ctx context.Context, tx *sql.Tx, ids []int64, same blobTest, since, t time.Time) error {
	for stmt := range slices.Chunk(ids, rowsChunk) {
		args := append([]any{t.UnixNano(), since.UnixNano()}, idArgs(stmt)...)
		var other []int64
		err := queryBlobRows(ctx, tx, `UPDATE blobs SET verified_at = ? WHERE first_stored < ? AND id IN `+
			placeholders(len(stmt))+` RETURNING id, digest, ext`, args, func(id int64, digest []byte, ext string) error {
			if !same(id, digest, ext) {
				other = append(other, id)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(other) > 0 {
			return fmt.Errorf("%w: %d blob rows name other blobs than verify read, such as id %d", errRowsChanged, len(other), other[0])
		}
	}
	return nil
}

// blobTest says whether a row, of a blob row's id, digest and extension,
// is the row a caller expects for that id.
type blobTest func(id int64, digest []byte, ext string) bool

// queryBlobRows runs q, which returns rows of a blob row's id, digest and
// extension, and calls f with each row's, until f fails.
func queryBlobRows(ctx context.Context, db queryer, q string, args []any, f func(id int64, digest []byte, ext string) error) error {
	return queryRows(ctx, db, q, args, func(rows *sql.Rows) error {
		var (
			id     int64
			digest []byte
			ext    string
		)
		if err := rows.Scan(&id, &digest, &ext); err != nil {
			return err
		}
		return f(id, digest, ext)
	})
}

// blobsByIDSQL is the query of the id, digest and extension of the blob
// rows with n ids, the statement's parameters.
func blobsByIDSQL(n int) string {
	return `SELECT id, digest, ext FROM blobs WHERE id IN ` + placeholders(n)
}

// byID returns what each of rows names, by its id (a later row's, of rows
// that share one), and the ids in order, each once: what a write of the
// rows a mark listed checks them by and takes them in.
func byID[R, V any](rows []R, of func(R) (int64, V)) (map[int64]V, []int64) {
	want := make(map[int64]V, len(rows))
	ids := make([]int64, 0, len(rows))
	for _, r := range rows {
		id, v := of(r)
		want[id] = v
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return want, slices.Compact(ids)
}

// wanted returns the blobTest that a row names the blob want gives for
// its id.
func wanted(want map[int64]cas.Blob) blobTest {
	return func(id int64, digest []byte, ext string) bool {
		b, ok := want[id]
		return ok && len(digest) == cas.DigestSize && cas.Digest(digest) == b.Digest && ext == b.Ext
	}
}
