package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/store"
)

type showOptions struct{ json bool }

func newShowCommand(g *globals) *cobra.Command {
	var o showOptions
	cmd := &cobra.Command{
		Use:   "show REF",
		Short: "Print everything about a part, and every key sharing its blob",
		Example: `  casctl show demo-1/5_run_tests_call-1-5-0.txt
  casctl show aad4907b --json`,
		Args:              exactArgs(1, "one REF"),
		ValidArgsFunction: completeRefs(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runShow(cmd.Context(), g, o, args[0])
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

type showJSON struct {
	partJSON
	Blob struct {
		Size           int64      `json:"size"`
		FirstStored    time.Time  `json:"first_stored"`
		LastReferenced time.Time  `json:"last_referenced"`
		VerifiedAt     *time.Time `json:"verified_at"`
		Parts          int64      `json:"parts"`
		// OnDisk says whether the blob is a file of its own at the part's
		// path; Packed names the pack holding it instead.
		OnDisk  bool    `json:"on_disk"`
		Packed  *string `json:"packed"`
		Problem *string `json:"problem"`
	} `json:"blob"`
	Versions   []partJSON `json:"versions"`
	SharedWith []partJSON `json:"shared_with"`
}

func runShow(ctx context.Context, g *globals, o showOptions, ref string) error {
	s, err := g.openRead(ctx)
	if err != nil {
		return fail("show", err)
	}
	defer s.Close()
	p, err := resolve(ctx, s, ref)
	if err != nil {
		return refError("show", err)
	}
	// The text lists the first few parts sharing the blob and counts the
	// rest; the JSON lists them all.
	most := 0
	if !o.json {
		most = showSharing
	}
	d, err := s.ShowPartFirst(ctx, p, most)
	if err != nil {
		return fail("show", err)
	}
	if o.json {
		return writeJSON(g.stdout, showOf(ctx, s, d))
	}
	p = d.Part
	w := table(g.stdout)
	row := func(k, v string) { fmt.Fprintf(w, "%s\t%s\n", k, v) }
	row("key", p.Key)
	row("version", fmt.Sprintf("%d of %d", p.Version, len(d.Versions)))
	row("run", p.Run)
	row("step", fmt.Sprint(p.Step))
	row("tool", p.Tool)
	row("call id", or(p.CallID, "(none)"))
	if p.Part >= 0 {
		row("part", fmt.Sprint(p.Part))
	}
	row("kind", string(p.Kind))
	if p.MIME != "" {
		row("mime", p.MIME)
	}
	if p.Filename != "" {
		row("filename", p.Filename)
	}
	sz := fmt.Sprintf("%s (%s)", size(p.Bytes), count(p.Bytes, "byte"))
	if p.Kind == hook.KindText {
		sz += ", " + count(p.Chars, "character")
	}
	row("size", sz)
	row("digest", p.Blob.Digest.String())
	row("path", d.Path)
	row("created", p.CreatedAt.Format(time.RFC3339))
	row("blob stored", fmt.Sprintf("%s, last referenced %s", d.Blob.FirstStored.Format(time.RFC3339), ago(d.Blob.LastReferenced)))
	row("verified", ago(d.Blob.VerifiedAt))
	if d.OnDiskErr != nil {
		row("on disk", "PROBLEM: "+d.OnDiskErr.Error())
	} else if d.OnDisk.Pack != "" {
		row("on disk", fmt.Sprintf("packed in %s: no file at the path; casctl get and the read tool read it", d.OnDisk.Pack))
	} else {
		row("on disk", size(d.OnDisk.Size))
	}
	w.Flush()
	if len(d.Versions) > 1 {
		fmt.Fprintln(g.stdout, "\nversions:")
		w = table(g.stdout)
		for _, v := range d.Versions {
			fmt.Fprintf(w, "  %d\t%s\t%s\t%s\n", v.Version, v.CreatedAt.Format(time.RFC3339), size(v.Bytes), v.Blob.Digest.Short())
		}
		w.Flush()
	}
	fmt.Fprintf(g.stdout, "\nshared with %s", count(d.SharingTotal, "other part"))
	if len(d.Sharing) == 0 {
		fmt.Fprintln(g.stdout)
		return nil
	}
	fmt.Fprintln(g.stdout, ":")
	for _, o := range d.Sharing {
		fmt.Fprintf(g.stdout, "  %s (version %d)\n", o.Key, o.Version)
	}
	if more := d.SharingTotal - int64(len(d.Sharing)); more > 0 {
		fmt.Fprintf(g.stdout, "  … and %d more (show --json lists them all)\n", more)
	}
	return nil
}

// showSharing is how many of the parts sharing a blob show lists.
const showSharing = 10

func showOf(ctx context.Context, s *store.Store, d store.Detail) showJSON {
	var out showJSON
	out.partJSON = partOf(ctx, s, d.Part)
	out.Blob.Size = d.Blob.Size
	out.Blob.FirstStored = d.Blob.FirstStored.UTC()
	out.Blob.LastReferenced = d.Blob.LastReferenced.UTC()
	if !d.Blob.VerifiedAt.IsZero() {
		t := d.Blob.VerifiedAt.UTC()
		out.Blob.VerifiedAt = &t
	}
	out.Blob.Parts = d.Blob.Parts
	out.Blob.OnDisk = d.OnDiskErr == nil && d.OnDisk.Pack == ""
	if d.OnDiskErr == nil && d.OnDisk.Pack != "" {
		pack := d.OnDisk.Pack
		out.Blob.Packed = &pack
	}
	if d.OnDiskErr != nil {
		msg := d.OnDiskErr.Error()
		out.Blob.Problem = &msg
	}
	out.Versions = []partJSON{}
	for _, v := range d.Versions {
		out.Versions = append(out.Versions, partOf(ctx, s, v))
	}
	out.SharedWith = []partJSON{}
	for _, o := range d.Sharing {
		out.SharedWith = append(out.SharedWith, partOf(ctx, s, o))
	}
	return out
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
