package index

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jmoiron/sqlx"
)

// listGroup is a run, or a run's group of one tool, and the time of its
// newest part (counts.last_at).
type listGroup struct {
	RunID int64 `db:"run_id"`
	Last  int64 `db:"newest"`
}

// listGroupsSQL orders the runs by their newest part, newest first; with a
// tool, the runs' groups of that tool. The dates are the counts rows',
// which the triggers keep exact, so that no part is read to order them.
func listGroupsSQL(tool bool) string {
	if tool {
		return `SELECT run_id, last_at AS newest FROM counts
			WHERE tool = ? AND last_at IS NOT NULL AND last_at >= ? ORDER BY last_at DESC, run_id`
	}
	return `SELECT run_id, max(last_at) AS newest FROM counts WHERE last_at IS NOT NULL
		GROUP BY run_id HAVING max(last_at) >= ? ORDER BY newest DESC, run_id`
}

// listRunSQL reads one run's newest parts matching the filters, from a
// time on, newest first: a walk of parts_run (run_id, created_at) from the
// run's newest end. Its arguments are the run's id, the tool if tool, the
// kind if kind, the oldest time, and the limit.
func listRunSQL(tool, kind, allVersions bool) string {
	where := []string{"p.run_id = ?"}
	if tool {
		where = append(where, "p.tool = ?")
	}
	if kind {
		where = append(where, "p.kind = ?")
	}
	where = append(where, "p.created_at >= ?")
	if !allVersions {
		where = append(where, "NOT EXISTS (SELECT 1 FROM parts n WHERE n.key = p.key AND n.run_id = p.run_id AND n.version > p.version)")
	}
	return `SELECT ` + partColumns + ` FROM parts p JOIN blobs b ON b.id = p.blob_id
		WHERE ` + strings.Join(where, " AND ") + `
		ORDER BY p.created_at DESC, p.id DESC LIMIT ?`
}

// newer reports whether a comes before b in a listing: newer, or as new
// with the greater id.
func newer(a, b partRow) bool {
	if a.CreatedAt != b.CreatedAt {
		return a.CreatedAt > b.CreatedAt
	}
	return a.ID > b.ID
}

// listNewest returns the o.Limit newest parts matching o (no run given)
// without reading every part: the runs (or, with a tool, their groups of
// that tool) are taken newest first by the time of their newest part, each
// one's newest matching parts are read through the run's index, and the
// walk stops at the first run whose newest part is older than the
// o.Limit-th part found so far. Everything is read in one transaction, so
// that the dates and the parts agree whatever writers commit meanwhile.
func (x *Index) listNewest(ctx context.Context, o ListOptions) ([]Part, error) {
	var since int64 = -1 << 63
	if !o.Since.IsZero() {
		since = o.Since.UnixNano()
	}
	n := o.Limit
	runQ := listRunSQL(o.Tool != "", o.Kind != "", o.AllVersions)
	var found []partRow
	err := x.readTx(ctx, func(tx *sqlx.Tx) error {
		found = found[:0]
		var groups []listGroup
		gargs := []any{since}
		if o.Tool != "" {
			gargs = []any{o.Tool, since}
		}
		if err := sqlx.SelectContext(ctx, tx, &groups, listGroupsSQL(o.Tool != ""), gargs...); err != nil {
			return err
		}
		for _, g := range groups {
			from := since
			if len(found) == n {
				last := found[n-1].CreatedAt
				if g.Last < last {
					break // this run and every one after it: older than the n found
				}
				from = max(from, last)
			}
			args := []any{g.RunID}
			if o.Tool != "" {
				args = append(args, o.Tool)
			}
			if o.Kind != "" {
				args = append(args, string(o.Kind))
			}
			args = append(args, from, n)
			var rows []partRow
			if err := sqlx.SelectContext(ctx, tx, &rows, runQ, args...); err != nil {
				return err
			}
			if len(rows) == 0 {
				continue
			}
			found = append(found, rows...)
			sort.Slice(found, func(i, j int) bool { return newer(found[i], found[j]) })
			found = found[:min(len(found), n)]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return parts(found)
}
