package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/store"
)

func newRetentionCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retention",
		Short: "Show or set what the store keeps: max age, runs kept, a quota",
		Long: `The retention policy is kept in the store's index, so that every process and
machine using the store applies the same one. Its rules:

  max_age         parts created longer ago than this go
  keep_runs       all but the N runs written to most recently go
  max_bytes       a quota on the store's size on disk (loose blobs, packs,
                  index): past 90 % of it, the runs written to least
                  recently go first, until the store is under 70 % of it

Whatever the rules say, no part of a run written to within the active
window (default 1h) goes; a quota only those runs could meet is reported
as not met. keep_loose_for (default 24h) is how long a blob stays a file of
its own, readable by file tools at the path its pointers name, before
maintenance packs it.

A write that finds the store past its policy starts one maintenance in the
background (prune by the policy, gc, then pack), one per store at a time;
casctl gc applies the policy too. ls --removed lists what went and why.`,
		Example: `  casctl retention show
  casctl retention set --max-age 30d --max-bytes 10GiB
  casctl retention set --keep-runs 50 --active 2h
  casctl retention clear`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return usagef("retention: give show, set or clear") },
	}
	var showJSON bool
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the store's retention policy",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRetention(cmd.Context(), g, showJSON, nil)
		},
	}
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON")
	var r store.Retention
	var setJSON bool
	set := &cobra.Command{
		Use:   "set [--max-age D] [--keep-runs N] [--max-bytes S]",
		Short: "Change the rules given; 0 turns one off",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if f.NFlag() == 0 || (f.NFlag() == 1 && f.Changed("json")) {
				return usagef("retention set: give at least one of --max-age, --keep-runs, --max-bytes, --active and --keep-loose-for")
			}
			if r.KeepRuns < 0 {
				return usagef("retention set: --keep-runs %d is negative", r.KeepRuns)
			}
			return runRetention(cmd.Context(), g, setJSON, func(old store.Retention) store.Retention {
				if f.Changed("max-age") {
					old.MaxAge = r.MaxAge
				}
				if f.Changed("keep-runs") {
					old.KeepRuns = r.KeepRuns
				}
				if f.Changed("max-bytes") {
					old.MaxBytes = r.MaxBytes
				}
				if f.Changed("active") {
					old.Active = r.Active
				}
				if f.Changed("keep-loose-for") {
					old.KeepLooseFor = r.KeepLooseFor
				}
				return old
			})
		},
	}
	sf := set.Flags()
	sf.Var(durationFlag{&r.MaxAge}, "max-age", "remove parts older than this (30d, 12h; 0 turns the rule off)")
	sf.IntVar(&r.KeepRuns, "keep-runs", 0, "keep the N runs written to most recently (0 turns the rule off)")
	sf.Var(sizeFlag{&r.MaxBytes}, "max-bytes", "quota on the store's size on disk (10GiB, 500MB; 0 turns it off)")
	sf.Var(durationFlag{&r.Active}, "active", "never remove from runs written to this recently (0: the default, 1h)")
	sf.Var(durationFlag{&r.KeepLooseFor}, "keep-loose-for", "keep blobs loose this long after their last use (0: the default, 24h)")
	sf.BoolVar(&setJSON, "json", false, "print the new policy as JSON")
	var clearJSON bool
	clear := &cobra.Command{
		Use:   "clear",
		Short: "Remove the policy: the store keeps everything",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRetention(cmd.Context(), g, clearJSON, func(store.Retention) store.Retention { return store.Retention{} })
		},
	}
	clear.Flags().BoolVar(&clearJSON, "json", false, "print the policy left (none) as JSON")
	cmd.AddCommand(show, set, clear)
	return cmd
}

// runRetention prints the policy, after changing it with change when set.
func runRetention(ctx context.Context, g *globals, asJSON bool, change func(store.Retention) store.Retention) error {
	var s *store.Store
	var err error
	if change == nil {
		s, err = g.openRead(ctx)
	} else {
		s, err = g.open(ctx)
	}
	if err != nil {
		return fail("retention", err)
	}
	defer s.Close()
	r, err := s.Retention(ctx)
	if err != nil {
		return fail("retention", err)
	}
	if change != nil {
		r = change(r)
		if err := s.SetRetention(ctx, r); err != nil {
			return fail("retention", err)
		}
	}
	if asJSON {
		return writeJSON(g.stdout, r)
	}
	printRetention(g.stdout, r)
	return nil
}

// printRetention prints a policy as a table, with its defaults.
func printRetention(out io.Writer, r store.Retention) {
	if r.IsZero() {
		fmt.Fprintln(out, "no retention policy: the store keeps everything until casctl prune")
	}
	w := table(out)
	off := func(set bool, v string) string {
		if !set {
			return "off"
		}
		return v
	}
	fmt.Fprintf(w, "max age\t%s\n", off(r.MaxAge > 0, fmtDuration(r.MaxAge)))
	fmt.Fprintf(w, "keep runs\t%s\n", off(r.KeepRuns > 0, fmt.Sprint(r.KeepRuns)))
	fmt.Fprintf(w, "max bytes\t%s\n", off(r.MaxBytes > 0, size(r.MaxBytes)))
	fmt.Fprintf(w, "active\t%s%s\n", fmtDuration(r.ActiveWindow()), isDefault(r.Active == 0))
	fmt.Fprintf(w, "keep loose for\t%s%s\n", fmtDuration(r.LooseWindow()), isDefault(r.KeepLooseFor == 0))
	w.Flush()
}

func isDefault(yes bool) string {
	if yes {
		return " (default)"
	}
	return ""
}

// removalJSON is one entry of ls --removed --json.
type removalJSON struct {
	At           time.Time `json:"at"`
	Run          string    `json:"run"`
	Rule         string    `json:"rule"`
	Parts        int64     `json:"parts"`
	FirstCreated time.Time `json:"first_created"`
	LastCreated  time.Time `json:"last_created"`
}

// listRemovals prints the removal log, newest first (ls --removed).
func listRemovals(ctx context.Context, out io.Writer, s *store.Store, o lsOptions) error {
	var since time.Time
	if o.since > 0 {
		since = time.Now().Add(-o.since)
	}
	limit := o.limit
	if o.run != "" {
		limit = 0 // the log is cut to --limit once filtered by run
	}
	log, err := s.Removals(ctx, since, limit)
	if err != nil {
		return err
	}
	if o.run != "" {
		kept := log[:0]
		for _, m := range log {
			if m.Run == o.run && (o.limit == 0 || len(kept) < o.limit) {
				kept = append(kept, m)
			}
		}
		log = kept
	}
	if o.json {
		rows := make([]removalJSON, 0, len(log))
		for _, m := range log {
			rows = append(rows, removalJSON{m.At.UTC(), m.Run, m.Rule, m.Parts, m.FirstCreated.UTC(), m.LastCreated.UTC()})
		}
		return writeJSON(out, rows)
	}
	w := table(out)
	fmt.Fprintln(w, "REMOVED\tRUN\tPARTS\tRULE\tCREATED")
	for _, m := range log {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s to %s\n", m.At.Local().Format(time.DateTime), m.Run, m.Parts, m.Rule,
			m.FirstCreated.Local().Format(time.DateTime), m.LastCreated.Local().Format(time.DateTime))
	}
	return w.Flush()
}
