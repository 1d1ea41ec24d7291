package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/internal/pgtest"
	"github.com/toolcas/toolcas/internal/versitygw"
)

// Tests that need separate processes re-execute the test binary with
// TOOLCAS_CHILD set to a role; TestMain runs that role instead of the tests.
const childEnv = "TOOLCAS_CHILD"

// childDurabilityEnv names the durability (see DurabilityOptions) a child
// opens the store with; unset, the default.
const childDurabilityEnv = "TOOLCAS_CHILD_DURABILITY"

// childCacheEnv names the directory under which a child working on a
// store on S3 makes its own cache directory.
const childCacheEnv = "TOOLCAS_CHILD_CACHE"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		flag.Parse()
		os.Exit(runChild(role, os.Getenv("TOOLCAS_CHILD_ARGS")))
	}
	// One PostgreSQL cluster and one S3 server for the package's tests,
	// each started at its first use.
	code := m.Run()
	pgtest.StopShared()
	versitygw.StopShared()
	os.Exit(code)
}

// childCmd returns the command running the test binary in a role, not
// started.
func childCmd(role string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, "TOOLCAS_CHILD_ARGS="+strings.Join(args, "|"))
	return cmd
}

// startChild starts the test binary in a role.
func startChild(t *testing.T, role string, args ...string) *exec.Cmd {
	t.Helper()
	return startChildTo(t, &bytes.Buffer{}, role, args...)
}

// startChildTo starts the test binary in a role, its output going to out.
func startChildTo(t *testing.T, out io.Writer, role string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := childCmd(role, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// A lineWatcher holds a child's output as it comes, and closes the channel
// of each of its markers once the output holds it.
type lineWatcher struct {
	mu   sync.Mutex
	out  bytes.Buffer
	seen map[string]chan struct{}
}

func newLineWatcher(markers ...string) *lineWatcher {
	w := &lineWatcher{seen: map[string]chan struct{}{}}
	for _, m := range markers {
		w.seen[m] = make(chan struct{})
	}
	return w
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.out.Write(p)
	for m, seen := range w.seen {
		select {
		case <-seen:
		default:
			// A marker may come in pieces: look from where it could start.
			from := max(0, w.out.Len()-len(p)-len(m))
			if bytes.Contains(w.out.Bytes()[from:], []byte(m)) {
				close(seen)
			}
		}
	}
	return n, err
}

func (w *lineWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.String()
}

func runChild(role, args string) int {
	a := strings.Split(args, "|")
	var err error
	switch role {
	case "writer":
		err = crashWriter(a[0], a[1], a[2], a[3] == "nolock")
	case "gc":
		var until loopEnd
		if len(a) > 2 {
			until = loopEndOf(a[2], a[3:]...)
		}
		err = gcLoop(a[0], a[1] == "nolock", until)
	case "packer":
		err = packLoop(a[0], a[1:]...)
	case "racer":
		err = raceWriter(a[0], a[1], loopEndOf(a[2], a[4:]...), a[3] == "nolock")
	case "collider":
		err = collider(a[0], a[1], a[2])
	case "watcher":
		err = watchKeys(a[0], a[1], a[2] == "ro")
	default:
		run, ok := lockRoles[role]
		if !ok {
			err = fmt.Errorf("unknown child role %q", role)
			break
		}
		err = run(a)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "CHILD ERROR:", err)
		return 3
	}
	return 0
}

// openChild opens the store a child process works on, with gc.lock turned
// off when the test asks, and with any other options given.
func openChild(ctx context.Context, dir string, nolock bool, extra ...Option) (*Store, error) {
	opts := extra
	if d := os.Getenv(childDurabilityEnv); d != "" {
		dopts, err := DurabilityOptions(d)
		if err != nil {
			return nil, err
		}
		opts = append(opts, dopts...)
	}
	if nolock {
		opts = append(opts, withoutGCLock())
	}
	if IsRemoteLocation(dir) {
		// A store on S3: each child is a machine with a cache of its own.
		cache, err := os.MkdirTemp(os.Getenv(childCacheEnv), "machine-")
		if err != nil {
			return nil, err
		}
		return Open(ctx, dir, append(opts, WithCacheDir(cache))...)
	}
	return Open(ctx, dir, opts...)
}

// content returns size self-checking bytes: a header naming the seed and
// size, then bytes generated from the seed. Identical seeds and sizes give
// identical content, so writers of the same seed dedup against each other.
func content(seed uint64, size int) []byte {
	head := fmt.Sprintf("toolcas-test seed=%d size=%d\n", seed, size)
	b := make([]byte, max(size, len(head)))
	copy(b, head)
	fill(b[len(head):], seed)
	return b
}

func fill(b []byte, seed uint64) {
	x := seed*0x9e3779b97f4a7c15 | 1
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(w[:], x)
		// Printable, so that the content is text.
		for j := range w {
			w[j] = 'a' + w[j]%26
		}
		copy(b[i:], w[:])
	}
}

// checkContent verifies bytes made by content.
func checkContent(b []byte) error {
	line, _, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return fmt.Errorf("no header in %d bytes", len(b))
	}
	var seed uint64
	var size int
	if _, err := fmt.Sscanf(string(line), "toolcas-test seed=%d size=%d", &seed, &size); err != nil {
		return fmt.Errorf("header %q: %v", line, err)
	}
	if !bytes.Equal(b, content(seed, size)) {
		return fmt.Errorf("content of seed %d, size %d differs from what was written", seed, size)
	}
	return nil
}

// genReader streams content(seed, size) without holding it.
func genReader(seed uint64, size int) io.Reader {
	head := fmt.Sprintf("toolcas-test seed=%d size=%d\n", seed, size)
	body := make([]byte, size-len(head))
	fill(body, seed)
	return io.MultiReader(strings.NewReader(head), bytes.NewReader(body))
}

var sizes = []int{200, 5000, 70_000, 300_000}

// crashWriter writes batches from two goroutines until killed, appending
// "key digest" to the log after each write returns: what it saw committed,
// or without syncs, what it saw queued (the store then logs its commit).
func crashWriter(dir, seedArg, logPath string, nolock bool) error {
	ctx := context.Background()
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	var mu sync.Mutex
	// Without syncs, a write may return before its rows commit: the log
	// says which writes' rows did (committedRowLine), which no kill may
	// lose.
	s, err := openChild(ctx, dir, nolock, withCommittedRows(func(parts []index.NewPart) {
		var b strings.Builder
		for _, p := range parts {
			fmt.Fprintf(&b, "committed %s %s\n", p.Key, p.Blob.Digest)
		}
		mu.Lock()
		log.WriteString(b.String())
		mu.Unlock()
	}))
	if err != nil {
		return err
	}
	defer s.Close()
	seed, _ := strconv.ParseUint(seedArg, 10, 64)
	// Two writers in the process, so that their rows share transactions.
	errs := make(chan error, 2)
	for g := range uint64(2) {
		go func() { errs <- crashWrites(ctx, s, seed, g, &mu, log) }()
	}
	return <-errs
}

// crashWrites writes until killed, and logs each write that returned.
func crashWrites(ctx context.Context, s *Store, seed, g uint64, mu *sync.Mutex, log *os.File) error {
	rng := rand.New(rand.NewPCG(seed, uint64(os.Getpid())<<1|g))
	for iter := 0; ; iter++ {
		run := fmt.Sprintf("w%d", seed%7)
		if rng.IntN(5) == 0 {
			run = fmt.Sprintf("junk-%d", rng.IntN(3))
		}
		if iter%10 == 9 {
			k := hook.Key{Run: run, Step: iter, Tool: "stream", CallID: fmt.Sprint(seed, "-", g, "-", iter), Part: -1}
			cseed := 1<<40 + seed<<20 + g<<19 + uint64(iter)
			res, err := s.Put(ctx, StreamPart{Key: k}, genReader(cseed, 3<<20))
			if err != nil {
				return err
			}
			// A put's row commits before it returns, with syncs or without.
			mu.Lock()
			fmt.Fprintf(log, "%s %s %d %d\ncommitted %[1]s %[2]s\n", res.Key, res.Digest, time.Now().UnixNano(), seed)
			mu.Unlock()
			continue
		}
		n := 1 + rng.IntN(4)
		items := make([]hook.Item, n)
		for i := range items {
			cseed := uint64(rng.IntN(40))
			if rng.IntN(10) < 3 {
				cseed = 1<<32 + seed<<20 + g<<19 + uint64(iter*8+i)
			}
			data := content(cseed, sizes[cseed%uint64(len(sizes))])
			items[i] = hook.Item{Key: hook.Key{Run: run, Step: iter, Tool: "t", CallID: fmt.Sprint(seed, "-", g), Part: i, Ext: ".txt"}, Part: hook.Text(string(data))}
		}
		st, err := s.Write(ctx, items)
		if err != nil {
			return err
		}
		var b strings.Builder
		at := time.Now().UnixNano()
		for _, x := range st {
			fmt.Fprintf(&b, "%s %s %d %d\n", x.Key, x.Digest, at, seed)
		}
		mu.Lock()
		log.WriteString(b.String())
		mu.Unlock()
	}
}

// A loopEnd says when a child that works in a loop stops, by what other
// processes did rather than by how long it ran: once the file stop exists,
// or once the file runs (to which a process doing the other side of a
// race appends a byte for each run it completed) has grown by min runs
// since the child's first round of work was done. The deadline only keeps
// a child that nobody stops from running for ever: reaching it is a
// failure when the child was to stop on its own. For a child that waits
// on runs it is a watchdog, not a budget: each run the other side
// completes moves it window further, so that a slow race (on a busy
// machine) goes on while a stalled one fails.
type loopEnd struct {
	deadline   time.Time
	window     time.Duration
	stop, runs string
	min        int64
	// from is the size of runs after the first round, -1 before it; seen
	// its size when the deadline last moved.
	from, seen int64
	now        func() time.Time
}

// loopEndOf reads a loopEnd from a child's arguments: the deadline in
// milliseconds from now, then, optionally, the stop file (empty for none),
// the runs file and how many runs to wait for.
func loopEndOf(ms string, rest ...string) loopEnd {
	n, _ := strconv.Atoi(ms)
	e := loopEnd{window: time.Duration(n) * time.Millisecond, from: -1, now: time.Now}
	e.deadline = e.now().Add(e.window)
	if len(rest) > 0 {
		e.stop = rest[0]
	}
	if len(rest) > 1 {
		e.runs = rest[1]
	}
	if len(rest) > 2 {
		e.min, _ = strconv.ParseInt(rest[2], 10, 64)
	}
	return e
}

// done reports whether the loop is to stop, after round rounds of work;
// an error when the deadline came before what it waits for.
func (e *loopEnd) done(rounds int) (bool, error) {
	if e.deadline.IsZero() {
		return false, nil
	}
	if e.stop != "" {
		if _, err := os.Stat(e.stop); err == nil {
			return true, nil
		}
	}
	if e.runs != "" && rounds > 0 {
		n := fileSize(e.runs)
		if e.from < 0 {
			e.from = n
		}
		if n-e.from >= e.min {
			return true, nil
		}
		if n != e.seen {
			e.seen = n
			e.deadline = e.now().Add(e.window)
		}
	}
	if e.now().After(e.deadline) {
		if e.stop == "" && e.runs == "" {
			return true, nil
		}
		return true, fmt.Errorf("not told to stop within the deadline (%d rounds done)", rounds)
	}
	return false, nil
}

// fileSize returns the size of the file at path, 0 when there is none.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// countRun appends a byte to the runs file, if one is named: one more run
// done, for the processes that wait for it (see loopEnd).
func countRun(runs string) error {
	if runs == "" {
		return nil
	}
	f, err := os.OpenFile(runs, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte{'.'}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// gcLoop prunes the junk runs and collects garbage with no grace period,
// again and again until killed or until its loopEnd says so; it counts each
// run in its loopEnd's runs file, if one is named.
func gcLoop(dir string, nolock bool, until loopEnd) error {
	ctx := context.Background()
	s, err := openChild(ctx, dir, nolock)
	if err != nil {
		return err
	}
	defer s.Close()
	// gc counts its own runs in the runs file, rather than waiting for
	// them: it stops on the stop file only.
	counts := until.runs
	until.runs = ""
	for i := 0; ; i++ {
		if stop, err := until.done(i); stop {
			fmt.Println("GC_RUNS", i)
			return err
		}
		if _, err := s.Prune(ctx, PruneOptions{Run: fmt.Sprintf("junk-%d", i%3)}); err != nil {
			return err
		}
		// With no grace period, the blobs of writes between their blob and
		// their row look like blobs no row names, and may be most of the
		// store: the loop forces (the sweep looks again under the lock).
		// Its wait for the writers is bounded by the loop's deadline, as
		// theirs for gc is (see raceWriter).
		_, err := s.GC(ctx, GCOptions{Grace: 0, Force: true, LockTimeout: raceDeadline})
		if errors.Is(err, index.ErrGCRunning) {
			// On PostgreSQL a gc killed a moment ago holds the index's gc
			// lock until the server has ended its session: wait a turn.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			return err
		}
		if err := countRun(counts); err != nil {
			return err
		}
		if i%50 == 49 {
			time.Sleep(time.Millisecond)
		}
	}
}

// raceWriter stores content that other writers store too, reads each part
// back at once by key and by path, and prunes its older runs so that gc
// always has shared blobs to collect: a dedup hit races the sweep. It
// writes until its loopEnd says so, and prints how many parts it wrote.
func raceWriter(dir, seedArg string, until loopEnd, nolock bool) error {
	ctx := context.Background()
	// The race is about what gc removes, not how long a write waits for it:
	// on a machine busy with other work, eight writers and a gc in a loop
	// on PostgreSQL queue for its writers' lock for more than the default
	// 30 s. The race's own deadline bounds the wait instead.
	s, err := openChild(ctx, dir, nolock, WithLockTimeout(raceDeadline))
	if err != nil {
		return err
	}
	defer s.Close()
	seed, _ := strconv.ParseUint(seedArg, 10, 64)
	rng := rand.New(rand.NewPCG(seed, 7))
	parts := 0
	for iter := 0; ; iter++ {
		if stop, err := until.done(iter); stop {
			if err != nil {
				return fmt.Errorf("after %d parts: %w", parts, err)
			}
			break
		}
		run := fmt.Sprintf("r%d-%d", seed, iter%4)
		n := 1 + rng.IntN(3)
		items := make([]hook.Item, n)
		for i := range items {
			cseed := uint64(rng.IntN(30))
			if rng.IntN(4) == 0 {
				cseed = 1<<32 + seed<<24 + uint64(iter*4+i)
			}
			items[i] = hook.Item{Key: hook.Key{Run: run, Step: iter, Tool: "t", CallID: "c", Part: i, Ext: ".txt"},
				Part: hook.Text(string(content(cseed, 100+int(cseed%7)*700)))}
		}
		st, err := s.Write(ctx, items)
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		for _, x := range st {
			for _, ref := range []string{x.Key, x.Path} {
				c, err := s.Read(ctx, run, ref)
				if err != nil {
					return fmt.Errorf("read back %s just written: %w", ref, err)
				}
				if err := checkContent(c.Data); err != nil {
					return fmt.Errorf("read back %s: %w", ref, err)
				}
			}
		}
		parts += n
		if s.Remote() {
			// The rows about to be pruned lived through gc runs: each one's
			// object must still be in the object store, whatever the
			// cache holds.
			if err := checkStored(ctx, s, fmt.Sprintf("r%d-%d", seed, (iter+2)%4)); err != nil {
				return err
			}
		}
		if _, err := s.Prune(ctx, PruneOptions{Run: fmt.Sprintf("r%d-%d", seed, (iter+2)%4)}); err != nil {
			return fmt.Errorf("prune: %w", err)
		}
	}
	fmt.Println("PARTS", parts)
	return nil
}

// checkStored checks that the object store holds the blob of every row of
// a run.
func checkStored(ctx context.Context, s *Store, run string) error {
	ps, err := s.List(ctx, ListOptions{Run: run, AllVersions: true})
	if err != nil {
		return err
	}
	for _, p := range ps {
		if _, err := s.eng.backend().Stat(ctx, p.Blob); err != nil {
			return fmt.Errorf("row %s@%d, committed and not pruned: its object: %w", p.Key, p.Version, err)
		}
	}
	return nil
}

// closed says whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
