package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/store"
)

type gcOptions struct {
	grace       time.Duration
	lockTimeout time.Duration
	dryRun      bool
	json        bool
	packOver    int64
}

func newGCCommand(g *globals) *cobra.Command {
	o := gcOptions{grace: store.DefaultGrace, lockTimeout: store.DefaultGCLockTimeout, packOver: store.DefaultPackOver}
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove blobs no part uses, once older than the grace period",
		Long: `gc removes the blobs that no index row uses (after a prune, or left by a
writer that died) once they are older than the grace period, and temp files
as old. It holds the store's lock while it sweeps, so writers are never
caught between their blob and their row; it deletes nothing if anything
fails while it lists, and refuses to run while rows point at missing blobs
(casctl repair drops those rows). Packs whose blobs are mostly unused are
rewritten without them. When the blobs unused for a day that are still loose
pass --pack-over, gc then packs them, as casctl pack does.`,
		Example: `  casctl gc --dry-run
  casctl gc --grace 0s
  casctl gc --grace 7d --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGC(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.Var(durationFlag{&o.grace}, "grace", "only remove what is older than this (90m, 2h, 7d)")
	f.Var(durationFlag{&o.lockTimeout}, "lock-timeout", "give up (exit 1, naming the lock's holder) if writes keep the store locked this long")
	f.BoolVar(&o.dryRun, "dry-run", false, "say what would go, remove nothing")
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.Var(sizeFlag{&o.packOver}, "pack-over", "pack loose blobs unused for a day once they pass this size (0: never)")
	return cmd
}

type gcJSON struct {
	RemovedBlobs int   `json:"removed_blobs"`
	FreedBytes   int64 `json:"freed_bytes"`
	KeptYoung    int   `json:"kept_young"`
	RemovedTemp  int   `json:"removed_temp"`
	DryRun       bool  `json:"dry_run"`
	// What gc did to packs, and what it packed afterwards.
	PacksRewritten int   `json:"packs_rewritten"`
	PacksDropped   int   `json:"packs_dropped"`
	PackFreedBytes int64 `json:"pack_freed_bytes"`
	UnusedPacked   int   `json:"unused_packed_blobs"`
	PackedBlobs    int   `json:"packed_blobs"`
}

func runGC(ctx context.Context, g *globals, o gcOptions) error {
	s, err := g.open(ctx, store.Maintenance())
	if err != nil {
		return fail("gc", err)
	}
	defer s.Close()
	opts := store.GCOptions{Grace: o.grace, DryRun: o.dryRun, LockTimeout: o.lockTimeout}
	st, err := s.Stats(ctx, "")
	if err == nil {
		if bar := progress(g.stderr, o.json, st.Blobs+st.UnreferencedBlobs, "gc: listing", false); bar != nil {
			opts.Progress = func(done, _ int) { bar.Set(done) }
			defer bar.Finish()
		}
	}
	res, err := s.GC(ctx, opts)
	if errors.Is(err, store.ErrMissingBlobs) {
		return fail("gc", fmt.Errorf("%w\n  casctl --store %s repair --dry-run   shows the keys lost", err, shellQuote(s.Location())))
	}
	if err != nil {
		return fail("gc", err)
	}
	var packed store.PackResult
	if o.packOver > 0 && !o.dryRun && !s.Remote() { // packs are local-only
		if packed, _, err = s.PackIfOver(ctx, o.packOver, store.PackOptions{OlderThan: store.DefaultPackAge}); err != nil {
			return fail("gc", err)
		}
	}
	if o.json {
		return writeJSON(g.stdout, gcJSON{res.RemovedBlobs, res.FreedBytes, res.KeptYoung, res.RemovedTemp, res.DryRun,
			res.Packs.Rewritten, res.Packs.Dropped, res.Packs.FreedBytes, res.UnusedPacked, packed.Blobs})
	}
	verb := "removed"
	if res.DryRun {
		verb = "would remove"
	}
	fmt.Fprintf(g.stdout, "%s %d blobs (%s) and %d temp files; kept %d unused blobs younger than %s\n",
		verb, res.RemovedBlobs, size(res.FreedBytes), res.RemovedTemp, res.KeptYoung, fmtDuration(o.grace))
	if p := res.Packs; p.Rewritten+p.Dropped > 0 {
		fmt.Fprintf(g.stdout, "packs: %s %d and rewrote %d, freeing %s\n", verb, p.Dropped, p.Rewritten, size(p.FreedBytes))
	}
	if res.UnusedPacked > 0 && res.Packs.Rewritten+res.Packs.Dropped == 0 {
		fmt.Fprintf(g.stdout, "%d unused blobs (%s) stay in packs until more than half of a pack is unused\n",
			res.UnusedPacked, size(res.UnusedPackedBytes))
	}
	if packed.Blobs > 0 {
		fmt.Fprintf(g.stdout, "packed %d cold blobs (%s) into %s\n", packed.Blobs, size(packed.RawBytes), size(packed.PackBytes))
	}
	return nil
}
