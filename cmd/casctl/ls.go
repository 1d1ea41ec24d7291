package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/store"
)

type lsOptions struct {
	run, tool string
	since     time.Duration
	limit     int
	versions  bool
	removed   bool
	json      bool
}

func newLsCommand(g *globals) *cobra.Command {
	var o lsOptions
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List stored parts, newest first",
		Example: `  casctl ls --run demo-1 --limit 10
  casctl ls --tool run_tests --since 2h --versions
  casctl ls --json | jq -r '.[].key'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLs(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.run, "run", "", "only this run")
	f.StringVar(&o.tool, "tool", "", "only this tool")
	f.Var(durationFlag{&o.since}, "since", "only parts stored in this last while (90m, 2h, 7d)")
	f.IntVar(&o.limit, "limit", 0, "at most this many (0: all)")
	f.BoolVar(&o.versions, "versions", false, "every version of each key, not only the newest")
	f.BoolVar(&o.removed, "removed", false, "list what prune and the retention policy removed, and why, newest first")
	f.BoolVar(&o.json, "json", false, "print JSON")
	completeRunsAndTools(g, cmd)
	return cmd
}

// partJSON is a part as scripts see it; the field names are a contract.
type partJSON struct {
	Key      string `json:"key"`
	Run      string `json:"run"`
	Step     int    `json:"step"`
	Tool     string `json:"tool"`
	CallID   string `json:"call_id"`
	Part     *int   `json:"part"`
	Version  int    `json:"version"`
	Kind     string `json:"kind"`
	MIME     string `json:"mime"`
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	Chars    int64  `json:"chars"`
	Digest   string `json:"digest"`
	Path     string `json:"path"`
	// Packed names the pack file holding the part's blob: Path then names
	// no file, and only toolcas reads it back (casctl get, the read tool).
	Packed    *string   `json:"packed"`
	CreatedAt time.Time `json:"created_at"`
}

func partOf(ctx context.Context, s *store.Store, p store.Part) partJSON {
	out := partJSON{
		Key: p.Key, Run: p.Run, Step: p.Step, Tool: p.Tool, CallID: p.CallID, Version: p.Version,
		Kind: string(p.Kind), MIME: p.MIME, Filename: p.Filename, Size: p.Bytes, Chars: p.Chars,
		Digest: p.Blob.Digest.String(), Path: s.Path(p.Blob), CreatedAt: p.CreatedAt.UTC().Truncate(time.Second),
	}
	if p.Part >= 0 {
		n := p.Part
		out.Part = &n
	}
	if pack := s.PackOf(ctx, p.Blob); pack != "" {
		out.Packed = &pack
	}
	return out
}

func runLs(ctx context.Context, g *globals, o lsOptions) error {
	if o.limit < 0 {
		return usagef("ls: --limit %d is negative", o.limit)
	}
	s, err := g.openRead(ctx)
	if err != nil {
		return fail("ls", err)
	}
	defer s.Close()
	if o.removed {
		if o.tool != "" || o.versions {
			return usagef("ls --removed: --tool and --versions list parts; the removal log is by run")
		}
		if err := listRemovals(ctx, g.stdout, s, o); err != nil {
			return fail("ls", err)
		}
		return nil
	}
	if err := checkNames(ctx, s, o.run, o.tool); err != nil {
		// As stats and prune do: a run or tool the store does not hold
		// is a mistake to say, not an empty listing.
		return fail("ls", err)
	}
	lo := store.ListOptions{Run: o.run, Tool: o.tool, Limit: o.limit, AllVersions: o.versions}
	if o.since > 0 {
		lo.Since = time.Now().Add(-o.since)
	}
	if o.json {
		return listJSON(ctx, g.stdout, s, lo)
	}
	return listTable(ctx, g.stdout, s, lo)
}

// listBounded is the largest --limit listed in one query (the newest parts
// found run by run, as List does); a larger one, or none, is streamed.
const listBounded = 1000

// listEach calls each with the parts lo lists, newest first, in memory
// bounded whatever their number: at most listBounded at once, or one at a
// time as the index hands them out.
func listEach(ctx context.Context, s *store.Store, lo store.ListOptions, each func(store.Part) error) error {
	if lo.Limit > 0 && lo.Limit <= listBounded {
		ps, err := s.List(ctx, lo)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if err := each(p); err != nil {
				return err
			}
		}
		return nil
	}
	return s.ListEach(ctx, store.PageOptions{ListOptions: lo}, each)
}

// listJSON prints the parts as one JSON array, byte for byte what
// writeJSON prints of them all, each part encoded as it comes.
func listJSON(ctx context.Context, out io.Writer, s *store.Store, lo store.ListOptions) error {
	w := bufio.NewWriter(out)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("  ", "  ")
	enc.SetEscapeHTML(false)
	sep := "[\n  "
	err := listEach(ctx, s, lo, func(p store.Part) error {
		buf.Reset()
		if err := enc.Encode(partOf(ctx, s, p)); err != nil {
			return err
		}
		w.WriteString(sep)
		sep = ",\n  "
		_, err := w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		return err
	})
	if err != nil {
		w.Flush()
		return fail("ls", err)
	}
	if sep == "[\n  " {
		w.WriteString("[]\n")
	} else {
		w.WriteString("\n]\n")
	}
	return w.Flush()
}

// tableBlock is how many rows ls aligns together: a listing of any length
// is printed a block at a time.
const tableBlock = 1000

// listTable prints the parts as a table, aligned a block of rows at a time.
func listTable(ctx context.Context, out io.Writer, s *store.Store, lo store.ListOptions) error {
	w := table(out)
	fmt.Fprintln(w, "KEY\tVER\tKIND\tSIZE\tDIGEST\tAGE")
	now := time.Now()
	rows := 0
	err := listEach(ctx, s, lo, func(p store.Part) error {
		// Eight hex digits: the shortest prefix get and show take.
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", p.Key, p.Version, p.Kind, size(p.Bytes), p.Blob.Digest.Hex()[:8], age(now, p.CreatedAt))
		if rows++; rows%tableBlock == 0 {
			return w.Flush()
		}
		return nil
	})
	if err != nil {
		w.Flush()
		return fail("ls", err)
	}
	return w.Flush()
}
