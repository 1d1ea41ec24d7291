package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/store"
)

type packOptions struct {
	olderThan time.Duration
	active    time.Duration
	dryRun    bool
	json      bool
}

func newPackCommand(g *globals) *cobra.Command {
	o := packOptions{olderThan: store.DefaultPackAge}
	cmd := &cobra.Command{
		Use:   "pack",
		Short: "Compress cold blobs together into pack files",
		Long: `pack moves the blobs that no write has used for a while (--older-than,
default 24h) out of their own files into zstd pack files, similar blobs side
by side, which stores agent output in a fraction of the space. Reads are
unchanged: get, show, verify and the read-back tool find a packed blob by its
digest, also through the path an old pointer names. Each pack is durable and
recorded before any loose file is removed. Writers go on meanwhile.

The blobs of a run written to within --active (the store's retention
window, 1h unless casctl retention set --active says otherwise) stay loose
whatever their age: that run's pointers are likely still in a conversation,
and file tools read them by their paths. --active 0s packs them too.`,
		Example: `  casctl pack --dry-run
  casctl pack --older-than 0s
  casctl pack --older-than 7d --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("active") {
				o.active = -1 // the store's window
			}
			return runPack(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.Var(durationFlag{&o.olderThan}, "older-than", "only pack blobs unused for this long (0s, 90m, 24h, 7d)")
	f.Var(durationFlag{&o.active}, "active", "leave loose the blobs of runs written to this recently (default: the retention policy's window, 1h)")
	f.BoolVar(&o.dryRun, "dry-run", false, "say what would be packed, change nothing")
	f.BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

type packJSON struct {
	Packs        []string `json:"packs"`
	Blobs        int      `json:"blobs"`
	RawBytes     int64    `json:"raw_bytes"`
	PackBytes    int64    `json:"pack_bytes"`
	RemovedLoose int      `json:"removed_loose"`
	DryRun       bool     `json:"dry_run"`
	// What the index database gave back to the file system.
	IndexFreedBytes int64 `json:"index_freed_bytes"`
}

func runPack(ctx context.Context, g *globals, o packOptions) error {
	s, err := g.open(ctx)
	if err != nil {
		return fail("pack", err)
	}
	defer s.Close()
	if o.active < 0 {
		r, err := s.Retention(ctx)
		if err != nil {
			return fail("pack", err)
		}
		o.active = r.ActiveWindow()
	}
	opts := store.PackOptions{OlderThan: o.olderThan, Active: o.active, DryRun: o.dryRun}
	var bar *progressbar.ProgressBar
	opts.Progress = func(done, total int) {
		if bar == nil {
			bar = progress(g.stderr, o.json, int64(total), "pack", false)
		}
		if bar != nil {
			bar.Set(done)
		}
	}
	defer func() {
		if bar != nil {
			bar.Finish()
		}
	}()
	res, err := s.Pack(ctx, opts)
	if err != nil {
		return fail("pack", err)
	}
	if o.json {
		if res.Packs == nil {
			res.Packs = []string{}
		}
		return writeJSON(g.stdout, packJSON{res.Packs, res.Blobs, res.RawBytes, res.PackBytes, res.RemovedLoose, res.DryRun, res.IndexFreed})
	}
	switch {
	case res.DryRun:
		fmt.Fprintf(g.stdout, "would pack %s (%s) unused for %v\n", count(res.Blobs, "blob"), size(res.RawBytes), o.olderThan)
	case res.Blobs == 0:
		fmt.Fprintf(g.stdout, "nothing to pack: no loose blob unused for %v\n", o.olderThan)
	default:
		ratio := float64(res.RawBytes) / float64(max(res.PackBytes, 1))
		fmt.Fprintf(g.stdout, "packed %s (%s) into %s of %s (%.1fx smaller)\n",
			count(res.Blobs, "blob"), size(res.RawBytes), count(len(res.Packs), "pack file"), size(res.PackBytes), ratio)
	}
	printIndexFreed(g.stdout, res.IndexFreed)
	return nil
}

// sizeFlag is a flag holding a byte count written as people write sizes:
// 256MiB, 1GB, 4096.
type sizeFlag struct{ n *int64 }

func (f sizeFlag) String() string {
	if f.n == nil {
		return ""
	}
	return humanize.IBytes(uint64(*f.n))
}

func (f sizeFlag) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil || n > math.MaxInt64 {
		return fmt.Errorf("want a size such as 256MiB, 1GB or 0, not %q", s)
	}
	*f.n = int64(n)
	return nil
}

func (f sizeFlag) Type() string { return "size" }
