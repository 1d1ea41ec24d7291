package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
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
		Example: `  casctl get demo-1/5_run_tests_call-1-5-0.txt
  casctl get demo-1/5_run_tests_call-1-5-0.txt@1
  casctl get 0b07dd1e --grep '^ok' --limit 20
  casctl get demo-1/3_screenshot_call-1-3-0.png --output shot.png`,
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
	if o.output != "" {
		if err := checkOutput(o.output); err != nil {
			return fail("get", err)
		}
	}
	s, err := g.openRead(ctx)
	if err != nil {
		return fail("get", err)
	}
	defer s.Close()
	p, err := resolve(ctx, s, ref)
	if err != nil {
		return refError("get", err)
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
		// Copy checks the whole blob before writing a byte; Ctrl-C stops
		// it between two writes, however slow the reader.
		_, err := s.Copy(ctx, ctxWriter{ctx, g.stdout}, p)
		return fail("get", lostBlob(ctx, s, p, err))
	}
	// Check the whole blob first, then stream its lines: memory stays
	// bounded whatever the size of the blob or of its lines.
	if err := s.VerifyBlob(ctx, p.Blob); err != nil {
		if ctx.Err() != nil {
			return interruptedError{fmt.Sprintf("get: interrupted while checking %s", p.Key)}
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
			return interruptedError{fmt.Sprintf("get: interrupted after %s", count(printed, "line"))}
		}
		return fail("get", err)
	}
	if re != nil && matched == 0 {
		return quietError{fmt.Sprintf("get: no line of %s matches %q", p.Key, o.grep)}
	}
	return nil
}

// checkOutput refuses, before anything is read, an --output that cannot be
// a file: a directory, or a path in a directory that is not there.
func checkOutput(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("--output %s: is a directory", path)
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--output %s: no such directory: %s", path, dir)
	case err != nil:
		return fmt.Errorf("--output %s: %v", path, pathReason(err))
	case !fi.IsDir():
		return fmt.Errorf("--output %s: %s is not a directory", path, dir)
	}
	return nil
}

// writeFile writes a part's checked bytes to path, through a temp file
// renamed into place: a failed get leaves what was there. A file that was
// there keeps its mode; a new one gets what the umask leaves of 0666, as
// a shell's redirection gives it. Errors name path, not the temp file.
func writeFile(ctx context.Context, s *store.Store, p store.Part, path string) error {
	mode := fs.FileMode(0)
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		mode = fi.Mode().Perm()
	}
	tmp, err := createTemp(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("--output %s: %v", path, pathReason(err))
	}
	_, err = s.Copy(ctx, ctxWriter{ctx, tmp}, p)
	err = lostBlob(ctx, s, p, err)
	if err == nil && mode != 0 {
		if err = tmp.Chmod(mode); err != nil {
			err = fmt.Errorf("--output %s: keep its mode %v: %v", path, mode, pathReason(err))
		}
	}
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("--output %s: %v", path, pathReason(cerr))
	}
	if err == nil {
		if rerr := os.Rename(tmp.Name(), path); rerr != nil {
			err = fmt.Errorf("--output %s: %v", path, pathReason(rerr))
		}
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// createTemp creates a new file in dir for writeFile, with mode 0666 less
// the umask (os.CreateTemp's files are 0600).
func createTemp(dir string) (*os.File, error) {
	for {
		name := filepath.Join(dir, ".casctl-get-"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
}

// pathReason is the reason a file operation failed, without the path it
// names (a temp file's, which means nothing to the user).
func pathReason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// ctxWriter is a writer that stops writing once ctx is done: Ctrl-C stops
// a copy to a slow reader between two writes.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

var versionRE = regexp.MustCompile(`^(.+)@([0-9]+)$`)

// resolve finds the part a reference names, taking KEY@N for version N of
// a key, and explains a run name given where a reference belongs, and a
// key that is not there.
func resolve(ctx context.Context, s *store.Store, ref string) (store.Part, error) {
	p, err := s.Resolve(ctx, "", refArg(ref))
	if err == nil {
		return p, nil
	}
	if m := versionRE.FindStringSubmatch(ref); m != nil && errors.Is(err, store.ErrNotFound) {
		n, _ := strconv.Atoi(m[2])
		p, err = s.ResolveVersion(ctx, "", m[1], n)
		if err == nil {
			return p, nil
		}
	}
	if errors.Is(err, store.ErrInvalidRef) && !strings.ContainsAny(ref, "/"+string(filepath.Separator)) {
		if ok, _ := s.HasRun(ctx, ref); ok {
			return store.Part{}, usageError{fmt.Errorf("%q is a run, not a part; list its parts with casctl ls --run %s", ref, ref)}
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return store.Part{}, notFoundHint(ctx, s, ref, err)
	}
	return store.Part{}, err
}

// notFoundHint adds to a key's not-found where to look: the run's parts
// when the run is there, the runs there are when it is not.
func notFoundHint(ctx context.Context, s *store.Store, ref string, err error) error {
	run, _, ok := strings.Cut(ref, "/")
	if !ok || run == "" || filepath.IsAbs(ref) || hook.CheckRun(run) != nil {
		return err
	}
	has, herr := s.HasRun(ctx, run)
	switch {
	case herr != nil:
		return err
	case has:
		return fmt.Errorf("%w; casctl ls --run %s lists the parts of run %s", err, run, run)
	}
	return fmt.Errorf("%w: the store holds no run %q; casctl ls lists what it holds", err, run)
}

// refError is fail for a reference that resolve did not find: one that is
// not a reference at all is a usage error (exit 2), like a bad flag value.
func refError(verb string, err error) error {
	var ue usageError
	if errors.As(err, &ue) {
		return usageError{fail(verb, ue.err)}
	}
	if errors.Is(err, store.ErrInvalidRef) {
		return usageError{fail(verb, err)}
	}
	return fail(verb, err)
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
