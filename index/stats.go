package index

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/toolcas/toolcas/catalog"
)

// Stats summarises the index (see catalog.Stats).
type Stats = catalog.Stats

// GroupStats is the share of one tool or run.
type GroupStats = catalog.GroupStats

// Stats computes the statistics of the whole index, or of one run. The
// whole index's are read from the counters the index keeps as rows change
// (a few rows, whatever the number of parts); a run's are computed from its
// parts. In the whole index's ByTool and ByRun, a group's StoredBytes counts
// the blobs it is charged with (each blob in use is charged to one group
// that uses it, the first to, while it does), so that they add up to
// StoredBytes; in a run's, each group's distinct blobs.
func (x *Index) Stats(ctx context.Context, run string) (Stats, error) {
	if run == "" {
		return x.countedStats(ctx)
	}
	return x.scanStats(ctx, run)
}

// scanStats computes the statistics by reading each part row (of a run, or
// of all when run is "") once and aggregating in memory.
func (x *Index) scanStats(ctx context.Context, run string) (Stats, error) {
	var s Stats
	err := x.read(ctx, func() error {
		s = Stats{}
		sizes := map[int64]int64{}
		packed := map[int64]bool{}
		rows, err := x.db.QueryContext(ctx, `SELECT id, size, pack_id IS NOT NULL FROM blobs`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id, size int64
			var inPack bool
			if err := rows.Scan(&id, &size, &inPack); err != nil {
				rows.Close()
				return err
			}
			sizes[id] = size
			if inPack {
				packed[id] = true
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// The run of each row is its runs row's id, named once at the end.
		names := map[int64]string{}
		if rows, err = x.db.QueryContext(ctx, `SELECT id, name FROM runs`); err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			var name string
			if err := rows.Scan(&id, &name); err != nil {
				rows.Close()
				return err
			}
			names[id] = name
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		q, args := `SELECT run_id, tool, blob_id, bytes, created_at FROM parts`, []any{}
		if run != "" {
			q, args = q+` WHERE run_id IN (SELECT id FROM runs WHERE name = ?)`, []any{run}
		}
		if rows, err = x.db.QueryContext(ctx, q, args...); err != nil {
			return err
		}
		defer rows.Close()
		all := newGroup("")
		tools, runs := map[string]*group{}, map[string]*group{}
		byID := map[int64]*group{}
		for rows.Next() {
			var tool string
			var runID, blob, bytes, at int64
			if err := rows.Scan(&runID, &tool, &blob, &bytes, &at); err != nil {
				return err
			}
			all.add(blob, bytes, at)
			groupOf(tools, tool).add(blob, bytes, at)
			g := byID[runID]
			if g == nil {
				// A run whose keys were rendered two ways has two ids.
				g = groupOf(runs, names[runID])
				byID[runID] = g
			}
			g.add(blob, bytes, at)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		s.Parts, s.LogicalBytes = all.parts, all.logical
		s.Runs = int64(len(runs))
		s.Blobs = int64(len(all.blobs))
		s.StoredBytes = all.stored(sizes)
		for b := range all.blobs {
			if packed[b] {
				s.PackedBlobs++
				s.PackedBytes += sizes[b]
			}
		}
		s.ByTool = summarize(tools, sizes)
		s.ByRun = summarize(runs, sizes)
		if run == "" {
			row := x.db.QueryRowxContext(ctx, `SELECT count(*), coalesce(sum(size), 0) FROM blobs b
				WHERE NOT EXISTS (SELECT 1 FROM parts p WHERE p.blob_id = b.id)`)
			if err := row.Scan(&s.UnreferencedBlobs, &s.UnreferencedBytes); err != nil {
				return err
			}
			row = x.db.QueryRowxContext(ctx, `SELECT count(*), coalesce(sum(raw), 0), coalesce(sum(size), 0) FROM packs`)
			return row.Scan(&s.Packs, &s.PackRawBytes, &s.PackFileBytes)
		}
		return nil
	})
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	x.finish(&s)
	return s, nil
}

// finish sets the figures derived from the others.
func (x *Index) finish(s *Stats) {
	s.SavedBytes = s.LogicalBytes - s.StoredBytes
	s.DedupRatio = 1
	if s.StoredBytes > 0 {
		s.DedupRatio = float64(s.LogicalBytes) / float64(s.StoredBytes)
	}
	s.CompressionRatio = 1
	if s.PackFileBytes > 0 {
		s.CompressionRatio = float64(s.PackRawBytes) / float64(s.PackFileBytes)
	}
	s.IndexBytes = x.Size()
}

type group struct {
	name           string
	parts, logical int64
	first, last    int64
	blobs          map[int64]struct{}
}

func newGroup(name string) *group {
	return &group{name: name, blobs: map[int64]struct{}{}}
}

func groupOf(m map[string]*group, name string) *group {
	g := m[name]
	if g == nil {
		g = newGroup(name)
		m[name] = g
	}
	return g
}

func (g *group) add(blob, bytes, at int64) {
	if g.parts == 0 || at < g.first {
		g.first = at
	}
	if at > g.last {
		g.last = at
	}
	g.parts++
	g.logical += bytes
	g.blobs[blob] = struct{}{}
}

func (g *group) stored(sizes map[int64]int64) int64 {
	var n int64
	for b := range g.blobs {
		n += sizes[b]
	}
	return n
}

// summarize turns groups into GroupStats, largest logical share first.
func summarize(m map[string]*group, sizes map[int64]int64) []GroupStats {
	out := make([]GroupStats, 0, len(m))
	for _, g := range m {
		out = append(out, GroupStats{
			Name: g.name, Parts: g.parts, LogicalBytes: g.logical, StoredBytes: g.stored(sizes),
			First: time.Unix(0, g.first), Last: time.Unix(0, g.last),
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].LogicalBytes != out[j].LogicalBytes {
			return out[i].LogicalBytes > out[j].LogicalBytes
		}
		return out[i].Name < out[j].Name
	})
	return out
}
