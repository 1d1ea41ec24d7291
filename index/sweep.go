package index

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	want := make(map[int64]cas.Blob, len(rows))
	for _, r := range rows {
		want[r.ID] = r.Blob
	}
	var gone []cas.Blob
	err := x.write(ctx, func(tx *sql.Tx) error {
		gone = gone[:0]
		// The write transaction keeps the rows as they are read here
		// until the delete.
		ids, err := rowsOfTheirBlobs(ctx, tx, rows)
		if err != nil || len(ids) == 0 {
			return err
		}
		args := make([]any, 0, len(ids)+1)
		for _, id := range ids {
			args = append(args, id)
		}
		q := `DELETE FROM blobs WHERE id IN (?` + strings.Repeat(`, ?`, len(ids)-1) + `)
		AND NOT EXISTS (SELECT 1 FROM parts p WHERE p.blob_id = blobs.id)`
		if now.After(cutoff) {
			// Else every time counts as old: now is no later than cutoff.
			q += ` AND last_referenced <= ?`
			args = append(args, cutoff.UnixNano())
		}
		q += ` RETURNING id, digest, ext`
		res, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer res.Close()
		var other []int64
		if err := scanBlobRows(res, want, func(id int64, same bool) {
			if same {
				gone = append(gone, want[id])
			} else {
				other = append(other, id)
			}
		}); err != nil {
			return err
		}
		if len(other) > 0 {
			// Cannot be, the rows having been read in this transaction:
			// the delete must not stand. Rolling back keeps every row.
			return fmt.Errorf("%w: %d blob rows changed their blob during the delete, such as id %d; nothing deleted",
				errRowsChanged, len(other), other[0])
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index: delete unused blob rows: %w", err)
	}
	return gone, nil
}

// errRowsChanged says a row id no longer names the blob a mark read.
var errRowsChanged = errors.New("blob rows changed")

// rowsOfTheirBlobs returns, in the order of their ids, the ids among rows
// that still name the row of the blob given with them: SQLite gives a new
// row the id of the highest row deleted, so an id alone may name another
// blob's row since it was read.
func rowsOfTheirBlobs(ctx context.Context, tx *sql.Tx, rows []BlobID) ([]int64, error) {
	want := make(map[int64]cas.Blob, len(rows))
	ids := make([]int64, 0, len(rows))
	for _, r := range rows {
		want[r.ID] = r.Blob
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var out []int64
	for part := ids; len(part) > 0; {
		stmt := part[:min(len(part), rowsChunk)]
		part = part[len(stmt):]
		args := make([]any, len(stmt))
		for i, id := range stmt {
			args[i] = id
		}
		err := func() error {
			res, err := tx.QueryContext(ctx, `SELECT id, digest, ext FROM blobs WHERE id IN (?`+
				strings.Repeat(`, ?`, len(stmt)-1)+`)`, args...)
			if err != nil {
				return err
			}
			defer res.Close()
			return scanBlobRows(res, want, func(id int64, same bool) {
				if same {
					out = append(out, id)
				}
			})
		}()
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// BlobsWithRows returns those of these blobs that have a row, used or not:
// gc's last look, under gc.lock, before it unlinks the files of rows it
// deleted, since a writer may have stored the same content again since.
func (x *Index) BlobsWithRows(ctx context.Context, blobs []cas.Blob) (map[cas.Blob]bool, error) {
	out := map[cas.Blob]bool{}
	for len(blobs) > 0 {
		chunk := blobs[:min(len(blobs), rowsChunk)]
		blobs = blobs[len(chunk):]
		// The digests' starts, which blobs_digest holds, then the digests.
		args := make([]any, 2*len(chunk))
		for i, b := range chunk {
			args[i], args[len(chunk)+i] = digestKey(b.Digest), b.Digest[:]
		}
		in := `(?` + strings.Repeat(`, ?`, len(chunk)-1) + `)`
		q := `SELECT digest, ext FROM blobs WHERE substr(digest, 1, 8) IN ` + in + ` AND digest IN ` + in
		err := x.read(ctx, func() error {
			rows, err := x.db.QueryContext(ctx, q, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
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
			}
			return rows.Err()
		})
		if err != nil {
			return nil, fmt.Errorf("index: blobs with rows: %w", err)
		}
	}
	return out, nil
}

// rowsChunk bounds the blobs of one statement: SQLite takes at most 32,766
// parameters, PostgreSQL 65,535.
const rowsChunk = 1000

// MarkVerifiedRows records that verify found these blobs whole at time t,
// a check that began at since, finding their rows by id: a statement per
// rowsChunk rows, in the order of their ids, and a transaction per
// markChunk rows, so that writers wait for one such transaction at most.
// Only a row that is still the row of the blob given with its id, and was
// first stored before since, is marked: gc may have deleted the row verify
// read and a writer's new row taken its id, for another blob or for the
// same one stored anew, whose file verify did not hash. A row stored at
// since itself is left for the next verify: with equal times it may be
// such a new row. An error leaves the chunks before it marked.
func (x *Index) MarkVerifiedRows(ctx context.Context, rows []BlobID, since, t time.Time) error {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b BlobID) int { return cmp.Compare(a.ID, b.ID) })
	for len(rows) > 0 {
		batch := rows[:min(len(rows), markChunk)]
		rows = rows[len(batch):]
		err := x.write(ctx, func(tx *sql.Tx) error {
			chunk, err := rowsOfTheirBlobs(ctx, tx, batch)
			if err != nil {
				return err
			}
			for part := chunk; len(part) > 0; {
				stmt := part[:min(len(part), rowsChunk)]
				part = part[len(stmt):]
				args := make([]any, 0, len(stmt)+2)
				args = append(args, t.UnixNano(), since.UnixNano())
				for _, id := range stmt {
					args = append(args, id)
				}
				if _, err := tx.ExecContext(ctx, `UPDATE blobs SET verified_at = ? WHERE first_stored < ? AND id IN (?`+
					strings.Repeat(`, ?`, len(stmt)-1)+`)`, args...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("index: mark verified: %w", err)
		}
	}
	return nil
}

// scanBlobRows reads rows of a blob row's id, digest and extension, and
// calls f with each id and whether the row still names the blob want gives
// for that id.
func scanBlobRows(res *sql.Rows, want map[int64]cas.Blob, f func(id int64, same bool)) error {
	for res.Next() {
		var (
			id     int64
			digest []byte
			ext    string
		)
		if err := res.Scan(&id, &digest, &ext); err != nil {
			return err
		}
		b, ok := want[id]
		f(id, ok && len(digest) == cas.DigestSize && cas.Digest(digest) == b.Digest && ext == b.Ext)
	}
	return res.Err()
}
