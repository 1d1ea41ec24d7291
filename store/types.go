package store

import (
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
)

// Part is a stored part: one part of one tool result, one version of its
// key.
type Part struct {
	// ID is the part's row in the index.
	ID int64
	// Key is the rendered key; Run, Step, Tool, CallID and Part (the
	// part's position in its result) are its columns.
	Key     string
	Run     string
	Step    int
	Tool    string
	CallID  string
	Part    int
	Version int
	Kind    hook.Kind
	// MIME and Filename are as the tool gave them.
	MIME     string
	Filename string
	// Chars counts a text part's code points; Bytes its size.
	Chars     int64
	Bytes     int64
	Blob      cas.Blob
	CreatedAt time.Time
}

func partOf(p index.Part) Part {
	return Part{ID: p.ID, Key: p.Key, Run: p.Run, Step: p.Step, Tool: p.Tool, CallID: p.CallID, Part: p.Part,
		Version: p.Version, Kind: hook.Kind(p.Kind), MIME: p.MIME, Filename: p.Filename, Chars: p.Chars,
		Bytes: p.Bytes, Blob: p.Blob, CreatedAt: p.CreatedAt}
}

func partsOf(ps []index.Part) []Part {
	if ps == nil {
		return nil
	}
	out := make([]Part, len(ps))
	for i, p := range ps {
		out[i] = partOf(p)
	}
	return out
}

// ListOptions filters List. The zero value lists the newest version of every
// key, newest first.
type ListOptions struct {
	Run  string
	Tool string
	// Kind lists the parts of one kind.
	Kind hook.Kind
	// Since lists the parts created at or after it.
	Since time.Time
	// Limit is the most parts listed; 0 lists all.
	Limit int
	// AllVersions lists every version of each key, not only the newest.
	AllVersions bool
}

func (o ListOptions) index() index.ListOptions {
	return index.ListOptions{Run: o.Run, Tool: o.Tool, Kind: index.Kind(o.Kind), Since: o.Since, Limit: o.Limit,
		AllVersions: o.AllVersions}
}

// Stats summarises a store: how much the agents produced (logical bytes),
// how much the store holds for it (stored bytes, each blob once), and the
// difference.
type Stats struct {
	Runs  int64
	Parts int64
	// Blobs counts the distinct blobs the parts use.
	Blobs        int64
	LogicalBytes int64
	// StoredBytes is the size of the distinct blobs the parts use.
	StoredBytes int64
	// SavedBytes is LogicalBytes - StoredBytes.
	SavedBytes int64
	// DedupRatio is LogicalBytes / StoredBytes, 1 when nothing is stored.
	DedupRatio float64
	// IndexBytes is the index's size on disk.
	IndexBytes int64
	// UnreferencedBlobs and UnreferencedBytes count blobs no part uses
	// (after a prune, until gc); only in a whole store's stats.
	UnreferencedBlobs int64
	UnreferencedBytes int64
	// PackedBlobs and PackedBytes count the distinct blobs the parts use
	// that a pack holds, and their uncompressed size; the rest of
	// StoredBytes is in loose files.
	PackedBlobs int64
	PackedBytes int64
	// Packs counts the pack files; PackRawBytes is the uncompressed size of
	// every blob they hold (dead ones too, until gc rewrites them) and
	// PackFileBytes their size on disk; only in a whole store's stats.
	Packs         int64
	PackRawBytes  int64
	PackFileBytes int64
	// CompressionRatio is PackRawBytes / PackFileBytes, 1 without packs.
	CompressionRatio float64
	// Removals counts the entries of the removal log (see Removals),
	// RemovedParts the parts they removed, LastRemoval when the last was;
	// only in a whole store's stats.
	Removals     int64
	RemovedParts int64
	LastRemoval  time.Time
	ByTool       []GroupStats
	ByRun        []GroupStats
}

// GroupStats is the share of one tool or run. StoredBytes counts, in a
// whole store's stats, the blobs charged to the group (the groups add up to
// the total), and in a run's, the distinct blobs of the group (groups
// sharing blobs add up to more than the total).
type GroupStats struct {
	Name         string
	Parts        int64
	LogicalBytes int64
	StoredBytes  int64
	// First and Last are when the group's oldest and newest parts were
	// recorded.
	First time.Time
	Last  time.Time
}

func statsOf(s index.Stats) Stats {
	groups := func(gs []index.GroupStats) []GroupStats {
		if gs == nil {
			return nil
		}
		out := make([]GroupStats, len(gs))
		for i, g := range gs {
			out[i] = GroupStats(g)
		}
		return out
	}
	return Stats{Runs: s.Runs, Parts: s.Parts, Blobs: s.Blobs, LogicalBytes: s.LogicalBytes,
		StoredBytes: s.StoredBytes, SavedBytes: s.SavedBytes, DedupRatio: s.DedupRatio, IndexBytes: s.IndexBytes,
		UnreferencedBlobs: s.UnreferencedBlobs, UnreferencedBytes: s.UnreferencedBytes, PackedBlobs: s.PackedBlobs,
		PackedBytes: s.PackedBytes, Packs: s.Packs, PackRawBytes: s.PackRawBytes, PackFileBytes: s.PackFileBytes,
		CompressionRatio: s.CompressionRatio, ByTool: groups(s.ByTool), ByRun: groups(s.ByRun)}
}

// PruneOptions says which parts Prune removes; exactly one criterion is set.
type PruneOptions struct {
	// Run removes every part of the run.
	Run string
	// Before removes every part created before this time.
	Before time.Time
	// KeepRuns removes every part of all but the KeepRuns runs with the
	// newest parts.
	KeepRuns int
	// DryRun counts what would be removed and removes nothing.
	DryRun bool
}

// PruneResult says what Prune removed (or would remove, on a dry run).
type PruneResult struct {
	RemovedParts int64
	// Runs lists the runs that lost parts.
	Runs []string
}

// BlobRow is what the index knows of a blob.
type BlobRow struct {
	Blob           cas.Blob
	Size           int64
	FirstStored    time.Time
	LastReferenced time.Time
	// Parts counts the parts that use the blob.
	Parts int64
	// VerifiedAt is when verify last found the blob whole; zero if never.
	VerifiedAt time.Time
}
