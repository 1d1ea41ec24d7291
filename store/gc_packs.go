package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// RewriteThreshold is the fraction of a pack's bytes that must be dead (no
// row uses them) before gc rewrites it without them.
const RewriteThreshold = 0.5

// PackSweep says what gc did to packs.
type PackSweep struct {
	// Rewritten counts packs rewritten without their dead blobs; Dropped
	// packs removed whole (nothing in them used, or no row names them).
	Rewritten int
	Dropped   int
	// FreedBytes is the pack bytes on disk given back.
	FreedBytes int64
	// RemovedTemp counts temp files removed from packs/.
	RemovedTemp int
	// RemovedLoose counts loose files removed because the pack their row
	// names holds the same blob (left by a pack that stopped before
	// removing them, or written again after packing).
	RemovedLoose int
}

// planPacks decides what gc does to packs, as their rows stand once the
// rows of the blobs in dying (with their sizes) are deleted: a pack none
// of whose blobs any row names goes; one whose dead share passes
// RewriteThreshold is rewritten with its live blobs; packs no row names
// and temp files, older than the grace period, go, and so do loose copies
// of packed blobs.
func (e *localEngine) planPacks(ctx context.Context, p *GCPlan, dying map[cas.Blob]int64) error {
	p.Packs, p.PackTemps, p.LooseCopies = nil, nil, nil
	cutoff := p.cutoff()
	rows, err := e.ix.Packs(ctx)
	if err != nil {
		return err
	}
	files, temps, _, err := e.blobs.Packs(ctx)
	if err != nil {
		return err
	}
	recorded := map[string]bool{}
	for _, r := range rows {
		recorded[r.Name] = true
	}
	for _, f := range files {
		if !recorded[f.Name] && f.ModTime.Before(cutoff) {
			// Written by a pack that did not reach its rows (a crash): its
			// blobs are still loose.
			p.Packs = append(p.Packs, GCPack{Name: f.Name, Action: GCDropUnrecorded, Size: f.Size})
		}
	}
	for _, t := range temps {
		if t.ModTime.Before(cutoff) {
			p.PackTemps = append(p.PackTemps, t.RelPath)
		}
	}
	for _, r := range rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := e.planPack(ctx, p, r, dying); err != nil {
			return err
		}
	}
	return nil
}

// planPack decides what gc does to the pack of row r.
func (e *localEngine) planPack(ctx context.Context, p *GCPlan, r index.PackRow, dying map[cas.Blob]int64) error {
	var live []cas.Blob
	if r.LiveBlobs > 0 {
		named, err := e.ix.PackedBlobs(ctx, r.Name)
		if err != nil {
			return err
		}
		for _, b := range named {
			if size, ok := dying[b]; ok {
				r.LiveBlobs--
				r.LiveBytes -= size
				continue
			}
			live = append(live, b)
		}
	}
	for _, b := range live {
		// The row names this pack, which holds the blob: a loose copy is
		// redundant.
		if en, ok := p.looseCopies[b]; ok && en.ModTime.Before(p.cutoff()) {
			p.LooseCopies = append(p.LooseCopies, b)
		}
	}
	g := GCPack{Name: r.Name, Size: r.Size, RawBytes: r.Raw, DeadBytes: r.Raw - r.LiveBytes}
	switch {
	case r.LiveBlobs == 0:
		g.Action = GCDropPack
	case float64(g.DeadBytes) > RewriteThreshold*float64(r.Raw):
		g.Action, g.live = GCRewritePack, live
	default:
		return nil
	}
	p.Packs = append(p.Packs, g)
	return nil
}

// sweepPacks is gc's part for packs, run under gc's exclusive lock after the
// rows of dead blobs are deleted: it decides again, on the rows as they
// are now, and does what planPacks says. A rewrite writes the new pack
// durably, moves the rows in one transaction, then unlinks the old pack.
func (e *localEngine) sweepPacks(ctx context.Context, p *GCPlan) (PackSweep, error) {
	var sw PackSweep
	if err := e.planPacks(ctx, p, nil); err != nil {
		return sw, err
	}
	for _, b := range p.LooseCopies {
		if err := e.blobs.Remove(ctx, b); err != nil && !errors.Is(err, cas.ErrNotFound) {
			return sw, err
		}
		sw.RemovedLoose++
	}
	for _, t := range p.PackTemps {
		if err := e.blobs.RemoveTempPack(ctx, t); err != nil {
			return sw, err
		}
		sw.RemovedTemp++
	}
	for _, g := range p.Packs {
		freed, err := e.sweepPack(ctx, g)
		if err != nil {
			return sw, err
		}
		if g.Action == GCRewritePack {
			sw.Rewritten++
		} else {
			sw.Dropped++
		}
		sw.FreedBytes += freed
	}
	return sw, nil
}

// sweepPack does what gc planned for one pack, and returns the bytes it
// gave back.
func (e *localEngine) sweepPack(ctx context.Context, g GCPack) (int64, error) {
	switch g.Action {
	case GCDropUnrecorded:
		return g.Size, e.blobs.RemovePack(ctx, g.Name)
	case GCDropPack:
		if err := e.ix.ReplacePack(ctx, g.Name, index.PackRecord{}); err != nil {
			return 0, err
		}
		return g.Size, e.blobs.RemovePack(ctx, g.Name)
	}
	info, err := e.blobs.WritePack(ctx, g.live)
	if err != nil {
		return 0, fmt.Errorf("rewrite %s: %w", g.Name, err)
	}
	if err := fault(e, "gc:rewrite-record"); err != nil {
		return 0, err
	}
	rec := index.PackRecord{Name: info.Name, Size: info.Size, Raw: info.Raw, Blobs: info.Blobs()}
	if err := e.ix.ReplacePack(ctx, g.Name, rec); err != nil {
		return 0, err
	}
	return g.Size - info.Size, e.blobs.RemovePack(ctx, g.Name)
}

// packSweep is what sweepPacks would report of what p plans for packs, the
// bytes a rewrite frees estimated from its dead share.
func packSweep(p *GCPlan) PackSweep {
	sw := PackSweep{RemovedTemp: len(p.PackTemps), RemovedLoose: len(p.LooseCopies)}
	for _, g := range p.Packs {
		if g.Action == GCRewritePack {
			sw.Rewritten++
			sw.FreedBytes += int64(float64(g.Size) * float64(g.DeadBytes) / float64(g.RawBytes))
		} else {
			sw.Dropped++
			sw.FreedBytes += g.Size
		}
	}
	return sw
}
