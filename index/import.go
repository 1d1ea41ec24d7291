package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// ErrImportConflict is returned by CheckImport and Import when the index
// already holds, under the key and version of a part to import, a part with
// other content or columns, or when the key belongs to another call.
var ErrImportConflict = errors.New("already holds something else")

// A Cursor is a position in PartsByBlob's order; the zero Cursor is the
// start.
type Cursor struct{ blob, run, id int64 }

// exportRow is a part and the ids that order it.
type exportRow struct {
	partRow
	BlobID int64 `db:"blob_id"`
	RunID  int64 `db:"run_id"`
}

const partsByBlobSQL = `SELECT ` + partColumns + `, p.blob_id, p.run_id FROM parts p JOIN blobs b ON b.id = p.blob_id
	WHERE (p.blob_id, p.run_id, p.id) > (?, ?, ?) ORDER BY p.blob_id, p.run_id, p.id LIMIT ?`

// PartsByBlob returns up to limit parts after the cursor (every version of
// every key of every run), and the cursor after the last one. The parts are
// in the order of the blob they name, so that the parts sharing a blob come
// one after another: a copy handles each blob once. No parts: the end.
// The order follows the index of parts by blob, so that each page costs the
// same however far along it is.
func (x *Index) PartsByBlob(ctx context.Context, after Cursor, limit int) ([]Part, Cursor, error) {
	if limit <= 0 {
		return nil, after, fmt.Errorf("parts by blob: limit %d", limit)
	}
	rows, err := selectRows[exportRow](ctx, x, partsByBlobSQL, after.blob, after.run, after.id, limit)
	if err != nil {
		return nil, after, fmt.Errorf("parts by blob: %w", err)
	}
	out := make([]Part, 0, len(rows))
	for _, r := range rows {
		p, err := r.part()
		if err != nil {
			return nil, after, err
		}
		out = append(out, p)
		after = Cursor{blob: r.BlobID, run: r.RunID, id: r.ID}
	}
	return out, after, nil
}

// partAtSQL finds a version of a run's key by the run's name and the key's
// prefix, then the rest: a row of runs and a row of parts, each by its
// unique index.
const partAtSQL = `SELECT ` + partColumns + ` FROM parts p JOIN blobs b ON b.id = p.blob_id
	WHERE p.run_id = (SELECT id FROM runs WHERE name = ? AND prefix = ?) AND p.key = ? AND p.version = ?`

// PartAt returns version n of a run's key, or an error wrapping
// ErrNotFound.
func (x *Index) PartAt(ctx context.Context, run, key string, n int) (Part, error) {
	prefix, rest := splitKey(key)
	rows, err := selectRows[partRow](ctx, x, partAtSQL, run, prefix, rest, n)
	if err != nil {
		return Part{}, fmt.Errorf("%s@%d: %w", clip(key), n, err)
	}
	if len(rows) == 0 {
		return Part{}, fmt.Errorf("%s@%d: %w", clip(key), n, ErrNotFound)
	}
	return rows[0].part()
}

// SamePart reports whether two parts, of the same or of different indexes,
// are the same record: the same key and version, run, call, columns, blob
// and creation time. Their ids may differ.
func SamePart(a, b Part) bool {
	a.ID, b.ID = 0, 0
	return a.CreatedAt.Equal(b.CreatedAt) && a.Key == b.Key && a.Run == b.Run && a.Step == b.Step && a.Tool == b.Tool &&
		a.CallID == b.CallID && a.Part == b.Part && a.Version == b.Version && a.Kind == b.Kind && a.MIME == b.MIME &&
		a.Filename == b.Filename && a.Chars == b.Chars && a.Bytes == b.Bytes && a.Blob == b.Blob
}

// importState looks in a transaction, or the database, for what the index
// holds under a part's key and version: present reports the same part
// there; an error wrapping ErrImportConflict, something else there, or the
// key owned by another call.
func importState(ctx context.Context, q sqlQueryer, p Part) (present bool, err error) {
	prefix, rest := splitKey(p.Key)
	rows, err := q.QueryContext(ctx, partAtSQL, p.Run, prefix, rest, p.Version)
	if err != nil {
		return false, err
	}
	var held []partRow
	for rows.Next() {
		var r partRow
		if err := rows.Scan(&r.ID, &r.Key, &r.Run, &r.Step, &r.Tool, &r.CallID, &r.Part, &r.Version, &r.Kind, &r.MIME,
			&r.Filename, &r.Chars, &r.Bytes, &r.Digest, &r.Ext, &r.CreatedAt); err != nil {
			rows.Close()
			return false, err
		}
		held = append(held, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	for _, r := range held {
		h, err := r.part()
		if err != nil {
			return false, err
		}
		if SamePart(h, p) {
			return true, nil
		}
	}
	if len(held) > 0 {
		h, _ := held[0].part()
		return false, fmt.Errorf("%s version %d %w: %s of %s here, %s of %s to import", clip(p.Key), p.Version,
			ErrImportConflict, "blake3:"+h.Blob.Digest.Short(), h.CreatedAt.UTC().Format(time.RFC3339Nano),
			"blake3:"+p.Blob.Digest.Short(), p.CreatedAt.UTC().Format(time.RFC3339Nano))
	}
	var (
		version, step, part int
		run, tool, callID   string
	)
	err = q.QueryRowContext(ctx, keyOwnerSQL, rest, prefix).Scan(&version, &run, &step, &tool, &callID, &part)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if run != p.Run || step != p.Step || tool != p.Tool || callID != p.CallID || part != p.Part {
		return false, fmt.Errorf("%s %w: the key belongs to step %d, tool %q, call %q of run %q here, not to step %d, tool %q, call %q of run %q",
			clip(p.Key), ErrImportConflict, step, clip(tool), clip(callID), clip(run), p.Step, clip(p.Tool), clip(p.CallID), clip(p.Run))
	}
	return false, nil
}

// sqlQueryer is a database or a transaction.
type sqlQueryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// CheckImport reports, for each part, whether the index holds it already
// (true) or Import would record it (false). A part whose key and version
// hold something else, or whose key another call owns, is an error
// wrapping ErrImportConflict that names it. It writes nothing.
func (x *Index) CheckImport(ctx context.Context, ps []Part) ([]bool, error) {
	out := make([]bool, len(ps))
	err := x.readTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		for i, p := range ps {
			if out[i], err = importState(ctx, tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w", x.connError(err))
	}
	return out, nil
}

// Import records parts recorded in another index as they are there: each
// keeps its key, version, run, call, columns, blob and creation time (ids
// are this index's). A part is known by its key and version: one the index
// already holds, the same, is skipped, so that an import done again, or
// resumed after it was stopped, records each part once. One whose key and
// version hold something else, or whose key another call owns, is
// ErrImportConflict, and nothing of the call is recorded. Every part is
// recorded in one transaction, which refreshes its blobs' last-referenced
// time as Record does and keeps the counters Stats reads exact. It returns
// how many parts it recorded.
func (x *Index) Import(ctx context.Context, ps []Part) (int, error) {
	for _, p := range ps {
		if err := checkPart(newPartOf(p)); err != nil {
			return 0, fmt.Errorf("import: %w", err)
		}
		if p.Version < 1 {
			return 0, fmt.Errorf("import: %w %q: version %d", ErrInvalidPart, clip(p.Key), p.Version)
		}
	}
	var n int
	err := x.write(ctx, func(tx *sql.Tx) error {
		n = 0
		now := x.now().UnixNano()
		insertBlob := tx.StmtContext(ctx, x.stmts.insertBlob)
		touchBlob := tx.StmtContext(ctx, x.stmts.touchBlob)
		runID := tx.StmtContext(ctx, x.stmts.runID)
		insertRun := tx.StmtContext(ctx, x.stmts.insertRun)
		insertPart := tx.StmtContext(ctx, x.stmts.insertPart)
		for _, p := range ps {
			present, err := importState(ctx, tx, p)
			if err != nil {
				return err
			}
			if present {
				continue
			}
			prefix, rest := splitKey(p.Key)
			var run int64
			err = runID.QueryRowContext(ctx, p.Run, prefix).Scan(&run)
			if errors.Is(err, sql.ErrNoRows) {
				err = insertRun.QueryRowContext(ctx, p.Run, prefix).Scan(&run)
			}
			if err != nil {
				return fmt.Errorf("run %s: %w", clip(p.Run), err)
			}
			blobID, _, err := x.makeBlobRow(ctx, insertBlob, func() *sql.Stmt { return touchBlob }, p.Blob, p.Bytes, run, p.Tool, now)
			if err != nil {
				return err
			}
			if _, err := x.insertID(ctx, insertPart, run, rest, p.Step, p.Tool, p.CallID, p.Part, p.Version,
				string(p.Kind), p.MIME, p.Filename, p.Chars, p.Bytes, blobID, p.CreatedAt.UnixNano()); err != nil {
				return fmt.Errorf("insert %s version %d: %w", clip(p.Key), p.Version, err)
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("import: %w", err)
	}
	return n, nil
}

// newPartOf is a recorded part as Record would be given it.
func newPartOf(p Part) NewPart {
	return NewPart{Key: p.Key, Run: p.Run, Step: p.Step, Tool: p.Tool, CallID: p.CallID, Part: p.Part, Kind: p.Kind,
		MIME: p.MIME, Filename: p.Filename, Chars: p.Chars, Bytes: p.Bytes, Blob: p.Blob}
}
