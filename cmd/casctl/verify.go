package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/store"
)

type verifyOptions struct{ json, verbose, quickIndexCheck bool }

func newVerifyCommand(g *globals) *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Re-hash every blob and check it against its name and the index",
		Long: `verify re-hashes every blob file and reports corrupt, truncated or misnamed
blobs, blobs the index uses that are missing, orphan blobs and stray temp
files, and checks the index database itself. It exits 1 when anything is
corrupt or missing, and says the command that repairs it; orphans and temp
files are counted (gc removes them), and listed with --verbose.

The index gets SQLite's full integrity check, which also makes sure that
every index of the database holds exactly its table's rows, as gc relies on
them. --quick-index-check checks it page by page only (SQLite's quick
check): a few times faster on a large index, but blind to an index that
lost or gained rows, so run the full check before trusting gc.`,
		Example: `  casctl verify
  casctl verify --json | jq .ok`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVerify(cmd.Context(), g, o)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON, every problem and key")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "list orphans, temp files and every key")
	cmd.Flags().BoolVar(&o.quickIndexCheck, "quick-index-check", false, "check the index page by page only, not every index against its table")
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
	Quarantined   []problemJSON `json:"quarantined"`
	Orphans       []problemJSON `json:"orphans"`
	Temp          []problemJSON `json:"temp"`
	IndexProblems []string      `json:"index_problems"`
	CountDrift    []string      `json:"count_drift"`
	NotRecorded   string        `json:"not_recorded,omitempty"`
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

// listMost is how many names a message for people lists.
const listMost = 10

func runVerify(ctx context.Context, g *globals, o verifyOptions) error {
	s, err := g.openWritable(ctx)
	if err != nil {
		return fail("verify", err)
	}
	defer s.Close()
	opts := store.VerifyOptions{QuickIndexCheck: o.quickIndexCheck}
	if st, err := s.Stats(ctx, ""); err == nil {
		if bar := progress(g.stderr, o.json, st.StoredBytes+st.UnreferencedBytes, "verify", true); bar != nil {
			opts.Progress = func(done, _ int64) { bar.Set64(done) }
			defer bar.Finish()
		}
	}
	res, err := s.Verify(ctx, opts)
	if err != nil {
		return fail("verify", err)
	}
	if o.json {
		out := verifyJSON{OK: res.OK, Checked: res.Checked, Corrupt: problems(res.Corrupt), Missing: problems(res.Missing),
			Quarantined: problems(res.Quarantined), Orphans: problems(res.Orphans), Temp: problems(res.Temp),
			IndexProblems: res.IndexProblems, NotRecorded: res.NotRecorded}
		if out.IndexProblems == nil {
			out.IndexProblems = []string{}
		}
		if out.CountDrift = res.CountDrift; out.CountDrift == nil {
			out.CountDrift = []string{}
		}
		if err := writeJSON(g.stdout, out); err != nil {
			return err
		}
	} else {
		if res.NotRecorded != "" {
			fmt.Fprintf(g.stderr, "warning: the blobs found whole could not be marked so in the index (%s); the report below stands\n", res.NotRecorded)
		}
		if res.RecentOrphans > 0 {
			// SQLite loses committed rows when its -wal file goes; the
			// question does not arise for an index on PostgreSQL.
			lost := " (was index.db-wal deleted?)"
			if s.SharedIndex() {
				lost = ""
			}
			fmt.Fprintf(g.stderr, "warning: %s younger than gc's grace period of %v: if the store was not being written just now, index rows may have been lost%s; copy the store before running gc, which deletes them once they are older\n",
				count(res.RecentOrphans, "orphan")+map[bool]string{true: " is", false: " are"}[res.RecentOrphans == 1], store.DefaultGrace, lost)
		}
		printVerify(g.stdout, s, res, o.verbose, g.command("show"))
	}
	if !res.OK {
		return fmt.Errorf("verify: %w: %d corrupt, %d missing, %s, %s off", errVerifyFailed,
			len(res.Corrupt), len(res.Missing), count(len(res.IndexProblems), "index problem"), count(len(res.CountDrift), "counter"))
	}
	return nil
}

// printVerify prints what verify found for people: each damaged blob, a
// key of it and how many more, and what to do next; no line is longer
// than the blob's path or key makes it.
func printVerify(w io.Writer, s *store.Store, res store.VerifyResult, verbose bool, showCmd string) {
	fmt.Fprintf(w, "checked %s (%s)\n", count(res.Checked, "blob"), size(res.CheckedBytes))
	type section struct {
		name string
		ps   []store.Problem
	}
	sections := []section{{"CORRUPT", res.Corrupt}, {"MISSING", res.Missing}, {"quarantined", res.Quarantined}}
	if verbose {
		sections = append(sections, section{"orphan", res.Orphans}, section{"temp", res.Temp})
	}
	for _, sec := range sections {
		for _, p := range sec.ps {
			if len(p.Keys) == 0 {
				fmt.Fprintf(w, "%s\t%s: %s\n", sec.name, p.Path, p.Reason)
				continue
			}
			// A blob that keys use gets a few short lines: its path, what
			// is wrong, and its keys, one named and the rest counted.
			fmt.Fprintf(w, "%s\t%s\n\t%s\n", sec.name, p.Path, p.Reason)
			printKeys(w, p.Keys, p.Blob.Digest, verbose, showCmd)
		}
	}
	for _, p := range res.IndexProblems {
		fmt.Fprintf(w, "INDEX\t%s\n", p)
	}
	for _, p := range res.CountDrift {
		fmt.Fprintf(w, "COUNTS\t%s\n", p)
	}
	leftovers := fmt.Sprintf("%s and %s (casctl gc removes them", count(len(res.Orphans), "orphan"), count(len(res.Temp), "temp file"))
	if !verbose && len(res.Orphans)+len(res.Temp) > 0 {
		leftovers += "; verify --verbose lists them"
	}
	leftovers += ")"
	if len(res.Quarantined) > 0 {
		fmt.Fprintf(w, "%s quarantined: their keys read nothing until the same content is written again\n", count(len(res.Quarantined), "blob"))
	}
	if res.OK {
		fmt.Fprintf(w, "ok: %s\n", leftovers)
		return
	}
	fmt.Fprintln(w, leftovers)
	if len(res.IndexProblems) > 0 {
		fmt.Fprintln(w, "the index database is damaged: restore "+s.IndexLocation()+" from a copy; casctl repair cannot mend it")
		return
	}
	if s.Remote() {
		// repair moves files of a local directory; on S3 there is nothing
		// it could do yet.
		fmt.Fprintln(w, "casctl repair works on a store in a local directory only; the objects named above need a look in the object store")
		return
	}
	var todo []string
	if n := len(res.Missing); n > 0 {
		todo = append(todo, fmt.Sprintf("drop the rows of %s", count(n, "missing blob")))
	}
	if n := len(res.Corrupt); n > 0 {
		todo = append(todo, fmt.Sprintf("move %s to quarantine", count(n, "corrupt blob")))
	}
	if n := len(res.CountDrift); n > 0 {
		todo = append(todo, fmt.Sprintf("set %s of stats to a recount", count(n, "counter")))
	}
	fmt.Fprintf(w, "to %s, run:\n  %s\n", strings.Join(todo, " and "), repairCommand(s))
}

// printKeys prints the keys of a damaged blob for people, a line each:
// every key with verbose, else the first and how many more there are, with
// the command that lists them all.
func printKeys(w io.Writer, keys []string, d interface {
	IsZero() bool
	Short() string
}, verbose bool, showCmd string) {
	if verbose || len(keys) == 1 {
		for _, k := range keys {
			fmt.Fprintf(w, "\tkey %s\n", k)
		}
		return
	}
	more := len(keys) - 1
	if d.IsZero() {
		fmt.Fprintf(w, "\tkey %s … and %d more %s (--verbose lists them)\n", keys[0], more, plural(more, "key"))
		return
	}
	fmt.Fprintf(w, "\tkey %s … and %d more %s: %s %s\n", keys[0], more, plural(more, "key"), showCmd, d.Short())
}

// command is how the user runs a casctl command on the store at hand:
// "casctl show", or "casctl --store DIR show" when they named it so.
func (g *globals) command(name string) string {
	if g.store != "" {
		return "casctl --store " + shellQuote(g.store) + " " + name
	}
	return "casctl " + name
}

// repairCommand is the command that repairs the store at hand.
func repairCommand(s *store.Store) string {
	return "casctl --store " + shellQuote(s.Location()) + " repair"
}

// shellQuote quotes a path for a POSIX shell when it needs quoting.
func shellQuote(p string) string {
	if p != "" && strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@") == "" {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}
