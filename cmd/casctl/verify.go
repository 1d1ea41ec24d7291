package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/store"
)

type verifyOptions struct{ json bool }

func newVerifyCommand(g *globals) *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Re-hash every blob and check it against its name and the index",
		Long: `verify re-hashes every blob file and reports corrupt, truncated or misnamed
blobs, blobs the index uses that are missing, orphan blobs and stray temp
files, and checks the index database itself. It exits 1 when anything is
corrupt or missing; orphans and temp files are reported (gc removes them).`,
		Example: `  casctl verify
  casctl verify --json | jq .ok`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVerify(cmd.Context(), g, o)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

type problemJSON struct {
	Path   string   `json:"path"`
	Digest *string  `json:"digest"`
	Keys   []string `json:"keys"`
	Reason string   `json:"reason"`
}

type verifyJSON struct {
	OK            bool          `json:"ok"`
	Checked       int           `json:"checked"`
	Corrupt       []problemJSON `json:"corrupt"`
	Missing       []problemJSON `json:"missing"`
	Orphans       []problemJSON `json:"orphans"`
	Temp          []problemJSON `json:"temp"`
	IndexProblems []string      `json:"index_problems"`
}

func problems(ps []store.Problem) []problemJSON {
	out := []problemJSON{}
	for _, p := range ps {
		j := problemJSON{Path: p.Path, Keys: p.Keys, Reason: p.Reason}
		if j.Keys == nil {
			j.Keys = []string{}
		}
		if !p.Blob.Digest.IsZero() {
			d := p.Blob.Digest.String()
			j.Digest = &d
		}
		out = append(out, j)
	}
	return out
}

var errVerifyFailed = errors.New("the store is damaged")

func runVerify(ctx context.Context, g *globals, o verifyOptions) error {
	s, err := g.openWritable(ctx)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer s.Close()
	opts := store.VerifyOptions{}
	if st, err := s.Stats(ctx, ""); err == nil {
		if bar := progress(g.stderr, o.json, st.StoredBytes+st.UnreferencedBytes, "verify", true); bar != nil {
			opts.Progress = func(done, _ int64) { bar.Set64(done) }
			defer bar.Finish()
		}
	}
	res, err := s.Verify(ctx, opts)
	if err != nil {
		return fmt.Errorf("verify: %w", cleanErr(err))
	}
	if o.json {
		out := verifyJSON{OK: res.OK, Checked: res.Checked, Corrupt: problems(res.Corrupt), Missing: problems(res.Missing),
			Orphans: problems(res.Orphans), Temp: problems(res.Temp), IndexProblems: res.IndexProblems}
		if out.IndexProblems == nil {
			out.IndexProblems = []string{}
		}
		if err := writeJSON(g.stdout, out); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(g.stdout, "checked %d blobs (%s)\n", res.Checked, size(res.CheckedBytes))
		for _, sec := range []struct {
			name string
			ps   []store.Problem
		}{{"CORRUPT", res.Corrupt}, {"MISSING", res.Missing}, {"orphan", res.Orphans}, {"temp", res.Temp}} {
			for _, p := range sec.ps {
				line := fmt.Sprintf("%s\t%s: %s", sec.name, p.Path, p.Reason)
				if len(p.Keys) > 0 {
					line += " (used by " + strings.Join(p.Keys, ", ") + ")"
				}
				fmt.Fprintln(g.stdout, line)
			}
		}
		for _, p := range res.IndexProblems {
			fmt.Fprintf(g.stdout, "INDEX\t%s\n", p)
		}
		if res.RecentOrphans > 0 {
			fmt.Fprintf(g.stderr, "warning: %d orphans are younger than gc's grace period of %v: if the store was not being written just now, index rows may have been lost (was index.db-wal deleted?); copy the store before running gc, which deletes them once they are older\n",
				res.RecentOrphans, store.DefaultGrace)
		}
		if res.OK {
			fmt.Fprintf(g.stdout, "ok: %d orphans and %d temp files (gc removes them)\n", len(res.Orphans), len(res.Temp))
		}
	}
	if !res.OK {
		return fmt.Errorf("verify: %w: %d corrupt, %d missing, %d index problems", errVerifyFailed, len(res.Corrupt), len(res.Missing), len(res.IndexProblems))
	}
	return nil
}
