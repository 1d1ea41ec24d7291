package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
)

type getOptions struct {
	offset, limit int
	grep          string
}

func newGetCommand(g *globals) *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use:   "get REF",
		Short: "Write a part's bytes to stdout, checked against its digest",
		Long: `get writes the bytes of the part REF names to stdout, once they are checked
against their digest: a corrupt blob is an error and nothing is written.

REF is a key (run/step_tool_call.ext), a blob path, blake3:<hex>, or a
unique prefix of at least 8 hex digits. A key gives its newest version.

With --offset, --limit or --grep, get prints numbered lines of a text part,
streaming: a --grep pattern is matched against the first 256 KiB of each
line, and Ctrl-C stops it at once.`,
		Example: `  casctl get demo-1/3_read_file_call-1-3-0.txt
  casctl get 3fa9c1d2 --grep 'func New' --limit 20
  casctl get blake3:3fa9…c1 > shot.png`,
		Args: exactArgs(1, "one REF"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGet(cmd.Context(), g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.offset, "offset", 0, "lines to skip (matching lines, with --grep)")
	f.IntVar(&o.limit, "limit", 0, "lines to print (0: all)")
	f.StringVar(&o.grep, "grep", "", "print only lines matching this regular expression")
	return cmd
}

func runGet(ctx context.Context, g *globals, o getOptions, ref string) error {
	if o.offset < 0 || o.limit < 0 {
		return usagef("get: --offset and --limit must not be negative")
	}
	var re *regexp.Regexp
	if o.grep != "" {
		var err error
		if re, err = hook.CompilePattern(o.grep); err != nil {
			return usagef("get: --grep %q: %v", o.grep, err)
		}
	}
	s, err := g.openRead(ctx)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	defer s.Close()
	p, err := s.Resolve(ctx, "", refArg(ref))
	if err != nil {
		return fmt.Errorf("get: %w", cleanErr(err))
	}
	lines := o.offset > 0 || o.limit > 0 || re != nil
	if !lines {
		// Copy checks the whole blob before writing a byte.
		if _, err := s.Copy(ctx, g.stdout, p); err != nil {
			return fmt.Errorf("get: %w", cleanErr(err))
		}
		return nil
	}
	if p.Kind != index.KindText {
		return fmt.Errorf("get: %s is %s, not text: --offset, --limit and --grep apply to text parts", p.Key, describeKind(p))
	}
	// Check the whole blob first, then stream its lines: memory stays
	// bounded whatever the size of the blob or of its lines.
	if err := s.Blobs().Verify(ctx, p.Blob); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("get: interrupted while checking %s: %w", p.Key, ctx.Err())
		}
		return fmt.Errorf("get: %s: %w", p.Key, cleanErr(err))
	}
	r, err := s.Blobs().Open(ctx, p.Blob)
	if err != nil {
		return fmt.Errorf("get: %w", cleanErr(err))
	}
	defer r.Close()
	w := bufio.NewWriter(g.stdout)
	defer w.Flush()
	lr := hook.NewLineReader(ctx, r, hook.MatchWindow)
	skipped, printed := 0, 0
	for lr.Next() {
		if re != nil {
			ok, err := hook.MatchLine(ctx, re, lr.Head())
			if err != nil {
				break
			}
			if !ok {
				continue
			}
		}
		if skipped < o.offset {
			skipped++
			continue
		}
		if o.limit > 0 && printed == o.limit {
			break
		}
		fmt.Fprintf(w, "%d\t", lr.Num())
		w.Write(lr.Head())
		if _, err := io.Copy(w, lr.Rest()); err != nil {
			if lr.Err() == nil {
				return fmt.Errorf("get: write: %w", err)
			}
			break
		}
		w.WriteByte('\n')
		printed++
	}
	if err := lr.Err(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("get: interrupted after %d lines: %w", printed, ctx.Err())
		}
		return fmt.Errorf("get: %w", cleanErr(err))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("get: interrupted after %d lines: %w", printed, ctx.Err())
	}
	return nil
}

func describeKind(p index.Part) string {
	if p.MIME != "" {
		return fmt.Sprintf("%s (%s)", p.Kind, p.MIME)
	}
	return string(p.Kind)
}
