package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/store"
)

type pruneOptions struct {
	run       string
	olderThan time.Duration
	keepRuns  int
	dryRun    bool
	json      bool
}

func newPruneCommand(g *globals) *cobra.Command {
	var o pruneOptions
	cmd := &cobra.Command{
		Use:   "prune (--run R | --older-than DUR | --keep-runs N)",
		Short: "Remove index rows; gc then frees the blobs no row uses",
		Example: `  casctl prune --run demo-1
  casctl prune --older-than 30d --dry-run
  casctl prune --keep-runs 5 && casctl gc`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set := 0
			for _, name := range []string{"run", "older-than", "keep-runs"} {
				if cmd.Flags().Changed(name) {
					set++
				}
			}
			if set != 1 {
				return usagef("prune: give exactly one of --run, --older-than and --keep-runs")
			}
			if cmd.Flags().Changed("keep-runs") && o.keepRuns < 1 {
				return usagef("prune: --keep-runs %d: keep at least 1 run (prune --older-than 0s removes everything)", o.keepRuns)
			}
			if cmd.Flags().Changed("run") && o.run == "" {
				return usagef("prune: --run needs a run name")
			}
			return runPrune(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.run, "run", "", "remove every part of this run")
	f.Var(durationFlag{&o.olderThan}, "older-than", "remove parts stored longer ago than this (90m, 2h, 7d)")
	f.IntVar(&o.keepRuns, "keep-runs", 0, "keep the N runs with the newest parts, remove the rest")
	f.BoolVar(&o.dryRun, "dry-run", false, "say what would go, remove nothing")
	f.BoolVar(&o.json, "json", false, "print JSON")
	completeRunsAndTools(g, cmd)
	return cmd
}

type pruneJSON struct {
	RemovedParts int64    `json:"removed_parts"`
	Runs         []string `json:"runs"`
	DryRun       bool     `json:"dry_run"`
}

func runPrune(ctx context.Context, g *globals, o pruneOptions) error {
	s, err := g.open(ctx, store.Maintenance())
	if err != nil {
		return fail("prune", err)
	}
	defer s.Close()
	if err := checkNames(ctx, s, o.run, ""); err != nil {
		return fail("prune", err)
	}
	po := store.PruneOptions{Run: o.run, KeepRuns: o.keepRuns, DryRun: o.dryRun}
	if o.run == "" && o.keepRuns == 0 {
		po.Before = time.Now().Add(-o.olderThan)
	}
	res, err := s.Prune(ctx, po)
	if err != nil {
		return fail("prune", err)
	}
	if o.json {
		runs := res.Runs
		if runs == nil {
			runs = []string{}
		}
		return writeJSON(g.stdout, pruneJSON{res.RemovedParts, runs, o.dryRun})
	}
	verb := "removed"
	if o.dryRun {
		verb = "would remove"
	}
	fmt.Fprintf(g.stdout, "%s %s", verb, count(res.RemovedParts, "part"))
	if len(res.Runs) > 0 {
		fmt.Fprintf(g.stdout, " of %s %s", plural(len(res.Runs), "run"), strings.Join(res.Runs, ", "))
	}
	fmt.Fprintln(g.stdout)
	if res.RemovedParts > 0 && !o.dryRun {
		fmt.Fprintln(g.stdout, "their blobs stay until casctl gc removes those no part uses")
	}
	return nil
}
