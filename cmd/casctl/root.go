package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/store"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError marks a mistake in how casctl was called: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// globals are the flags and streams every command shares.
type globals struct {
	store string
	// readOnly is set while openRead opens the store.
	readOnly bool
	stdin    io.Reader
	stdout   io.Writer
	stderr   io.Writer
}

// storeDir returns the store directory: --store, else $CASCTL_STORE, else
// ./tool_results.
func (g *globals) storeDir() string {
	if g.store != "" {
		return g.store
	}
	if d := os.Getenv("CASCTL_STORE"); d != "" {
		return d
	}
	return store.DefaultDir
}

// open opens the store; only init, put and demo create one.
func (g *globals) open(ctx context.Context, create bool, opts ...store.Option) (*store.Store, error) {
	dir := g.storeDir()
	if !create && !store.Exists(dir) {
		abs, _ := filepath.Abs(dir)
		return nil, fmt.Errorf("no store at %s (create one with casctl init, or name one with --store or $CASCTL_STORE)", abs)
	}
	if create {
		opts = append(opts, store.WithCreate())
	}
	if !g.readOnly {
		if err := writeAccess(dir); err != nil {
			return nil, err
		}
	}
	s, err := store.Open(ctx, dir, opts...)
	if err != nil {
		return nil, cleanErr(err)
	}
	return s, nil
}

// openRead opens the store read-only, for a command that only reads it, so
// that it works on a read-only mount or without write permission. An index
// that needs migrating first is opened for writing, when it can be.
func (g *globals) openRead(ctx context.Context) (*store.Store, error) {
	g.readOnly = true
	s, err := g.open(ctx, false, store.ReadOnly())
	g.readOnly = false
	if errors.Is(err, index.ErrOlderSchema) {
		return g.open(ctx, false)
	}
	return s, err
}

// openWritable opens the store for writing when it can be written, and
// read-only when not: verify records what it found whole only when it can.
func (g *globals) openWritable(ctx context.Context) (*store.Store, error) {
	if writeAccess(g.storeDir()) == nil {
		return g.open(ctx, false)
	}
	return g.openRead(ctx)
}

// readOnlyCommands are the commands that work on a store they cannot write.
const readOnlyCommands = "ls, get, show, stats and verify"

// writeAccess says clearly when a command that writes cannot write to the
// store's directory (a read-only mount, no permission).
func writeAccess(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return nil // Open says what is wrong, or creates it.
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		abs, _ := filepath.Abs(dir)
		return fmt.Errorf("this command writes to the store, and %s is not writable here (%v); %s work on a read-only store",
			abs, err, readOnlyCommands)
	}
	return nil
}

// cleanErr drops the package prefixes that library errors carry, which say
// nothing to someone at a terminal.
func cleanErr(err error) error {
	msg := err.Error()
	for _, p := range []string{"store: ", "cas: ", "index: ", "hook: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return &cleanError{msg: msg, err: err}
}

type cleanError struct {
	msg string
	err error
}

func (e *cleanError) Error() string { return e.msg }
func (e *cleanError) Unwrap() error { return e.err }

func newRootCommand(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "casctl",
		Short: "Look into, clean and try a toolcas store of offloaded tool results",
		Long: `casctl works on a toolcas store: a content-addressed directory of the large
results of LLM agents' tool calls, with a SQLite index of every key.

The store is --store DIR, else $CASCTL_STORE, else ./tool_results.
ls, get, show, stats and verify only read it, and work on a read-only
store; init, put, prune, gc and demo need write access.
Try it: casctl demo, then casctl ls, show, get, stats, verify.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(g.stdin)
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	root.PersistentFlags().StringVar(&g.store, "store", "", "store directory (default $CASCTL_STORE, else ./tool_results)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newInitCommand(g),
		newPutCommand(g),
		newGetCommand(g),
		newShowCommand(g),
		newLsCommand(g),
		newStatsCommand(g),
		newGCCommand(g),
		newPruneCommand(g),
		newVerifyCommand(g),
		newDemoCommand(g),
	)
	return root
}

// run executes casctl and returns its exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCommand(g)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		fmt.Fprintf(stderr, "casctl: %v\n", err)
		if cmd != nil {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return exitUsage
	}
	fmt.Fprintf(stderr, "casctl: %v\n", err)
	return exitFailure
}

// isCobraUsage recognises the usage errors cobra makes itself.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "required flag", "invalid argument", "flag needs an argument"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// Argument checks that fail as usage errors.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args[0])
	}
	return nil
}

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %s", cmd.CommandPath(), what)
		}
		return nil
	}
}

func maxArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return usagef("%s takes %s", cmd.CommandPath(), what)
		}
		return nil
	}
}

// refArg turns a relative path that names an existing file (a blob as the
// shell completes it, tool_results/blobs/3f/…) into an absolute one, which
// the store resolves; any other reference is passed as it is.
func refArg(ref string) string {
	if filepath.IsAbs(ref) {
		return ref
	}
	if _, err := os.Lstat(ref); err == nil {
		if abs, err := filepath.Abs(ref); err == nil {
			return abs
		}
	}
	return ref
}
