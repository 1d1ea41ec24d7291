package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/store"
)

type repairOptions struct{ dryRun, json, verbose bool }

func newRepairCommand(g *globals) *cobra.Command {
	var o repairOptions
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Drop the rows of missing blobs and quarantine corrupt ones",
		Long: `repair brings a damaged store back to a state gc accepts, and fetches
nothing it cannot: the content of a missing blob is gone, so repair drops
the rows of its parts and names the keys lost; a corrupt blob is moved to
quarantine/ in the store, its rows kept, so that writing the same content
again (as an agent repeating a call does) heals every key that uses it.
Orphans and temp files are left to gc. With --dry-run it changes nothing.`,
		Example: `  casctl repair --dry-run
  casctl repair && casctl gc`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRepair(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.dryRun, "dry-run", false, "say what would be done, change nothing")
	f.BoolVar(&o.json, "json", false, "print JSON, every key")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "list every key")
	return cmd
}

type repairedJSON struct {
	Path        string   `json:"path"`
	Digest      string   `json:"digest"`
	Quarantined *string  `json:"quarantined_to"`
	Keys        []string `json:"keys"`
	Reason      string   `json:"reason"`
}

type repairJSON struct {
	DryRun      bool           `json:"dry_run"`
	Lost        []repairedJSON `json:"lost"`
	Quarantined []repairedJSON `json:"quarantined"`
	Salvaged    []repairedJSON `json:"salvaged"`
}

func repairedOf(rs []store.Repaired) []repairedJSON {
	out := []repairedJSON{}
	for _, r := range rs {
		j := repairedJSON{Path: r.Path, Digest: r.Blob.Digest.String(), Keys: r.Keys, Reason: r.Reason}
		if j.Keys == nil {
			j.Keys = []string{}
		}
		if r.To != "" {
			to := r.To
			j.Quarantined = &to
		}
		out = append(out, j)
	}
	return out
}

func runRepair(ctx context.Context, g *globals, o repairOptions) error {
	s, err := g.open(ctx)
	if err != nil {
		return fail("repair", err)
	}
	defer s.Close()
	res, err := s.Repair(ctx, store.RepairOptions{DryRun: o.dryRun})
	if err != nil {
		return fail("repair", err)
	}
	if o.json {
		return writeJSON(g.stdout, repairJSON{DryRun: res.DryRun, Lost: repairedOf(res.Lost), Quarantined: repairedOf(res.Quarantined),
			Salvaged: repairedOf(res.Salvaged)})
	}
	w := g.stdout
	if n := len(res.CountDrift); n > 0 {
		fmt.Fprintf(w, "%s %s of stats to a recount of the rows\n", map[bool]string{false: "set", true: "would set"}[o.dryRun], count(n, "counter"))
	}
	if len(res.Lost)+len(res.Quarantined)+len(res.Salvaged) == 0 {
		fmt.Fprintln(w, "nothing to repair: no blob is missing or corrupt")
		return nil
	}
	would := func(done, dry string) string {
		if o.dryRun {
			return dry
		}
		return done
	}
	// Each blob gets a few short lines: its path, what was done, and its
	// keys, one named and the rest counted (--verbose lists them all).
	show := g.command("show")
	lost := 0
	for _, r := range res.Lost {
		lost += len(r.Keys)
		fmt.Fprintf(w, "%s\t%s\n\tits content is gone\n", would("dropped", "would drop"), r.Path)
		printKeys(w, r.Keys, r.Blob.Digest, o.verbose, show)
	}
	for _, r := range res.Quarantined {
		to := "quarantine/"
		if r.To != "" {
			to = r.To
		}
		fmt.Fprintf(w, "%s\t%s\n\t%s; to %s, its keys waiting for the same content\n",
			would("moved", "would move"), r.Path, r.Reason, to)
		printKeys(w, r.Keys, r.Blob.Digest, o.verbose, show)
	}
	salvaged := 0
	for _, r := range res.Salvaged {
		salvaged += len(r.Keys)
		if o.verbose {
			fmt.Fprintf(w, "%s\t%s\n\t%s\n", would("salvaged", "would salvage"), r.Path, r.Reason)
			printKeys(w, r.Keys, r.Blob.Digest, true, show)
		}
	}
	if len(res.Salvaged) > 0 {
		fmt.Fprintf(w, "%s %s (%s) whose bytes read back whole from a damaged pack or through a link%s\n",
			would("salvaged", "would salvage"), count(len(res.Salvaged), "blob"), count(salvaged, "key"),
			map[bool]string{false: " (--verbose lists them)", true: ""}[o.verbose])
	}
	fmt.Fprintf(w, "%s %s whose content is gone; %s %s\n",
		would("lost", "would lose"), count(lost, "key"), would("quarantined", "would quarantine"), count(len(res.Quarantined), "corrupt blob"))
	if o.dryRun {
		fmt.Fprintf(w, "to do it, run:\n  %s\n", repairCommand(s))
	} else {
		fmt.Fprintln(w, "casctl gc now runs again")
	}
	return nil
}
