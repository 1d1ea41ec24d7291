package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/toolcas/toolcas/store"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitInterrupted is a shell's code for a command stopped by SIGINT
	// (128+2): the code of every command stopped by Ctrl-C.
	exitInterrupted = 130
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
	// index is --index: the URL of the store's index in PostgreSQL.
	index string
	// cache is --cache: the read-through cache of a store on S3.
	cache string
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

// storeSource says where storeDir found the store's location, for a
// message about it: " (from $CASCTL_STORE)", or "" when --store or the
// default named it, which the user sees in the command line.
func (g *globals) storeSource() string {
	if g.store == "" && os.Getenv("CASCTL_STORE") != "" {
		return " (from $CASCTL_STORE)"
	}
	return ""
}

// indexURL returns the store's index URL: --index, else $CASCTL_INDEX, else
// "" for the store's own (index.db beside the blobs, or the URL the store
// recorded when it was created with one).
func (g *globals) indexURL() string {
	if g.index != "" {
		return g.index
	}
	return os.Getenv("CASCTL_INDEX")
}

// storeOptions returns opts with the index option that --index or
// $CASCTL_INDEX asks for, and on a store on S3 the cache --cache names.
func (g *globals) storeOptions(opts []store.Option) []store.Option {
	if u := g.indexURL(); u != "" {
		opts = append([]store.Option{store.WithIndexURL(u)}, opts...)
	}
	if g.cache != "" && store.IsRemoteLocation(g.storeDir()) {
		opts = append(opts, store.WithCacheDir(g.cache))
	}
	return opts
}

// checkCache refuses --cache on a store in a directory, which has none.
func (g *globals) checkCache() error {
	if g.cache != "" && !store.IsRemoteLocation(g.storeDir()) {
		return usagef("--cache is the local cache of a store on S3 (--store s3://BUCKET/PREFIX); %s is a directory", g.storeDir())
	}
	return nil
}

// open opens an existing store; a directory without one is an error that
// says how to make one.
func (g *globals) open(ctx context.Context, opts ...store.Option) (*store.Store, error) {
	dir := g.storeDir()
	if err := g.checkCache(); err != nil {
		return nil, err
	}
	if store.IsRemoteLocation(dir) {
		s, err := store.Open(ctx, dir, g.storeOptions(opts)...)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if !store.Exists(dir) {
		return nil, g.noStore("create one with casctl init, or name one with --store or $CASCTL_STORE")
	}
	if !g.readOnly {
		if err := writeAccess(dir); err != nil {
			return nil, err
		}
	}
	s, err := store.Open(ctx, dir, g.storeOptions(opts)...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// openRead opens the store read-only, for a command that only reads it, so
// that it works on a read-only mount or without write permission. An index
// that needs migrating first is opened for writing, when it can be.
func (g *globals) openRead(ctx context.Context, opts ...store.Option) (*store.Store, error) {
	g.readOnly = true
	s, err := g.open(ctx, append(slices.Clip(opts), store.ReadOnly())...)
	g.readOnly = false
	if errors.Is(err, store.ErrOlderSchema) {
		return g.open(ctx, opts...)
	}
	return s, err
}

// openWritable opens the store for writing when it can be written, and
// read-only when not: verify records what it found whole only when it can.
func (g *globals) openWritable(ctx context.Context, opts ...store.Option) (*store.Store, error) {
	if writeAccess(g.storeDir()) == nil {
		return g.open(ctx, opts...)
	}
	return g.openRead(ctx, opts...)
}

// storeAccess says, for every command, whether it only reads the store
// (and so works on a read-only one) or writes to it: the one definition
// behind casctl --help's lists and the refusal of a read-only store.
var storeAccess = []struct {
	command string
	writes  bool
}{
	{"init", true},
	{"put", true},
	{"get", false},
	{"show", false},
	{"ls", false},
	{"grep", false},
	{"stats", false},
	{"gc", true},
	{"pack", true},
	{"prune", true},
	{"retention", false},
	{"retention show", false},
	{"retention set", true},
	{"retention clear", true},
	{"verify", false},
	{"repair", true},
	{"vacuum", true},
	{"copy", true},
	{"demo", true},
	{"mcp serve", false},
	{"mcp proxy", true},
}

// accessList lists, in prose, the commands that write the store or those
// that only read it.
func accessList(writes bool) string {
	var names []string
	for _, a := range storeAccess {
		if a.command == "retention" {
			continue // a group: its commands are listed
		}
		if a.writes == writes {
			names = append(names, a.command)
		}
	}
	return andList(names)
}

// andList joins names as prose does: "a, b and c".
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// writeAccess says clearly when a command that writes cannot write to the
// store's directory (a read-only mount, no permission).
func writeAccess(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return nil // Open says what is wrong, or creates it.
	}
	if err := canWrite(dir); err != nil {
		abs, _ := filepath.Abs(dir)
		return fmt.Errorf("this command writes to the store, and %s is not writable here (%v); %s work on a read-only store",
			abs, err, accessList(false))
	}
	return nil
}

// create opens the store at the store directory, creating it where the
// directory is missing or empty. A directory that holds other files is
// refused: a mistyped --store must not turn a project into a store. It
// reports whether it created the store.
func (g *globals) create(ctx context.Context, opts ...store.Option) (*store.Store, bool, error) {
	dir := g.storeDir()
	if err := g.checkCache(); err != nil {
		return nil, false, err
	}
	if store.IsRemoteLocation(dir) {
		// init on S3 makes the bucket and the marker if they are missing,
		// and migrates the database; on a store that is there it only
		// opens it.
		s, err := store.Open(ctx, dir, g.storeOptions(append(opts, store.WithCreate()))...)
		if err != nil {
			return nil, false, err
		}
		return s, false, nil
	}
	created := false
	if !store.Exists(dir) {
		if err := checkEmptyDir(dir); err != nil {
			return nil, false, err
		}
		opts = append(opts, store.WithCreate())
		created = true
	} else if g.indexURL() != "" {
		// A store whose first init could not reach its database: this
		// one migrates the database and records it, unless the store
		// already keeps its index elsewhere.
		opts = append(opts, store.WithCreate())
	}
	if err := writeAccess(dir); err != nil {
		return nil, false, err
	}
	s, err := store.Open(ctx, dir, g.storeOptions(opts)...)
	if err != nil {
		return nil, false, err
	}
	return s, created, nil
}

// checkEmptyDir accepts a directory that does not exist or is empty.
func checkEmptyDir(dir string) error {
	abs, _ := filepath.Abs(dir)
	des, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", abs, err)
	case len(des) > 0:
		return fmt.Errorf("%s holds %s but no store; a store needs a new or empty directory (name another with --store)", abs, count(len(des), "file"))
	}
	return nil
}

func errNoStore(dir, hint string) error {
	abs, _ := filepath.Abs(dir)
	return fmt.Errorf("no store at %s; %s", abs, hint)
}

// noStore says there is no store where the command looks, and where that
// place came from when the command line does not show it.
func (g *globals) noStore(hint string) error {
	abs, _ := filepath.Abs(g.storeDir())
	return fmt.Errorf("no store at %s%s; %s", abs, g.storeSource(), hint)
}

// fail turns a library error into what casctl prints after "casctl: ":
// the command's name once, then the error as it is (library errors name
// the operation that failed, not their package).
func fail(verb string, err error) error {
	if err == nil {
		return nil
	}
	var ue usageError
	if errors.As(err, &ue) {
		return err
	}
	if !strings.HasPrefix(err.Error(), verb+": ") {
		err = fmt.Errorf("%s: %w", verb, err)
	}
	if errors.Is(err, store.ErrInvalidIndexURL) || errors.Is(err, store.ErrInvalidLocation) {
		// A malformed --index or --store: a bad flag value.
		return usageError{err}
	}
	return err
}

func newRootCommand(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "casctl",
		Short: "Look into, clean and try a toolcas store of offloaded tool results",
		Long: wrap("casctl works on a toolcas store: a content-addressed directory of the large "+
			"results of LLM agents' tool calls, with an index of every key.\n\n"+
			"The store is --store DIR, else $CASCTL_STORE, else ./tool_results; a shared "+
			"store keeps its blobs on S3 and its index in PostgreSQL "+
			"(casctl help stores). "+accessList(false)+" only read the store (a read-only one too); "+
			accessList(true)+" write to it.\n\n"+
			"Try it: casctl demo, then casctl ls, show, get, stats, verify.", 80),
		Version:       version(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(g.stdin)
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	root.SetVersionTemplate("casctl {{.Version}}\n")
	root.PersistentFlags().StringVar(&g.store, "store", "", "store directory or s3://BUCKET/PREFIX (default $CASCTL_STORE, else ./tool_results)")
	root.RegisterFlagCompletionFunc("store", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveFilterDirs
	})
	root.PersistentFlags().StringVar(&g.index, "index", "", "index URL, postgres://USER@HOST:PORT/DB (default $CASCTL_INDEX, else the store's own)")
	root.PersistentFlags().StringVar(&g.cache, "cache", "", "local cache of a store on S3 (default under the user's cache directory)")
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		newInitCommand(g),
		newPutCommand(g),
		newGetCommand(g),
		newShowCommand(g),
		newLsCommand(g),
		newGrepCommand(g),
		newStatsCommand(g),
		newGCCommand(g),
		newPackCommand(g),
		newPruneCommand(g),
		newRetentionCommand(g),
		newVerifyCommand(g),
		newRepairCommand(g),
		newVacuumCommand(g),
		newCopyCommand(g),
		newDemoCommand(g),
		newMCPCommand(g),
		newStoresTopic(),
	)
	root.SetHelpCommand(newHelpCommand(root))
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) == 0 {
					return usagef("completion needs a shell: bash, zsh, fish or powershell")
				}
				return usagef("completion: no shell %q; casctl completes bash, zsh, fish and powershell", args[0])
			}
			for _, sh := range c.Commands() {
				sh.Long = wrap(sh.Long, 80)
				bashNeedsNoPackage(sh)
			}
		}
	}
	// Flag descriptions wrap to fit 80 columns.
	root.SetUsageTemplate(strings.NewReplacer(
		".LocalFlags.FlagUsages", "(.LocalFlags.FlagUsagesWrapped 78)",
		".InheritedFlags.FlagUsages", "(.InheritedFlags.FlagUsagesWrapped 78)",
	).Replace(root.UsageTemplate()))
	return root
}

// version is the module's version and the VCS revision it was built from,
// as the Go toolchain recorded them.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	return versionOf(bi) + revisionNote(bi)
}

// revisionNote says why a build names no revision: go run, and a build
// with -buildvcs=false (in $GOFLAGS, say), record none.
func revisionNote(bi *debug.BuildInfo) string {
	for _, kv := range bi.Settings {
		if kv.Key == "vcs.revision" && kv.Value != "" {
			return ""
		}
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return "" // a release, or a pseudo-version naming its commit
	}
	return " (no revision recorded: go run and -buildvcs=false record none; go build does)"
}

// versionOf renders build information: version, revision, its time, local
// changes, Go version.
func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	settings := map[string]string{}
	for _, kv := range bi.Settings {
		settings[kv.Key] = kv.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += ", revision " + rev
		if t := settings["vcs.time"]; t != "" {
			v += " of " + t
		}
		if settings["vcs.modified"] == "true" {
			v += " with local changes"
		}
	}
	return v + ", " + bi.GoVersion
}

var flagValueRE = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-\w, )?--([\w-]+)" flag: (.*)$`)

// flagError rewrites pflag's parse errors, which quote Go's parser, into
// what the flag wants.
func flagError(cmd *cobra.Command, err error) error {
	m := flagValueRE.FindStringSubmatch(err.Error())
	if m == nil {
		return usageError{err}
	}
	value, name, why := m[1], m[2], m[3]
	f := cmd.Flags().Lookup(name)
	if f == nil {
		return usageError{err}
	}
	switch f.Value.Type() {
	case "duration":
		// durationFlag's errors quote the value and say what it wants.
		return usagef("--%s: %s", name, why)
	case "int", "int64", "int32":
		why = "want a whole number"
	case "uint64", "uint", "uint32":
		why = "want a whole number from 0"
	case "bool":
		why = "want true or false"
	}
	return usagef("--%s %q: %s", name, value, why)
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
	if ctx.Err() != nil {
		// Ctrl-C: whatever failed failed because of it.
		var ie interruptedError
		if !errors.As(err, &ie) {
			ie = interruptedError{"interrupted"}
			if cmd != nil && cmd.HasParent() {
				ie.msg = commandName(cmd) + ": interrupted"
			}
		}
		fmt.Fprintf(stderr, "casctl: %s\n", ie.msg)
		return exitInterrupted
	}
	var ge grepError
	if errors.As(err, &ge) {
		// grep's own convention: 1 is "no match", so an error is 2.
		fmt.Fprintf(stderr, "casctl: %v\n", err)
		return exitUsage
	}
	var q quietError
	if errors.As(err, &q) {
		if q.msg != "" {
			fmt.Fprintf(stderr, "casctl: %s\n", q.msg)
		}
		return exitFailure
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

// interruptedError says what a command stopped by Ctrl-C did or left
// undone ("put: interrupted; nothing stored"); run prints it and exits 130.
type interruptedError struct{ msg string }

func (e interruptedError) Error() string { return e.msg }

// commandName is a command's path without "casctl ": "mcp serve".
func commandName(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// quietError exits 1 with msg, or nothing, on stderr: for outcomes that are
// answers rather than failures, as grep's exit 1 for no match.
type quietError struct{ msg string }

func (e quietError) Error() string { return e.msg }

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
		return usagef("%s takes no arguments, got %q", cmd.Name(), args[0])
	}
	return nil
}

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %s", cmd.Name(), what)
		}
		return nil
	}
}

func maxArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return usagef("%s takes %s", cmd.Name(), what)
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

// isTerminal reports whether a stream is a terminal. Tests replace it to
// play a person at a terminal.
var isTerminal = func(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// wrap breaks the lines of s that are wider than width at spaces, keeping
// their indentation.
func wrap(s string, width int) string {
	var b strings.Builder
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		if utf8.RuneCountInString(line) <= width {
			b.WriteString(line)
			continue
		}
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		col := 0
		for j, word := range strings.Fields(line) {
			n := utf8.RuneCountInString(word)
			switch {
			case j == 0:
				b.WriteString(indent + word)
				col = len(indent) + n
			case col+1+n > width:
				b.WriteString("\n" + indent + word)
				col = len(indent) + n
			default:
				b.WriteString(" " + word)
				col += 1 + n
			}
		}
	}
	return b.String()
}

// newStoresTopic is casctl help stores: where a store keeps its blobs and
// its index, and how to name them.
func newStoresTopic() *cobra.Command {
	return &cobra.Command{
		Use:   "stores",
		Short: "Where a store lives: a directory, or S3 and PostgreSQL",
		Long: `A store in a directory keeps its blobs in blobs/ and its index in SQLite
(index.db beside them). The store is --store DIR, else $CASCTL_STORE, else
./tool_results.

A store shared by many machines keeps its blobs in an S3-compatible object
store, --store s3://BUCKET/PREFIX[?endpoint=URL&region=R], and its index in
PostgreSQL; recent blobs stay in a local cache (--cache DIR, default under
the user's cache directory), whose files pointers name. Credentials come the
standard AWS way (AWS_ACCESS_KEY_ID, ...).

Its index is --index postgres://USER@HOST:PORT/DB, else $CASCTL_INDEX, else
the one the store was created with: casctl init --index URL migrates the
database and records the URL (never its password, which comes from the URL,
PGPASSWORD or ~/.pgpass) in the store, so later commands need no --index,
and one naming another index is refused.

` + wrap(accessList(false)+" only read a store, and work on a read-only one; "+
			accessList(true)+" need write access.", 76),
	}
}

// newHelpCommand is casctl help [COMMAND]: cobra's, except that a command
// or topic casctl does not have is a usage error, with a suggestion.
func newHelpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "help prints the help of a command or topic: casctl help get, casctl help stores.",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
					if strings.HasPrefix(sub.Name(), toComplete) {
						names = append(names, sub.Name())
					}
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if err == nil && len(rest) == 0 {
				cmd.InitDefaultHelpFlag()
				return cmd.Help()
			}
			name := strings.Join(args, " ")
			parent := root
			if cmd != nil && cmd != root {
				parent = cmd
			}
			if len(rest) > 0 {
				name = rest[0]
			}
			hint := "; casctl --help lists them"
			if s := parent.SuggestionsFor(name); len(s) > 0 {
				hint = fmt.Sprintf("; did you mean %s?", andList(s))
				if parent != root {
					hint = fmt.Sprintf("; did you mean %s %s?", commandName(parent), andList(s))
				}
			}
			return usagef("help: no command or topic %q%s", strings.Join(args, " "), hint)
		},
	}
}
