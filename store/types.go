package store

import (
	"time"

	"github.com/toolcas/toolcas/catalog"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
)

// Part is a stored part: one part of one tool result, one version of its
// key.
type Part = catalog.Part

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
	return index.ListOptions{Run: o.Run, Tool: o.Tool, Kind: o.Kind, Since: o.Since, Limit: o.Limit,
		AllVersions: o.AllVersions}
}

// Stats summarises a store: how much the agents produced, how much the
// store holds for it, and the difference.
type Stats = catalog.Stats

// GroupStats is the share of one tool or run.
type GroupStats = catalog.GroupStats

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
type BlobRow = catalog.BlobRow
