package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/store"
)

type getOptions struct {
	offset, limit int
	grep, output  string
}

func newGetCommand(g *globals) *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use:   "get REF",
		Short: "Write a part's bytes to stdout, checked against its digest",
		Long: `get writes the bytes of the part REF names to stdout (or --output FILE), once
they are checked against their digest: a corrupt blob is an error and
nothing is written. Binary content is not written to a terminal.

REF is a key (run/step_tool_call.ext), a blob path, blake3:<hex>, or a
unique prefix of at least 8 hex digits. A key gives its newest version;
KEY@N gives version N.

With --offset, --limit or --grep, get prints numbered lines of a text part,
streaming: a --grep pattern is matched against the first 256 KiB of each
line, and Ctrl-C stops it at once. Like grep, it exits 1 when no line
matches.`,
		Example: `  casctl get demo-1/3_read_file_call-1-3-0.txt
  casctl get demo-1/3_read_file_call-1-3-0.txt@1
  casctl get 3fa9c1d2 --grep 'func New' --limit 20
  casctl get demo-1/2_screenshot_call-1-2-0.png --output shot.png`,
		Args:              exactArgs(1, "one REF"),
		ValidArgsFunction: completeRefs(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGet(cmd.Context(), g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.offset, "offset", 0, "lines to skip (matching lines, with --grep)")
	f.IntVar(&o.limit, "limit", 0, "lines to print (0: all)")
	f.StringVar(&o.grep, "grep", "", "print only lines matching this regular expression")
	f.StringVarP(&o.output, "output", "o", "", "write to FILE instead of stdout")
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
		return fail("get", err)
	}
	defer s.Close()
	p, err := resolve(ctx, s, ref)
	if err != nil {
		return fail("get", err)
	}
	lines := o.offset > 0 || o.limit > 0 || re != nil
	if lines && p.Kind != hook.KindText {
		return fail("get", fmt.Errorf("%s is %s, not text: --offset, --limit and --grep apply to text parts", p.Key, describeKind(p)))
	}
	if o.output != "" {
		return fail("get", writeFile(ctx, s, p, o.output))
	}
	if !lines {
		if p.Kind != hook.KindText && !textMIME(p.MIME) && isTerminal(g.stdout) {
			return fail("get", fmt.Errorf("%s is %s, binary content, and stdout is a terminal: redirect it (casctl get %s > FILE) or use --output FILE",
				p.Key, describeKind(p), ref))
		}
		// Copy checks the whole blob before writing a byte.
		_, err := s.Copy(ctx, g.stdout, p)
		return fail("get", lostBlob(ctx, s, p, err))
	}
	// Check the whole blob first, then stream its lines: memory stays
	// bounded whatever the size of the blob or of its lines.
	if err := s.VerifyBlob(ctx, p.Blob); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("get: interrupted while checking %s: %w", p.Key, ctx.Err())
		}
		return fail("get", lostBlob(ctx, s, p, err))
	}
	r, err := s.OpenBlob(ctx, p.Blob)
	if err != nil {
		return fail("get", lostBlob(ctx, s, p, err))
	}
	defer r.Close()
	w := bufio.NewWriter(g.stdout)
	lr := hook.NewLineReader(ctx, r, hook.MatchWindow)
	skipped, printed, matched := 0, 0, 0
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
		matched++
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
				return fail("get", err)
			}
			break
		}
		w.WriteByte('\n')
		printed++
	}
	if err := w.Flush(); err != nil {
		return fail("get", err)
	}
	if err := lr.Err(); err != nil || ctx.Err() != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("get: interrupted after %d lines: %w", printed, ctx.Err())
		}
		return fail("get", err)
	}
	if re != nil && matched == 0 {
		return quietError{fmt.Sprintf("get: no line of %s matches %q", p.Key, o.grep)}
	}
	return nil
}

// writeFile writes a part's checked bytes to path, through a temp file
// renamed into place: a failed get leaves what was there.
func writeFile(ctx context.Context, s *store.Store, p store.Part, path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".casctl-get-*")
	if err != nil {
		return err
	}
	_, err = s.Copy(ctx, tmp, p)
	err = lostBlob(ctx, s, p, err)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

var versionRE = regexp.MustCompile(`^(.+)@([0-9]+)$`)

// resolve finds the part a reference names, taking KEY@N for version N of
// a key, and explains a run name given where a reference belongs.
func resolve(ctx context.Context, s *store.Store, ref string) (store.Part, error) {
	p, err := s.Resolve(ctx, "", refArg(ref))
	if err == nil {
		return p, nil
	}
	if m := versionRE.FindStringSubmatch(ref); m != nil && errors.Is(err, store.ErrNotFound) {
		n, _ := strconv.Atoi(m[2])
		return s.ResolveVersion(ctx, "", m[1], n)
	}
	if errors.Is(err, store.ErrInvalidRef) && !strings.ContainsAny(ref, "/"+string(filepath.Separator)) {
		if ok, _ := s.HasRun(ctx, ref); ok {
			return store.Part{}, fmt.Errorf("%q is a run, not a part; list its parts with casctl ls --run %s", ref, ref)
		}
	}
	return store.Part{}, err
}

func describeKind(p store.Part) string {
	if p.MIME != "" {
		return fmt.Sprintf("%s (%s)", p.Kind, p.MIME)
	}
	return string(p.Kind)
}

// lostBlob explains a part whose blob file is not there: quarantined by
// repair, or missing.
func lostBlob(ctx context.Context, s *store.Store, p store.Part, err error) error {
	if !errors.Is(err, store.ErrMissingBlobs) && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if q, qerr := s.Quarantined(ctx); qerr == nil && q[p.Blob] {
		return fmt.Errorf("%s: its blob was quarantined as corrupt by casctl repair; writing the same content again heals it", p.Key)
	}
	return fmt.Errorf("%s: its blob %s is missing; casctl verify checks the whole store, casctl repair drops the rows of missing blobs",
		p.Key, s.Path(p.Blob))
}

// textMIME reports whether a file part's type says it is text a terminal
// shows as such: text/*, JSON, XML, JavaScript.
func textMIME(m string) bool {
	mt, _, _ := strings.Cut(strings.ToLower(m), ";")
	mt = strings.TrimSpace(mt)
	return strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "/json") || strings.HasSuffix(mt, "+json") ||
		strings.HasSuffix(mt, "/xml") || strings.HasSuffix(mt, "+xml") || mt == "application/javascript"
}
