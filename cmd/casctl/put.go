package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/store"
)

type putOptions struct {
	tool, call, run, mime, filename string
	durability                      string
	step, part                      int
	json, init                      bool
	ttl                             time.Duration
}

func newPutCommand(g *globals) *cobra.Command {
	var o putOptions
	cmd := &cobra.Command{
		Use:   "put --tool T [FILE|-]",
		Short: "Offload one part from FILE or stdin and print its pointer",
		Long: `put stores one part, streaming, as the hook would, and prints the pointer
the hook would leave in the conversation (line breaks in its preview shown
as ⏎).

The part is text when its bytes are UTF-8 and no MIME type, or a text/*
one, is given. Without --mime, put sniffs the content: a PNG is an image, a
PDF a file. put needs a store (casctl init, or --init) and some content:
it refuses an empty input and a terminal as stdin.`,
		Example: `  go test ./... 2>&1 | casctl put --tool run_tests --run demo-1 --step 40
  casctl put --tool screenshot --run demo-1 --step 40 shot.png
  casctl put --tool fetch --filename q3.pdf --json report.pdf`,
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
	f.IntVar(&o.part, "part", -1, "position of the part in a result of several (-1: the only part)")
	f.StringVar(&o.mime, "mime", "", "MIME type of the content (default: sniffed)")
	f.StringVar(&o.filename, "filename", "", "file name the tool gave the content")
	f.BoolVar(&o.json, "json", false, "print JSON instead of the pointer")
	f.BoolVar(&o.init, "init", false, "create the store if there is none")
	f.Var(durationFlag{&o.ttl}, "ttl", "remove the whole run once it has not been written to for this long (6h, 7d), whatever the store's policy")
	f.StringVar(&o.durability, "durability", "full", "full; none (no fsync at all); or "+store.DurabilityRecentKeysMayBeLost+
		" (the blob durable, the index row committed without a sync: a power cut may lose the key, never the file)")
	cmd.MarkFlagRequired("tool")
	completeRunsAndTools(g, cmd)
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
	Note    string  `json:"note"`
	Version int     `json:"version"`
}

func runPut(ctx context.Context, g *globals, o putOptions, in string) (err error) {
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = errPutInterrupted
		}
	}()
	if o.step < 0 {
		return usagef("put: --step %d is negative", o.step)
	}
	if o.part < -1 {
		return usagef("put: --part %d: want -1 (the only part) or a position from 0", o.part)
	}
	if err := hook.CheckRun(o.run); err != nil {
		return usagef("put: --run: %v", err)
	}
	k := hook.Key{Run: o.run, Step: o.step, Tool: o.tool, CallID: o.call, Part: o.part, Ext: ".txt"}
	if err := k.Check(); err != nil {
		return usagef("put: %v", err)
	}
	k.Ext = "" // chosen from the content
	if o.mime != "" {
		if err := hook.NewContentProbe(o.mime, o.filename).CheckMIME(); err != nil {
			return usagef("put: --mime %q: not a MIME type put accepts (want type/subtype, such as text/plain or image/png)", o.mime)
		}
	}
	dopts, err := store.DurabilityOptions(o.durability)
	if err != nil {
		return usagef("put: --durability: %v", err)
	}
	var r io.Reader = g.stdin
	what := "stdin"
	if in == "-" {
		if isTerminal(g.stdin) {
			return usagef("put: stdin is a terminal; pipe the result in (… | casctl put --tool %s) or name a FILE", o.tool)
		}
	} else {
		f, err := os.Open(in)
		if err != nil {
			return fail("put", err)
		}
		defer f.Close()
		r, what = f, in
	}
	// Ctrl-C stops a put waiting on a slow producer at once; the content
	// read so far is dropped.
	br := bufio.NewReader(interruptible(ctx, r))
	if _, err := br.Peek(1); errors.Is(err, io.EOF) {
		return fail("put", errors.New("nothing to store: "+what+" is empty"))
	} else if err != nil && ctx.Err() != nil {
		return errPutInterrupted
	}
	var s *store.Store
	if o.init {
		s, _, err = g.create(ctx, dopts...)
	} else if !store.IsRemoteLocation(g.storeDir()) && !store.Exists(g.storeDir()) {
		err = g.noStore("create one with casctl init (or put --init)")
	} else {
		s, err = g.open(ctx, dopts...)
	}
	if err != nil {
		return fail("put", err)
	}
	defer s.Close()
	res, err := s.Put(ctx, store.StreamPart{Key: k, MIME: o.mime, Filename: o.filename, RunTTL: o.ttl}, br)
	if err != nil {
		return fail("put", err)
	}
	if o.json {
		out := putJSON{Key: res.Key, Path: res.Path, Digest: res.Digest.String(), Kind: string(res.Kind), MIME: res.MIME,
			Size: res.Size, Chars: res.Chars, Version: res.Version}
		out.Dedup = res.Dedup
		if res.SameAs != "" {
			out.SameAs = &res.SameAs
		} else if res.Dedup {
			out.Note = dedupNote(ctx, s, res)
		}
		return writeJSON(g.stdout, out)
	}
	p := hook.Pointer([]hook.PartInfo{res.Info}, []hook.Stored{res.Stored}, hook.DefaultPreviewChars)
	_, err = io.WriteString(g.stdout, oneLine(p, 0)+"\n")
	return err
}

// errPutInterrupted is put's answer to Ctrl-C: the part's key has no row,
// and its content no blob, unless Ctrl-C came as the blob was renamed into
// place: that blob then has no row and goes at the next gc.
var errPutInterrupted = interruptedError{"put: interrupted; nothing stored"}

// interruptible returns a reader of r whose Read returns ctx's error as
// soon as ctx is done, even while a Read of r waits for a producer that
// writes nothing: that Read is left to end with the process.
func interruptible(ctx context.Context, r io.Reader) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, r)
		pw.CloseWithError(err)
	}()
	context.AfterFunc(ctx, func() { pr.CloseWithError(ctx.Err()) })
	return pr
}

// dedupNote says why a write that stored nothing new names no same_as,
// which names only other keys of the same run.
func dedupNote(ctx context.Context, s *store.Store, res store.PutResult) string {
	ps, err := s.Sharing(ctx, res.Blob)
	if err != nil {
		return "the content was already stored: nothing new was written"
	}
	other := ""
	for _, p := range ps {
		if p.Key == res.Key && p.Version != res.Version {
			return "an earlier version of this key holds the same content: nothing new was written"
		}
		if p.Key != res.Key && other == "" {
			other = p.Key
		}
	}
	if other != "" {
		return fmt.Sprintf("the content was already stored for %s, in another run (same_as names keys of the same run only)", other)
	}
	return "the blob was on disk with no part using it (left by a prune, gc had not removed it yet): nothing new was written"
}
