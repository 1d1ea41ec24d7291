package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/store"
)

type putOptions struct {
	tool, call, run, mime, filename string
	step, part                      int
	json                            bool
}

func newPutCommand(g *globals) *cobra.Command {
	var o putOptions
	cmd := &cobra.Command{
		Use:   "put --tool T [FILE|-]",
		Short: "Offload one part from FILE or stdin and print its pointer",
		Long: `put stores one part, streaming, as the hook would, and prints the exact
pointer the hook would leave in the conversation.

The part is text when no MIME type, or a text/* one, is given and the bytes
are UTF-8; otherwise an image (image/*) or a file.`,
		Example: `  go test ./... 2>&1 | casctl put --tool run_tests --run run-7 --step 3
  casctl put --tool screenshot --mime image/png shot.png
  casctl put --tool fetch --mime application/pdf --filename q3.pdf --json report.pdf`,
		Args: maxArgs(1, "at most one FILE (or - for stdin)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := "-"
			if len(args) == 1 {
				in = args[0]
			}
			return runPut(cmd.Context(), g, o, in)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tool, "tool", "", "name of the tool that produced the result (required)")
	f.StringVar(&o.call, "call", "", "call id (default: call0)")
	f.StringVar(&o.run, "run", hook.DefaultRun, "run the result belongs to")
	f.IntVar(&o.step, "step", 0, "step number in the run")
	f.IntVar(&o.part, "part", -1, "position of the part in a result of several parts (-1: the only part)")
	f.StringVar(&o.mime, "mime", "", "MIME type of the content")
	f.StringVar(&o.filename, "filename", "", "file name the tool gave the content")
	f.BoolVar(&o.json, "json", false, "print JSON instead of the pointer")
	cmd.MarkFlagRequired("tool")
	return cmd
}

type putJSON struct {
	Key     string  `json:"key"`
	Path    string  `json:"path"`
	Digest  string  `json:"digest"`
	Kind    string  `json:"kind"`
	MIME    string  `json:"mime"`
	Size    int64   `json:"size"`
	Chars   int64   `json:"chars"`
	Dedup   bool    `json:"dedup"`
	SameAs  *string `json:"same_as"`
	Version int     `json:"version"`
}

func runPut(ctx context.Context, g *globals, o putOptions, in string) error {
	if o.step < 0 {
		return usagef("put: --step %d is negative", o.step)
	}
	if o.part < -1 {
		return usagef("put: --part %d: want -1 (the only part) or a position from 0", o.part)
	}
	if err := hook.CheckRun(o.run); err != nil {
		return usagef("put: --run: %v", cleanErr(err))
	}
	var r io.Reader = g.stdin
	if in != "-" {
		f, err := os.Open(in)
		if err != nil {
			return fmt.Errorf("put: %w", err)
		}
		defer f.Close()
		r = f
	}
	s, err := g.open(ctx, true)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	defer s.Close()
	k := hook.Key{Run: o.run, Step: o.step, Tool: o.tool, CallID: o.call, Part: o.part}
	res, err := s.Put(ctx, store.StreamPart{Key: k, MIME: o.mime, Filename: o.filename}, r)
	if err != nil {
		return fmt.Errorf("put: %w", cleanErr(err))
	}
	if o.json {
		out := putJSON{Key: res.Key, Path: res.Path, Digest: res.Digest.String(), Kind: string(res.Kind), MIME: res.MIME,
			Size: res.Size, Chars: res.Chars, Dedup: res.Dedup, Version: res.Version}
		if res.SameAs != "" {
			out.SameAs = &res.SameAs
		}
		return writeJSON(g.stdout, out)
	}
	fmt.Fprintln(g.stdout, hook.Pointer([]hook.PartInfo{res.Info}, []hook.Stored{res.Stored}, hook.DefaultPreviewChars))
	return nil
}
