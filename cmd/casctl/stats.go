package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/toolcas/toolcas/store"
)

type statsOptions struct {
	run  string
	json bool
}

func newStatsCommand(g *globals) *cobra.Command {
	var o statsOptions
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show how much the store holds and how much dedup saved",
		Example: `  casctl stats
  casctl stats --run demo-1 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStats(cmd.Context(), g, o)
		},
	}
	cmd.Flags().StringVar(&o.run, "run", "", "only this run")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	completeRunsAndTools(g, cmd)
	return cmd
}

func runStats(ctx context.Context, g *globals, o statsOptions) error {
	s, err := g.openRead(ctx)
	if err != nil {
		return fail("stats", err)
	}
	defer s.Close()
	if err := checkNames(ctx, s, o.run, ""); err != nil {
		return fail("stats", err)
	}
	st, err := s.Stats(ctx, o.run)
	if err != nil {
		return fail("stats", err)
	}
	if o.json {
		return writeJSON(g.stdout, st.Report())
	}
	printStats(g.stdout, st)
	return nil
}

// printStats prints the summary and the per-tool table.
func printStats(out io.Writer, st store.Stats) {
	w := table(out)
	fmt.Fprintf(w, "runs\t%d\n", st.Runs)
	fmt.Fprintf(w, "parts\t%d\n", st.Parts)
	fmt.Fprintf(w, "blobs\t%d\n", st.Blobs)
	fmt.Fprintf(w, "logical\t%s\t(what the agents produced)\n", size(st.LogicalBytes))
	fmt.Fprintf(w, "stored\t%s\t(each blob once)\n", size(st.StoredBytes))
	fmt.Fprintf(w, "saved\t%s\t(dedup ratio %.2f)\n", size(st.SavedBytes), st.DedupRatio)
	if st.PackedBlobs > 0 || st.Packs > 0 {
		fmt.Fprintf(w, "loose\t%s\t(%s in files of their own)\n", size(st.StoredBytes-st.PackedBytes), count(st.Blobs-st.PackedBlobs, "blob"))
		fmt.Fprintf(w, "packed\t%s\t(%s)\n", size(st.PackedBytes), count(st.PackedBlobs, "blob"))
	}
	if st.Packs > 0 {
		files := "files"
		if st.Packs == 1 {
			files = "file"
		}
		fmt.Fprintf(w, "packs\t%s\t(%d %s holding %s: compression ratio %.2f, saved %s)\n", size(st.PackFileBytes),
			st.Packs, files, size(st.PackRawBytes), st.CompressionRatio, size(st.PackRawBytes-st.PackFileBytes))
	}
	fmt.Fprintf(w, "index\t%s\n", size(st.IndexBytes))
	if st.UnreferencedBlobs > 0 {
		fmt.Fprintf(w, "garbage\t%s\t(%s no part uses: casctl gc frees them)\n", size(st.UnreferencedBytes), count(st.UnreferencedBlobs, "blob"))
	}
	if st.Removals > 0 {
		fmt.Fprintf(w, "removed\t%s\t(by %s, the last at %s)\n", count(st.RemovedParts, "part"),
			count(st.Removals, "prune"), st.LastRemoval.Local().Format("2006-01-02 15:04"))
	}
	w.Flush()
	if len(st.ByTool) == 0 {
		return
	}
	fmt.Fprintln(out)
	w = table(out)
	fmt.Fprintln(w, "TOOL\tPARTS\tLOGICAL\tSTORED\tRATIO")
	for _, t := range st.ByTool {
		ratio := 1.0
		if t.StoredBytes > 0 {
			ratio = float64(t.LogicalBytes) / float64(t.StoredBytes)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%.2f\n", t.Name, t.Parts, size(t.LogicalBytes), size(t.StoredBytes), ratio)
	}
	w.Flush()
}
