// Package catalog holds the values that describe what a store holds: its
// parts, its blobs, its statistics and its log of removals. The index
// produces them and the store hands them on as they are, so that each is
// declared once.
package catalog

import (
	"time"

	"github.com/toolcas/toolcas/cas"
)

// Kind is what a part of a tool result holds.
type Kind string

// The kinds of part.
const (
	KindText  Kind = "text"
	KindImage Kind = "image"
	KindFile  Kind = "file"
)

// Part is a stored part: one part of one tool result, one version of its
// key.
type Part struct {
	// ID is the part's row in the index.
	ID int64
	// Key is the rendered key; Run, Step, Tool, CallID and Part (the
	// part's position in its result, -1 when the result has one part) are
	// its columns.
	Key     string
	Run     string
	Step    int
	Tool    string
	CallID  string
	Part    int
	Version int
	Kind    Kind
	// MIME and Filename are as the tool gave them.
	MIME     string
	Filename string
	// Chars counts a text part's code points; Bytes its size.
	Chars     int64
	Bytes     int64
	Blob      cas.Blob
	CreatedAt time.Time
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
	// Removals counts the entries of the removal log, RemovedParts the
	// parts they removed, LastRemoval when the last was; only in a whole
	// store's stats, and only from the store (the index's own stats leave
	// them zero).
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

// Removal is one entry of the removal log: the parts of one run that one
// prune removed, and the rule that removed them.
type Removal struct {
	At   time.Time
	Run  string
	Rule string
	// Parts counts the parts removed; FirstCreated and LastCreated span
	// their creation times.
	Parts        int64
	FirstCreated time.Time
	LastCreated  time.Time
}

// StatsReport is Stats as scripts and agents read it, as JSON (casctl
// stats --json, the MCP server's stats tool): its field names are a
// contract.
type StatsReport struct {
	Runs         int64   `json:"runs"`
	Parts        int64   `json:"parts"`
	Blobs        int64   `json:"blobs"`
	LogicalBytes int64   `json:"logical_bytes"`
	StoredBytes  int64   `json:"stored_bytes"`
	SavedBytes   int64   `json:"saved_bytes"`
	DedupRatio   float64 `json:"dedup_ratio"`
	IndexBytes   int64   `json:"index_bytes"`
	// Loose and packed shares of stored_bytes; the packs' own sizes.
	LooseBytes       int64   `json:"loose_bytes"`
	PackedBlobs      int64   `json:"packed_blobs"`
	PackedBytes      int64   `json:"packed_bytes"`
	Packs            int64   `json:"packs"`
	PackRawBytes     int64   `json:"pack_raw_bytes"`
	PackFileBytes    int64   `json:"pack_file_bytes"`
	CompressionRatio float64 `json:"compression_ratio"`
	// What prune and the retention policy removed over the store's life.
	Removals     int64        `json:"removals"`
	RemovedParts int64        `json:"removed_parts"`
	ByTool       []ToolReport `json:"by_tool"`
}

// ToolReport is one tool's share in a StatsReport.
type ToolReport struct {
	Tool         string `json:"tool"`
	Parts        int64  `json:"parts"`
	LogicalBytes int64  `json:"logical_bytes"`
	StoredBytes  int64  `json:"stored_bytes"`
}

// Report returns the statistics as scripts and agents read them.
func (st Stats) Report() StatsReport {
	out := StatsReport{Runs: st.Runs, Parts: st.Parts, Blobs: st.Blobs, LogicalBytes: st.LogicalBytes,
		StoredBytes: st.StoredBytes, SavedBytes: st.SavedBytes, DedupRatio: st.DedupRatio, IndexBytes: st.IndexBytes,
		LooseBytes: st.StoredBytes - st.PackedBytes, PackedBlobs: st.PackedBlobs, PackedBytes: st.PackedBytes,
		Packs: st.Packs, PackRawBytes: st.PackRawBytes, PackFileBytes: st.PackFileBytes, CompressionRatio: st.CompressionRatio,
		Removals: st.Removals, RemovedParts: st.RemovedParts, ByTool: make([]ToolReport, 0, len(st.ByTool))}
	for _, t := range st.ByTool {
		out.ByTool = append(out.ByTool, ToolReport{Tool: t.Name, Parts: t.Parts, LogicalBytes: t.LogicalBytes, StoredBytes: t.StoredBytes})
	}
	return out
}
