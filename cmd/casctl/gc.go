package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/store"
)

type gcOptions struct {
	grace       time.Duration
	lockTimeout time.Duration
	dryRun      bool
	force       bool
	json        bool
	packOver    int64
	noRetention bool
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
fails while it lists, refuses to run while rows point at missing blobs
(casctl repair drops those rows), and refuses, without --force, to remove
blobs no index row names when they are more than half of the store (and
more than a handful): an index that lost its rows makes every blob look
so. Blobs whose parts were pruned keep their rows until gc, and do not
count. Packs whose blobs are mostly unused are rewritten without them.
When the blobs unused for a day (the policy's keep_loose_for) that are still
loose pass --pack-over, gc then packs them, as casctl pack does, leaving
loose those of runs written to within the policy's active window.

With a retention policy (casctl retention), gc applies it first: it removes
the parts the policy's rules pick, never from a run written to within its
active window, and logs each removal (casctl ls --removed).`,
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
	f.BoolVar(&o.dryRun, "dry-run", false, "say what would go, and why; remove nothing")
	f.BoolVar(&o.force, "force", false, "remove blobs no index row names even when they are more than half of the store")
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.BoolVar(&o.noRetention, "no-retention", false, "do not apply the store's retention policy first")
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
	// What the index database gave back to the file system.
	IndexFreedBytes int64 `json:"index_freed_bytes"`
	// What the retention policy removed first, when the store has one.
	Retention *retentionRunJSON `json:"retention,omitempty"`
}

// retentionRunJSON is what applying the retention policy removed.
type retentionRunJSON struct {
	RemovedParts int64               `json:"removed_parts"`
	Rules        []retentionRuleJSON `json:"rules"`
	DiskBytes    int64               `json:"disk_bytes"`
	OverQuota    int64               `json:"over_quota_bytes"`
}

type retentionRuleJSON struct {
	Rule  string   `json:"rule"`
	Parts int64    `json:"parts"`
	Runs  []string `json:"runs"`
}

func retentionRunOf(r store.RetentionResult) *retentionRunJSON {
	if r.Policy.IsZero() && len(r.Rules) == 0 {
		return nil
	}
	out := &retentionRunJSON{RemovedParts: r.RemovedParts(), Rules: []retentionRuleJSON{}, DiskBytes: r.DiskBytes, OverQuota: r.OverQuota}
	for _, x := range r.Rules {
		out.Rules = append(out.Rules, retentionRuleJSON{x.Rule, x.Parts, x.Runs})
	}
	return out
}

// printRetentionRun says what applying the retention policy removed.
func printRetentionRun(w io.Writer, r store.RetentionResult) {
	if r.Policy.IsZero() && len(r.Rules) == 0 {
		return // no policy, and no run's own ttl ran out
	}
	verb := "removed"
	if r.DryRun {
		verb = "would remove"
	}
	if len(r.Rules) == 0 {
		fmt.Fprintln(w, "retention: nothing to remove")
	}
	for _, x := range r.Rules {
		fmt.Fprintf(w, "retention: %s %s of %s by %s\n", verb, count(x.Parts, "part"), count(len(x.Runs), "run"), x.Rule)
	}
	if r.OverQuota > 0 {
		fmt.Fprintf(w, "retention: the store takes %s, %s over its quota: what is left is in runs written to within the active window (%s)\n",
			size(r.DiskBytes), size(r.OverQuota), fmtDuration(r.Policy.ActiveWindow()))
	}
}

func runGC(ctx context.Context, g *globals, o gcOptions) error {
	s, err := g.open(ctx, store.Maintenance())
	if err != nil {
		return fail("gc", err)
	}
	defer s.Close()
	opts := store.GCOptions{Grace: o.grace, DryRun: o.dryRun, LockTimeout: o.lockTimeout, Force: o.force}
	st, err := s.Stats(ctx, "")
	if err == nil {
		if bar := progress(g.stderr, o.json, st.Blobs+st.UnreferencedBlobs, "gc: listing", false); bar != nil {
			opts.Progress = func(done, _ int) { bar.Set(done) }
			defer bar.Finish()
		}
	}
	var kept store.RetentionResult
	if !o.noRetention {
		kept, err = s.ApplyRetention(ctx, store.RetentionOptions{DryRun: o.dryRun, LockTimeout: o.lockTimeout})
		if err != nil {
			return fail("gc", missingHint(s, err))
		}
		if !o.json {
			printRetentionRun(g.stdout, kept)
		}
	}
	if o.dryRun {
		plan, err := s.PlanGC(ctx, opts)
		if err != nil {
			return fail("gc", missingHint(s, err))
		}
		return printPlan(g.stdout, plan, o.json, retentionRunOf(kept))
	}
	res, err := s.GC(ctx, opts)
	if err != nil {
		return fail("gc", missingHint(s, err))
	}
	var packed store.PackResult
	if o.packOver > 0 {
		// As the retention policy says (its defaults without one): blobs
		// unused for keep_loose_for, none of a run still active.
		r, err := s.Retention(ctx)
		if err != nil {
			return fail("gc", err)
		}
		packed, _, err = s.PackIfOver(ctx, o.packOver, store.PackOptions{OlderThan: r.LooseWindow(), Active: r.ActiveWindow()})
		if err != nil && !errors.Is(err, store.ErrLocalOnly) { // packs are local-only
			return fail("gc", err)
		}
	}
	if o.json {
		return writeJSON(g.stdout, gcJSON{res.RemovedBlobs, res.FreedBytes, res.KeptYoung, res.RemovedTemp, res.DryRun,
			res.Packs.Rewritten, res.Packs.Dropped, res.Packs.FreedBytes, res.UnusedPacked, packed.Blobs,
			res.IndexFreed + packed.IndexFreed, retentionRunOf(kept)})
	}
	printResult(g.stdout, res, o.grace)
	if packed.Blobs > 0 {
		fmt.Fprintf(g.stdout, "packed %s (%s) into %s\n", count(packed.Blobs, "cold blob"), size(packed.RawBytes), size(packed.PackBytes))
	}
	printIndexFreed(g.stdout, res.IndexFreed+packed.IndexFreed)
	return nil
}

// printIndexFreed says what the index database gave back, if anything.
func printIndexFreed(w io.Writer, n int64) {
	if n > 0 {
		fmt.Fprintf(w, "index: gave back %s of free pages\n", size(n))
	}
}

// missingHint adds to gc's refusal over missing blobs the command that
// names the keys lost.
func missingHint(s *store.Store, err error) error {
	if !errors.Is(err, store.ErrMissingBlobs) {
		return err
	}
	return fmt.Errorf("%w\n  casctl --store %s repair --dry-run   shows the keys lost", err, shellQuote(s.Location()))
}

// printResult says what gc removed, or would remove.
func printResult(w io.Writer, res store.GCResult, grace time.Duration) {
	verb := "removed"
	if res.DryRun {
		verb = "would remove"
	}
	fmt.Fprintf(w, "%s %s (%s) and %s; kept %s younger than %s\n",
		verb, count(res.RemovedBlobs, "blob"), size(res.FreedBytes), count(res.RemovedTemp, "temp file"),
		count(res.KeptYoung, "unused blob"), fmtDuration(grace))
	if p := res.Packs; p.Rewritten+p.Dropped > 0 {
		fmt.Fprintf(w, "packs: %s %d and rewrote %d, freeing %s\n", verb, p.Dropped, p.Rewritten, size(p.FreedBytes))
	}
	if res.UnusedPacked > 0 && res.Packs.Rewritten+res.Packs.Dropped == 0 {
		verb := "stay"
		if res.UnusedPacked == 1 {
			verb = "stays"
		}
		fmt.Fprintf(w, "%s (%s) %s in packs until more than half of a pack is unused\n",
			count(res.UnusedPacked, "unused blob"), size(res.UnusedPackedBytes), verb)
	}
}

// planShown is how many blobs of each list a dry run prints; --json
// prints them all.
const planShown = 20

// gcPlanJSON is gc --dry-run --json: gc's figures, then its plan.
type gcPlanJSON struct {
	gcJSON
	Plan planJSON `json:"plan"`
}

type planJSON struct {
	Grace   string         `json:"grace"`
	Remove  []planBlobJSON `json:"remove"`
	Young   []planBlobJSON `json:"young"`
	Missing []string       `json:"missing"`
	Stale   []string       `json:"stale_rows"`
	Temps   []string       `json:"temps"`
	Packs   []planPackJSON `json:"packs"`
}

type planBlobJSON struct {
	Blob    string    `json:"blob"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	Pack    string    `json:"pack,omitempty"`
	Reason  string    `json:"reason"`
}

type planPackJSON struct {
	Name      string `json:"name"`
	Action    string `json:"action"`
	Size      int64  `json:"size"`
	DeadBytes int64  `json:"dead_bytes"`
	RawBytes  int64  `json:"raw_bytes"`
}

// printPlan prints what gc would do and why: its figures, then the blobs
// it would remove, those it keeps as young, and what it would do to packs.
func printPlan(w io.Writer, p *store.GCPlan, asJSON bool, kept *retentionRunJSON) error {
	res := p.DryRun()
	if asJSON {
		out := gcPlanJSON{gcJSON: gcJSON{res.RemovedBlobs, res.FreedBytes, res.KeptYoung, res.RemovedTemp, true,
			res.Packs.Rewritten, res.Packs.Dropped, res.Packs.FreedBytes, res.UnusedPacked, 0, 0, kept},
			Plan: planJSON{Grace: fmtDuration(p.Grace), Remove: planBlobs(p.Remove), Young: planBlobs(p.Young),
				Missing: names(p.Missing), Stale: names(p.StaleRows), Temps: []string{}, Packs: []planPackJSON{}}}
		for _, t := range p.Temps {
			out.Plan.Temps = append(out.Plan.Temps, t.Path)
		}
		for _, g := range p.Packs {
			out.Plan.Packs = append(out.Plan.Packs, planPackJSON{g.Name, g.Action.String(), g.Size, g.DeadBytes, g.RawBytes})
		}
		return writeJSON(w, out)
	}
	printResult(w, res, p.Grace)
	listBlobs := func(title string, bs []store.GCBlob) {
		if len(bs) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		t := table(w)
		fmt.Fprintln(t, "BLOB\tSIZE\tSTORED\tWHY")
		for _, b := range bs[:min(len(bs), planShown)] {
			fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", b.Blob, size(b.Size), b.ModTime.UTC().Format(time.RFC3339), b.Reason)
		}
		t.Flush()
		if len(bs) > planShown {
			fmt.Fprintf(w, "… and %d more (--json lists them all)\n", len(bs)-planShown)
		}
	}
	listBlobs("would remove", p.Remove)
	listBlobs("keeps, younger than "+fmtDuration(p.Grace), p.Young)
	for _, g := range p.Packs {
		fmt.Fprintf(w, "pack %s: would %s (%s, %s of %s unused)\n", g.Name, g.Action, size(g.Size), size(g.DeadBytes), size(g.RawBytes))
	}
	return nil
}

func planBlobs(bs []store.GCBlob) []planBlobJSON {
	out := make([]planBlobJSON, len(bs))
	for i, b := range bs {
		out[i] = planBlobJSON{b.Blob.String(), b.Size, b.ModTime.UTC(), b.Pack, b.Reason.String()}
	}
	return out
}
