package store

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // to watch the sweep lock in pg_locks

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
)

// A writer whose put found a blob's object already there (a dedup hit on
// an object no row names, older than the grace period) and that has not
// committed its row yet holds its blob lease: a gc on another machine
// waits for it at the sweep lock, looks again once the row is committed,
// and keeps the object. Without the leases (the nolease case) the same
// interleaving deletes the object under the row about to name it, which
// shows the test can tell.
func TestLeaseKeepsDedupHitFromGC(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noLease bool
	}{{"lease", false}, {"nolease", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := startRemote(t)
			atRecord, proceed := make(chan struct{}), make(chan struct{})
			var once, closed sync.Once
			release := func() { closed.Do(func() { close(proceed) }) }
			t.Cleanup(release) // a test that fails early lets the writer go
			wopts := []Option{withFaults(func(point string) error {
				if point == "write:record" {
					once.Do(func() {
						close(atRecord)
						<-proceed
					})
				}
				return nil
			})}
			later := &clock{time.Now().Add(2 * time.Hour)}
			gopts := []Option{WithClock(later.now)}
			if tc.noLease {
				wopts = append(wopts, withoutGCLock())
				gopts = append(gopts, withoutGCLock())
			}
			w := mustOpenRemote(t, e, wopts...)
			g := mustOpenRemote(t, e, gopts...)
			// An object no row names, as a writer that died before its
			// commit leaves, old by the gc machine's clock.
			const text = "content two machines store"
			put, err := w.eng.backend().Put(ctx, strings.NewReader(text), ".txt")
			if err != nil {
				t.Fatal(err)
			}
			written := make(chan error, 1)
			go func() {
				_, err := w.Write(ctx, []hook.Item{item("r", 1, text)})
				written <- err
			}()
			<-atRecord
			gcDone := make(chan GCResult, 1)
			gcErr := make(chan error, 1)
			go func() {
				res, err := g.GC(ctx, GCOptions{Grace: time.Hour})
				gcDone <- res
				gcErr <- err
			}()
			if !tc.noLease {
				// gc waits for the writer's lease: it tries for the sweep
				// lock and is refused.
				waitForSweepTry(t, e.db)
				select {
				case res := <-gcDone:
					t.Fatalf("gc finished while a writer held its lease: %+v, %v", res, <-gcErr)
				default:
				}
			}
			if tc.noLease {
				// Nothing holds gc back: it deletes the object.
				if res, err := <-gcDone, <-gcErr; err != nil || res.RemovedBlobs != 1 {
					t.Fatalf("GC without leases = %+v, %v; want the object removed", res, err)
				}
			}
			release()
			if err := <-written; err != nil {
				t.Fatal(err)
			}
			b := put.Blob
			if tc.noLease {
				if _, err := g.eng.backend().Stat(ctx, b); !errors.Is(err, cas.ErrNotFound) {
					t.Fatalf("without leases the object is still there (%v): the interleaving did not happen", err)
				}
				v, err := g.Verify(ctx, VerifyOptions{})
				if err != nil || len(v.Missing) != 1 {
					t.Fatalf("Verify without leases = %+v, %v; want the committed row's blob missing", v, err)
				}
				t.Logf("without leases a committed row lost its blob, as expected: %s", v.Missing[0].Path)
				return
			}
			res, err := <-gcDone, <-gcErr
			if err != nil || res.RemovedBlobs != 0 {
				t.Errorf("GC = %+v, %v; want nothing removed", res, err)
			}
			if _, err := g.eng.backend().Stat(ctx, b); err != nil {
				t.Errorf("the committed row's object: %v", err)
			}
			if c, err := g.Read(ctx, "", "r/1_t_c.txt"); err != nil || string(c.Data) != text {
				t.Errorf("Read on the gc machine = %v, %v", c, err)
			}
			if v, err := g.Verify(ctx, VerifyOptions{}); err != nil || !v.OK {
				t.Errorf("Verify = %+v, %v", v, err)
			}
		})
	}
}

// waitForSweepTry polls pg_stat_activity until a session has tried for
// the sweep lock (gc's pg_try_advisory_lock, its column named sweep_lock),
// or fails the test after a deadline.
func waitForSweepTry(t *testing.T, url string) {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND query LIKE '%AS sweep_lock%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no session tried for the sweep lock within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// remoteChildren sets what child processes need to work on e's store: the
// standard AWS credentials and a directory for their own caches.
func remoteChildren(t *testing.T, e remoteEnv) {
	t.Setenv("AWS_ACCESS_KEY_ID", e.srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", e.srv.SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv(childCacheEnv, t.TempDir())
}

// TestRemoteCrashLoop is the crash loop on a store on S3 and PostgreSQL,
// with three machines: three lanes of processes, each with its own cache
// directory, writing (batches and 3 MiB streamed puts, much content shared
// between them) and, on one lane for the first two thirds, collecting
// garbage with no grace period, each killed with SIGKILL at a random
// moment. Afterwards every write a writer saw return reads back whole from
// the object store through a fresh cache (0 bytes lost), every row reads
// back, verify finds nothing corrupt or missing, and gc leaves no orphan.
func TestRemoteCrashLoop(t *testing.T) {
	kills := *crashKills
	if kills == 0 {
		kills = 30
		if testing.Short() {
			kills = 12
		}
	}
	ctx := context.Background()
	e := startRemote(t)
	s := mustOpenRemote(t, e)
	s.Close()
	remoteChildren(t, e)
	// Made here, not by the first writer: on a loaded machine every writer
	// may be killed before it opens the log, and an empty log is then
	// what the loop committed.
	logPath := filepath.Join(t.TempDir(), "committed.log")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var (
		mu                        sync.Mutex
		started, gcKilled, killed int
		clean                     int
		rng                       = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	)
	lane := func(lane int) {
		for {
			mu.Lock()
			if started >= kills {
				mu.Unlock()
				return
			}
			n := started
			started++
			delay := time.Duration(50+rng.IntN(1500)) * time.Millisecond
			mu.Unlock()
			role, args := "writer", []string{e.url, fmt.Sprint(n), logPath, "lock"}
			if lane == 2 && n%2 == 0 && n < kills*2/3 {
				role, args = "gc", []string{e.url, "lock"}
			}
			cmd := startChild(t, role, args...)
			timer := time.AfterFunc(delay, func() { cmd.Process.Signal(syscall.SIGKILL) })
			err := cmd.Wait()
			timer.Stop()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			mu.Lock()
			switch {
			case ws.Signaled() && ws.Signal() == syscall.SIGKILL:
				killed++
				if role == "gc" {
					gcKilled++
				}
			case err != nil:
				t.Errorf("%s child failed: %v\n%s", role, err, cmd.Stdout)
			default:
				clean++
			}
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for l := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); lane(l) }()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// A machine that saw none of it: every read comes from the object store.
	s, err := Open(ctx, e.url, e.options(t.TempDir())...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var checked int
	var checkedBytes, lostBytes int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, digest, ok := committedLine(sc.Text())
		if !ok || strings.HasPrefix(key, "junk-") {
			continue // a line cut short by a kill; runs gc prunes on purpose
		}
		c, err := s.Read(ctx, "", digest)
		if err == nil {
			err = checkContent(c.Data)
		}
		if err != nil {
			t.Errorf("committed %s (%s): %v", key, digest, err)
			if d, perr := cas.ParseDigest(digest); perr == nil {
				if row, rerr := s.ix.Blob(ctx, cas.Blob{Digest: d, Ext: ".txt"}); rerr == nil {
					lostBytes += row.Size
				}
			}
			continue
		}
		checked++
		checkedBytes += int64(len(c.Data))
	}
	all, err := s.List(ctx, ListOptions{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		c, err := s.Read(ctx, "", p.Blob.Digest.String())
		if err == nil {
			err = checkContent(c.Data)
		}
		if err != nil {
			t.Errorf("row %s@%d: %v", p.Key, p.Version, err)
		}
	}
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Corrupt) > 0 || len(res.Missing) > 0 {
		t.Errorf("verify after the crashes: corrupt %v, missing %v", res.Corrupt, res.Missing)
	}
	orphans := len(res.Orphans)
	// Forced, as in crashLoop: the crashes' orphans may be most of the
	// store.
	gc, err := s.GC(ctx, GCOptions{Grace: 0, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if res, err = s.Verify(ctx, VerifyOptions{}); err != nil || !res.OK || len(res.Orphans) > 0 {
		t.Errorf("after gc: %+v, %v", res, err)
	}
	if lostBytes > 0 {
		t.Errorf("%d bytes of committed writes lost", lostBytes)
	}
	t.Logf("3 machines: %d processes killed (%d gc), %d exited; %d committed writes (%d bytes) read back whole from S3, 0 bytes lost; %d rows read back; %d orphans left by the crashes, gc removed %d objects and %d uploads",
		killed, gcKilled, clean, checked, checkedBytes, len(all), orphans, gc.RemovedBlobs, gc.RemovedTemp)
}

// TestRemoteWritersAgainstGC races three writer processes (machines, each
// with its own cache) against a gc process with no grace period on a
// store on S3 and PostgreSQL, each writer writing until gc has run a
// number of times since its first write. The writers store content the
// others store too, prune their older runs so that gc always has shared
// blobs to collect, and read each part back at once by key and by path;
// afterwards a fresh machine reads every row's blob from the object store
// and verify finds nothing missing: nothing committed is lost.
func TestRemoteWritersAgainstGC(t *testing.T) {
	n := raceGCRuns()
	parts, gcRuns, rows, failure := remoteWritersAgainstGC(t, n, false)
	if failure != "" {
		t.Fatal(failure)
	}
	if parts < 3 || gcRuns < n {
		t.Fatalf("%d parts written, %d gc runs; want each of 3 writers to write through %d gc runs", parts, gcRuns, n)
	}
	t.Logf("3 machines wrote and read back %d parts against %d gc runs; %d rows read back from S3 after", parts, gcRuns, rows)
}

// TestRemoteWritersAgainstGCWithoutLeases runs the same race with the
// blob leases and the sweep lock turned off, and shows that they are what
// makes it safe. It is skipped unless TOOLCAS_SHOW_RACE=1, since it shows
// a failure on purpose.
func TestRemoteWritersAgainstGCWithoutLeases(t *testing.T) {
	if os.Getenv("TOOLCAS_SHOW_RACE") == "" {
		t.Skip("set TOOLCAS_SHOW_RACE=1 to see the race the leases prevent")
	}
	for attempt := 1; attempt <= 5; attempt++ {
		parts, gcRuns, _, failure := remoteWritersAgainstGC(t, 20, true)
		if failure != "" {
			t.Logf("without leases, attempt %d (%d parts, %d gc runs) failed as expected: %s", attempt, parts, gcRuns, failure)
			return
		}
	}
	t.Error("without leases the race never showed in 5 attempts")
}

// remoteWritersAgainstGC runs three racer processes and a gc process on a
// new store on S3, each writer until gc has run runsPer times since its
// first write, gc until the writers are done, then reads every row back
// from the object store on a fresh machine; it returns what the first
// failure said, if any.
func remoteWritersAgainstGC(t *testing.T, runsPer int, noLease bool) (parts, gcRuns, rows int, failure string) {
	ctx := context.Background()
	e := startRemote(t)
	s := mustOpenRemote(t, e)
	s.Close()
	remoteChildren(t, e)
	lock := "lock"
	if noLease {
		lock = "nolock"
	}
	r := newRaceChildren(t)
	var cmds []*childRun
	for i := range 3 {
		cmds = append(cmds, runChildOut(t, "racer", append([]string{e.url, fmt.Sprint(i + 1)}, r.writerArgs(lock, runsPer)...)...))
	}
	gcCmd := runChildOut(t, "gc", append([]string{e.url, lock}, r.gcArgs()...)...)
	var failures []string
	for _, c := range cmds {
		out, err := c.wait()
		if err != nil {
			failures = append(failures, fmt.Sprintf("writer: %v\n%s", err, out))
			continue
		}
		parts += countAfter(out, "PARTS ")
	}
	r.stopGC(t)
	out, err := gcCmd.wait()
	if err != nil {
		failures = append(failures, fmt.Sprintf("gc: %v\n%s", err, out))
	}
	gcRuns = countAfter(out, "GC_RUNS ")
	s, err = Open(ctx, e.url, e.options(t.TempDir())...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.List(ctx, ListOptions{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		c, err := s.Read(ctx, "", p.Blob.Digest.String())
		if err == nil {
			err = checkContent(c.Data)
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("row %s@%d: %v", p.Key, p.Version, err))
		}
	}
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || len(res.Missing) > 0 || len(res.Corrupt) > 0 {
		failures = append(failures, fmt.Sprintf("Verify = missing %v, corrupt %v, %v", res.Missing, res.Corrupt, err))
	}
	if len(failures) > 0 {
		failure = strings.Join(failures, "\n")
	}
	return parts, gcRuns, len(all), failure
}

// childRun is a child process whose output is kept.
type childRun struct {
	cmd *os.Process
	out *strings.Builder
	err chan error
}

// runChildOut starts the test binary in a role, keeping its output.
func runChildOut(t *testing.T, role string, args ...string) *childRun {
	t.Helper()
	cmd := childCmd(role, args...)
	var out strings.Builder
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childRun{cmd: cmd.Process, out: &out, err: make(chan error, 1)}
	go func() { c.err <- cmd.Wait() }()
	return c
}

func (c *childRun) wait() (string, error) {
	err := <-c.err
	return c.out.String(), err
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// countAfter returns the number after prefix on a line of out, 0 if none.
func countAfter(out, prefix string) int {
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(rest))
			return n
		}
	}
	return 0
}

// A writer that finds its lease lost after its commit (its session ended:
// the database restarted) puts its blobs again before it returns, so that
// an object a gc removed meanwhile, while no lease held it back, is there
// again under the committed row. The test removes the object at that
// moment, as such a gc would.
func TestLeaseLostPutsAgain(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	var s *Store
	var removed []cas.Blob
	s = mustOpenRemote(t, e, withFaults(func(point string) error {
		if point != "lease:held" {
			return nil
		}
		p, err := s.Resolve(ctx, "", "r/1_t_c.txt")
		if err != nil {
			return err
		}
		if err := s.eng.backend().Remove(ctx, p.Blob); err != nil {
			return err
		}
		removed = append(removed, p.Blob)
		return index.ErrLeaseLost
	}))
	mustWrite(t, s, item("r", 1, "put again after the lease was lost"))
	if len(removed) != 1 {
		t.Fatalf("the fault ran %d times", len(removed))
	}
	if _, err := s.eng.backend().Stat(ctx, removed[0]); err != nil {
		t.Errorf("the object after the write returned: %v; want it put again", err)
	}
	if v, err := s.Verify(ctx, VerifyOptions{}); err != nil || !v.OK {
		t.Errorf("Verify = %+v, %v", v, err)
	}
}

// terminateLockHolder ends the session that holds the sweep lock in mode
// (ExclusiveLock: gc's sweep; ShareLock: a writer's lease), as a
// PostgreSQL restart or a dropped connection would, and waits until the
// server has let the lock go.
func terminateLockHolder(t *testing.T, url, mode string) {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const q = `FROM pg_locks WHERE locktype = 'advisory' AND granted AND mode = $1 AND classid::bigint = $2
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
	const sweepClass = 0x746f6f6c + 3
	var n int
	if err := db.QueryRow(`SELECT count(pg_terminate_backend(pid)) `+q, mode, sweepClass).Scan(&n); err != nil || n == 0 {
		t.Fatalf("terminate the %s holder of the sweep lock: %d sessions, %v", mode, n, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := db.QueryRow(`SELECT count(*) `+q, mode, sweepClass).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sweep lock's %s holder still holds it 30s after it was terminated", mode)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gc's sweep lock ends (its session terminated) after gc committed the
// deletion of a batch's rows, before it removed their objects (and, in the
// second case, after it last saw the lock held); another machine then
// writes the same content. The writer's lease is granted at once, but the
// sweep fence gc set in that commit holds it back until gc can no longer
// delete: it stores its row after gc has stopped, gc reports that it
// stopped, and the committed row's object is there.
func TestLeaseSweepFence(t *testing.T) {
	for _, point := range []string{"gc:rows-deleted", "gc:remove"} {
		t.Run(point, func(t *testing.T) {
			ctx := context.Background()
			e := startRemote(t)
			w := mustOpenRemote(t, e)
			const text = "content a gc whose lock died was about to delete"
			put, err := w.eng.backend().Put(ctx, strings.NewReader(text), ".txt")
			if err != nil {
				t.Fatal(err)
			}
			var wrote []hook.Stored
			var writeErr error
			var once sync.Once
			later := &clock{time.Now().Add(2 * time.Hour)}
			g := mustOpenRemote(t, e, WithClock(later.now), withSweepWindow(2*time.Second), withFaults(func(p string) error {
				if p == point {
					once.Do(func() {
						terminateLockHolder(t, e.db, "ExclusiveLock")
						wrote, writeErr = w.Write(ctx, []hook.Item{item("r", 1, text)})
					})
				}
				return nil
			}))
			res, gcErr := g.GC(ctx, GCOptions{Grace: time.Hour})
			if writeErr != nil {
				t.Fatalf("the write while gc's lock was gone: %v", writeErr)
			}
			if len(wrote) != 1 || !wrote[0].Dedup {
				t.Fatalf("the write = %+v, want a dedup hit on the object gc was about to delete", wrote)
			}
			t.Logf("GC = %+v, %v", res, gcErr)
			if _, err := g.eng.backend().Stat(ctx, put.Blob); err != nil {
				t.Fatalf("the committed row's object: %v (GC = %+v, %v)", err, res, gcErr)
			}
			if gcErr == nil || res.RemovedBlobs != 0 {
				t.Errorf("GC = %+v, %v; want an error saying it stopped, nothing removed", res, gcErr)
			}
			if v, err := g.Verify(ctx, VerifyOptions{}); err != nil || !v.OK {
				t.Errorf("Verify = %+v, %v", v, err)
			}
		})
	}
}

// A gc trying for the sweep lock while a write holds its lease holds up
// no other write: another machine's write completes while gc is still
// trying (PostgreSQL would queue its lease behind a waiting exclusive
// request), and gc sweeps once the first write has committed.
func TestLeaseGCDoesNotHoldUpWriters(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	atRecord, proceed := make(chan struct{}), make(chan struct{})
	var once, closed sync.Once
	release := func() { closed.Do(func() { close(proceed) }) }
	t.Cleanup(release)
	a := mustOpenRemote(t, e, withFaults(func(point string) error {
		if point == "write:record" {
			once.Do(func() {
				close(atRecord)
				<-proceed
			})
		}
		return nil
	}))
	b := mustOpenRemote(t, e)
	later := &clock{time.Now().Add(2 * time.Hour)}
	g := mustOpenRemote(t, e, WithClock(later.now))
	// Garbage for gc to sweep: an object no row names.
	if _, err := b.eng.backend().Put(ctx, strings.NewReader("garbage"), ".txt"); err != nil {
		t.Fatal(err)
	}
	aDone := make(chan error, 1)
	go func() {
		_, err := a.Write(ctx, []hook.Item{item("a", 1, "a's part, parked before its commit")})
		aDone <- err
	}()
	<-atRecord
	type gcOut struct {
		res GCResult
		err error
	}
	gcDone := make(chan gcOut, 1)
	go func() {
		res, err := g.GC(ctx, GCOptions{Grace: time.Hour, LockTimeout: 10 * time.Minute})
		gcDone <- gcOut{res, err}
	}()
	waitForSweepTry(t, e.db)
	if _, err := b.Write(ctx, []hook.Item{item("b", 1, "an unrelated write")}); err != nil {
		t.Fatalf("a write while gc tried for the sweep lock: %v", err)
	}
	select {
	case out := <-gcDone:
		t.Fatalf("gc finished while a write held its lease: %+v, %v", out.res, out.err)
	default:
	}
	release()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if out := <-gcDone; out.err != nil || out.res.RemovedBlobs != 1 {
		t.Errorf("GC = %+v, %v; want the garbage removed", out.res, out.err)
	}
	if v, err := g.Verify(ctx, VerifyOptions{}); err != nil || !v.OK || v.Checked != 2 {
		t.Errorf("Verify = %+v, %v", v, err)
	}
}

// A write's lease ends (its session terminated) after its put found the
// object there and before its commit, and a gc then removes that object.
// The commit, checking the lease in its transaction, commits nothing; the
// write takes a new lease and uploads the blob again, and at no moment is
// its row committed without its object.
func TestLeaseLostBeforeCommit(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	later := &clock{time.Now().Add(2 * time.Hour)}
	g := mustOpenRemote(t, e, WithClock(later.now))
	const text = "content whose lease ends before its commit"
	put, err := g.eng.backend().Put(ctx, strings.NewReader(text), ".txt")
	if err != nil {
		t.Fatal(err)
	}
	var (
		once     sync.Once
		gcRes    GCResult
		gcErr    error
		records  int
		orphaned []string
		w        *Store
	)
	w = mustOpenRemote(t, e, withFaults(func(point string) error {
		switch point {
		case "write:record":
			records++
			once.Do(func() {
				terminateLockHolder(t, e.db, "ShareLock")
				gcRes, gcErr = g.GC(ctx, GCOptions{Grace: time.Hour})
			})
		case "write:committed":
			if _, err := w.eng.backend().Stat(ctx, put.Blob); err != nil {
				orphaned = append(orphaned, err.Error())
			}
		}
		return nil
	}))
	st, err := w.Write(ctx, []hook.Item{item("r", 1, text)})
	if err != nil {
		t.Fatal(err)
	}
	if gcErr != nil || gcRes.RemovedBlobs != 1 {
		t.Fatalf("GC while the write's lease was gone = %+v, %v; want the object removed", gcRes, gcErr)
	}
	if len(orphaned) > 0 {
		t.Fatalf("the write's row was committed while its object was gone: %v", orphaned)
	}
	if records != 2 || st[0].Dedup {
		t.Errorf("the write committed %d times, dedup %v; want a second put that uploaded the blob again", records, st[0].Dedup)
	}
	if v, err := g.Verify(ctx, VerifyOptions{}); err != nil || !v.OK || v.Checked != 1 {
		t.Errorf("Verify = %+v, %v", v, err)
	}
}
