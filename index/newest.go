package index

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// A reference by digest (or prefix, or path) names the newest part whose
// blob it is. Parts are indexed by blob and run, not by time, so the plain
// lookup reads every part sharing the blob and sorts them: fifty thousand
// rows, a fifth of a second, for a blob that many steps returned. For such
// a blob the newest part is looked for run by run instead, the runs
// newest first by their counts rows' dates: the first run holding the blob
// gives a candidate, and no run whose newest part is older than it can
// hold a newer one, so the walk usually stops after a run or two.

// newestWalkAbove is how many parts must share a blob (of a digest, all its
// extensions together) for Resolve to walk the runs: below it the plain
// lookup reads no more rows than a walk could.
const newestWalkAbove = 64

const (
	// sharedCountSQL counts the parts using the blobs of a digest, or of a
	// digest and an extension (with resolveExtSQL appended).
	sharedCountSQL = `SELECT coalesce(sum(part_count), 0) FROM blobs WHERE ` + digestIs
	resolveExtSQL  = ` AND ext = ?`
	// runsNewestSQL lists the runs with parts, newest first by their
	// newest part's date.
	runsNewestSQL = `SELECT run_id, max(last_at) AS last FROM counts WHERE parts > 0 AND last_at IS NOT NULL
		GROUP BY run_id ORDER BY last DESC, run_id`
)

// newestInRunSQL is the plain lookup of kind, a digest's or a path's,
// within one runs row (its id the last argument).
func newestInRunSQL(kind RefKind) string {
	ext := ""
	if kind == RefPath {
		ext = ` AND b.ext = ?`
	}
	return `SELECT ` + partColumns + ` FROM blobs b JOIN parts p ON p.blob_id = b.id
		WHERE ` + blobDigestIs + ext + ` AND p.run_id = ? ORDER BY p.created_at DESC, p.id DESC LIMIT 1`
}

// resolveShared runs the plain lookup q of a digest's or path's newest part
// in a read transaction, or, when more than newestWalkAbove parts share
// the blob, walks the runs newest first and looks in each.
func (x *Index) resolveShared(ctx context.Context, kind RefKind, q string, args []any) ([]partRow, error) {
	var rows []partRow
	err := x.readTx(ctx, func(tx *sqlx.Tx) error {
		rows = rows[:0]
		count := sharedCountSQL
		if kind == RefPath {
			count += resolveExtSQL
		}
		var n int64
		if err := tx.GetContext(ctx, &n, count, args...); err != nil {
			return err
		}
		if n <= newestWalkAbove {
			return tx.SelectContext(ctx, &rows, q, args...)
		}
		best, err := newestByRuns(ctx, tx, newestInRunSQL(kind), args)
		if best != nil {
			rows = append(rows, *best)
		}
		return err
	})
	return rows, err
}

// newestByRuns walks the runs newest first, looking in each for the newest
// part of q (args, then the run's id), until a run's newest part is older
// than the newest found.
func newestByRuns(ctx context.Context, tx *sqlx.Tx, q string, args []any) (*partRow, error) {
	type runLast struct {
		RunID int64 `db:"run_id"`
		Last  int64 `db:"last"`
	}
	var runs []runLast
	if err := tx.SelectContext(ctx, &runs, runsNewestSQL); err != nil {
		return nil, err
	}
	var best *partRow
	for _, r := range runs {
		if best != nil && r.Last < best.CreatedAt {
			break
		}
		var found []partRow
		if err := tx.SelectContext(ctx, &found, q, append(append([]any{}, args...), r.RunID)...); err != nil {
			return nil, err
		}
		for _, f := range found {
			if best == nil || f.CreatedAt > best.CreatedAt || f.CreatedAt == best.CreatedAt && f.ID > best.ID {
				f := f
				best = &f
			}
		}
	}
	return best, nil
}
