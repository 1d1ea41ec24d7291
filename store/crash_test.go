package store

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/search"
)

var crashKills = flag.Int("crash.kills", 0, "processes TestCrashLoop kills (default 40, 16 with -short)")

// TestCrashLoop starts writer processes, and for the first two thirds of
// the loop, in one of its two lanes, a gc process and a packer in turn
// with a writer, and kills each with SIGKILL at a random moment: in a blob
// write, between blob and row, in a transaction, in a sweep, in a pack or
// a pack's rewrite (every other packer stopped, and killed, between its
// pack's file and rows, or between its rows and the removal of the loose
// files, which a random moment seldom hits). Afterwards every write a
// writer saw return is in the index and reads back its exact bytes, verify
// finds nothing corrupt or missing, and gc removes every temp file and
// orphan the crashes left. A writer's steps of one part (a quarter) take one
// barrier for blob and row: the markers the writers leave are recovered on open,
// and drop nothing.
func TestCrashLoop(t *testing.T) { crashLoop(t) }

// TestCrashLoopRecentKeysMayBeLost is the crash loop with the writers'
// index committing without a sync: a process killed at any point loses
// nothing in that mode either, only a power cut may.
func TestCrashLoopRecentKeysMayBeLost(t *testing.T) {
	t.Setenv(childDurabilityEnv, DurabilityRecentKeysMayBeLost)
	crashLoop(t)
}

// TestCrashLoopSyncNone is the crash loop with the writers writing without
// syncs: blobs in place, rows committed together a moment after their
// writes return (see writeDeferred). A kill loses at most the rows of the
// writes that returned just before it, never one committed; no row is
// left without its blob; a blob a kill cut short is used by no row, and
// gc removes it.
func TestCrashLoopSyncNone(t *testing.T) {
	t.Setenv(childDurabilityEnv, "none")
	crashLoop(t)
}

func crashLoop(t *testing.T) {
	kills := *crashKills
	if kills == 0 {
		kills = 40
		if testing.Short() {
			kills = 16
		}
	}
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, backendOptions(t, WithCreate())...)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Made here, not by the first writer: on a loaded machine every writer
	// may be killed before it opens the log, and an empty log is then
	// what the loop committed.
	logPath := filepath.Join(t.TempDir(), "committed.log")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	var (
		mu                      sync.Mutex
		killed, gcKilled, clean int
		packKilled              int
		packsDone               int // packs packers finished
		packers                 int
		aimedWrote              int                // packers aimed at a point of a pack that wrote one
		heldKilled              = map[string]int{} // packers killed at a point of a pack, by point
		rng                     = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
		// endedAt is when each writer (by its seed) was seen to end.
		endedAt = map[string]time.Time{}
	)
	// Without syncs, a write may return once its rows are queued, before
	// they commit: a kill may lose the rows of the writes whose commit it
	// came before, and only those. The writers log whose rows committed;
	// those must all be there. How many a kill may lose is bounded by the
	// queue: a writer waits while DeferredCommitRows parts are queued, and
	// the committer commits once its transaction holds as many.
	deferred := os.Getenv(childDurabilityEnv) == "none"
	const maxLost = 2*index.DeferredCommitRows + 8
	lostBy := map[string]int{}
	oldestLost := time.Duration(0)
	lane := func(lane int) {
		for own := 0; ; own++ {
			mu.Lock()
			if killed >= kills {
				mu.Unlock()
				return
			}
			n := killed
			killed++
			delay := time.Duration(5+rng.IntN(300)) * time.Millisecond
			// A pack reads every loose blob first: a packer lives longer,
			// so that kills land in its writing, recording and removing too.
			packerDelay := time.Duration(50+rng.IntN(2000)) * time.Millisecond
			mu.Unlock()
			if deferred {
				// Writers live past the bound, so that most of their writes
				// are old enough to be owed.
				delay += 500 * time.Millisecond
			}
			role, args := "writer", []string{dir, fmt.Sprint(n), logPath, "lock"}
			if lane == 1 && own%3 == 0 && n < kills*2/3 {
				role, args = "gc", []string{dir, "lock"}
			}
			var out interface {
				io.Writer
				fmt.Stringer
			} = &bytes.Buffer{}
			var aimed *lineWatcher // the output of a packer stopped at hold
			var hold string
			if lane == 1 && own%3 == 1 && n < kills*2/3 {
				role, args = "packer", []string{dir}
				delay = packerDelay
				mu.Lock()
				packers++
				if packers%2 == 1 {
					// Writing a pack takes most of a packer's life, and a
					// random moment seldom catches it between its pack's
					// file and rows, or its rows and the loose files'
					// removal: the first packer, and every other one
					// after, stops at one of those points in turn and is
					// killed there.
					hold = holdPoints[(packers/2)%len(holdPoints)]
					args = append(args, hold)
					aimed = newLineWatcher(packWritingLine, packHeldLine+" "+hold)
					out, delay = aimed, 10*time.Second
				}
				mu.Unlock()
			}
			cmd := startChildTo(t, out, role, args...)
			timer := time.AfterFunc(delay, func() { cmd.Process.Signal(syscall.SIGKILL) })
			var killedHeld atomic.Bool
			exited := make(chan struct{})
			if aimed != nil {
				go func() {
					// Killed after 10 s when it finds nothing to pack (the
					// writers, slowed down, wrote nothing yet), or a minute
					// once it writes a pack.
					select {
					case <-aimed.seen[packWritingLine]:
						timer.Reset(time.Minute)
					case <-exited:
						return
					}
					select {
					case <-aimed.seen[packHeldLine+" "+hold]:
						killedHeld.Store(true)
						cmd.Process.Signal(syscall.SIGKILL)
					case <-exited:
					}
				}()
			}
			err := cmd.Wait()
			close(exited)
			timer.Stop()
			ended := time.Now()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			mu.Lock()
			if role == "writer" {
				endedAt[fmt.Sprint(n)] = ended
			}
			switch {
			case ws.Signaled() && ws.Signal() == syscall.SIGKILL:
				if role == "gc" {
					gcKilled++
				}
				if role == "packer" {
					packKilled++
					packsDone += strings.Count(out.String(), packedLine)
				}
				if aimed != nil && closed(aimed.seen[packWritingLine]) {
					aimedWrote++
				}
				if killedHeld.Load() {
					heldKilled[hold]++
				}
			case err != nil:
				t.Errorf("%s child failed: %v\n%s", role, err, out)
			default:
				clean++
			}
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for l := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); lane(l) }()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	s, err = Open(ctx, dir)
	if err != nil {
		t.Fatalf("open after %d kills: %v", kills, err)
	}
	defer s.Close()
	// Each killed writer left its marker, and Open checked the blobs each
	// covers: a kill loses nothing a file holds, so no row goes.
	if rec := s.Recovered(); len(rec) > 0 {
		t.Errorf("open after the kills dropped %d rows: %v", len(rec), partKeys(rec))
	}
	if markers, _ := os.ReadDir(filepath.Join(dir, UnsyncedDir)); len(markers) > 0 {
		t.Errorf("markers left after open: %v", markers)
	}
	// Every write a writer saw return is there, with its bytes.
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type written struct{ key, digest string }
	var lines []string
	committed := map[written]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if key, digest, ok := committedRowLine(sc.Text()); ok {
			committed[written{key, digest}] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, line := range lines {
		key, digest, at, writer, ok := returnedLine(line)
		if !ok {
			continue // a line cut short by the kill, or a commit's
		}
		if strings.HasPrefix(key, "junk-") {
			continue // gc prunes these on purpose
		}
		if deferred && !committed[written{key, digest}] {
			if vs, err := s.ix.Versions(ctx, key); err == nil && !slices.ContainsFunc(vs, func(p index.Part) bool {
				return p.Blob.Digest.String() == digest
			}) {
				lostBy[writer]++
				oldestLost = max(oldestLost, endedAt[writer].Sub(at))
				continue
			}
		}
		c, err := s.Read(ctx, "", digest)
		if err != nil {
			t.Errorf("committed %s (%s): %v", key, digest, err)
			continue
		}
		if err := checkContent(c.Data); err != nil {
			t.Errorf("committed %s: %v", key, err)
		}
		vs, err := s.ix.Versions(ctx, key)
		found := false
		for _, v := range vs {
			found = found || v.Blob.Digest.String() == digest
		}
		if err != nil || !found {
			t.Errorf("committed %s with %s: no such version in the index (%v)", key, digest, err)
		}
		checked++
	}
	// Every row reads back bytes that check.
	all, err := s.List(ctx, ListOptions{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		c, err := s.Read(ctx, "", p.Blob.RelPath())
		if err != nil {
			t.Errorf("row %s@%d: %v", p.Key, p.Version, err)
			continue
		}
		if err := checkContent(c.Data); err != nil {
			t.Errorf("row %s@%d: %v", p.Key, p.Version, err)
		}
	}
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	corrupt := res.Corrupt
	if deferred {
		// A blob written in place that a kill cut short is torn, and no
		// row uses it: gc's, below.
		corrupt = slices.DeleteFunc(slices.Clone(corrupt), func(p Problem) bool { return len(p.Keys) == 0 })
	}
	if len(corrupt) > 0 || len(res.Missing) > 0 || len(res.IndexProblems) > 0 {
		t.Errorf("verify after the crashes: corrupt %v, missing %v, index %v", corrupt, res.Missing, res.IndexProblems)
	}
	torn := len(res.Corrupt) - len(corrupt)
	leftovers := len(res.Temp) + len(res.Orphans)
	packs, _, _, err := localOf(s).blobs.Packs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	packed := 0
	for _, p := range packs {
		packed += len(p.Entries)
	}
	// Forced: on a busy machine most kills may land between a write's
	// blobs and its rows, and the orphans they leave be most of the store,
	// which gc otherwise refuses to remove at once.
	gc, err := s.GC(ctx, GCOptions{Grace: 0, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err = s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || len(res.Temp) > 0 || len(res.Orphans) > 0 || len(res.Corrupt) > 0 {
		t.Errorf("after gc: ok %v, temp %v, orphans %v, corrupt %v", res.OK, res.Temp, res.Orphans, res.Corrupt)
	}
	if deferred {
		lost, most := 0, 0
		for w, n := range lostBy {
			lost, most = lost+n, max(most, n)
			if n > maxLost {
				t.Errorf("writer %s lost %d writes whose rows had not committed, over the %d its queue holds", w, n, maxLost)
			}
		}
		t.Logf("without syncs: %d writes were lost before their rows committed (%d parts logged committed), at most %d of one writer; the oldest returned %v before its writer's end; %d torn blobs, no row using any",
			lost, len(committed), most, oldestLost, torn)
	}
	checkSearchAfterCrashes(t, s, all)
	// Kills land in recording packs and removing loose files, not only in
	// the reads before: by the kills aimed there, and by packers making
	// many small packs.
	if aimedWrote > 0 && len(heldKilled) == 0 {
		t.Errorf("%d packers wrote a pack to be killed at a point of it, none was", aimedWrote)
	}
	t.Logf("%d processes killed (%d gc, %d packers, which finished %d packs; killed at a point of a pack: %v), %d exited; %d committed writes checked, %d rows read back; %d blobs in %d packs; %d temp files and orphans left by the crashes, gc removed %d blobs and %d temp files",
		killed, gcKilled, packKilled, packsDone, heldKilled, clean, checked, len(all), packed, len(packs), leftovers, gc.RemovedBlobs, gc.RemovedTemp)
}

// committedLine splits a line of a crash writer's log, "KEY DIGEST". A
// writer killed in the middle of writing one (a write that crosses a page
// boundary can be cut by SIGKILL) leaves it cut short, and the next
// writer's line then follows it on the same line: such a line is not
// whole, and ok is false.
func committedLine(line string) (key, digest string, ok bool) {
	key, digest, _, _, ok = returnedLine(line)
	return key, digest, ok
}

// committedRowLine splits a line a writer without syncs logs once a
// part's row committed, "committed KEY DIGEST".
func committedRowLine(line string) (key, digest string, ok bool) {
	f := strings.Split(line, " ")
	if len(f) != 3 || f[0] != "committed" {
		return "", "", false
	}
	if _, err := cas.ParseDigest(f[2]); err != nil {
		return "", "", false
	}
	return f[1], f[2], true
}

// returnedLine is committedLine for a line that may also say when the
// write returned and which writer made it, "KEY DIGEST UNIXNANO WRITER"
// (at is zero without them).
func returnedLine(line string) (key, digest string, at time.Time, writer string, ok bool) {
	f := strings.Split(line, " ")
	if len(f) != 2 && len(f) != 4 {
		return "", "", time.Time{}, "", false
	}
	if _, err := cas.ParseDigest(f[1]); err != nil {
		return "", "", time.Time{}, "", false
	}
	if len(f) == 4 {
		ns, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return "", "", time.Time{}, "", false
		}
		at, writer = time.Unix(0, ns), f[3]
	}
	return f[0], f[1], at, writer, true
}

func TestCommittedLine(t *testing.T) {
	whole := "w5/0_t_26-1_0.txt blake3:65fff257c421093b52da993b15bf75db8e04bb7e7fee30a2b6b4d825c15de2ae"
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{whole, true},
		{"w3/1_t_24-1_1.txt", false},
		{"w3/1_t_24-1_1.txt blake3:b9a62c94453f9ddfebeb", false},
		{"w3/1_t_24-1_1.txt blake3:b9a62c94453f9ddfebeba" + whole, false},
		{whole + " 1764800000000000000 7", true},
		{whole + " 17648000000", false},
		{whole + " 1764800000000000000 7 " + whole, false},
	} {
		if _, _, ok := committedLine(tc.line); ok != tc.ok {
			t.Errorf("committedLine(%q) ok = %v, want %v", tc.line, ok, tc.ok)
		}
	}
	digest := "blake3:65fff257c421093b52da993b15bf75db8e04bb7e7fee30a2b6b4d825c15de2ae"
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"committed w5/0_t_26-1_0.txt " + digest, true},
		{"committed w5/0_t_26-1_0.txt " + digest[:30], false},
		{"committed w5/0_t_26-1_0.txt " + digest + "w3/1_t_24-1_1.txt", false},
		{"committed w5/0_t_26-1_0.txt " + digest + " 1764800000000000000 7", false},
		{whole, false},
	} {
		if _, _, ok := committedRowLine(tc.line); ok != tc.ok {
			t.Errorf("committedRowLine(%q) ok = %v, want %v", tc.line, ok, tc.ok)
		}
	}
}

// checkSearchAfterCrashes: kills landed in packers' and gcs' index
// catch-ups too. Once caught up, a search finds every row's content: a
// search of every header line finds each row once, and a search of one
// row's header, which the postings narrow, finds that row.
func checkSearchAfterCrashes(t *testing.T, s *Store, all []Part) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.IndexSearch(ctx); err != nil {
		t.Fatal(err)
	}
	if _, lag, err := s.SearchLag(ctx); err != nil || lag != 0 {
		t.Fatalf("search lag after a catch-up: %d bytes, %v", lag, err)
	}
	grep := func(p search.Pattern) map[string]bool {
		found := map[string]bool{}
		res, err := s.Grep(ctx, GrepOptions{Pattern: p, AllVersions: true, Width: 200}, func(h GrepHit) error {
			found[fmt.Sprintf("%s@%d", h.Part.Key, h.Part.Version)] = true
			return nil
		})
		if err != nil || len(res.Failed) > 0 {
			t.Fatalf("grep %q after the crashes: %v, failed %v", p.Expr, err, res.Failed)
		}
		return found
	}
	every := grep(search.Pattern{Expr: `^toolcas-test seed=[0-9]+ size=`})
	if len(every) != len(all) {
		t.Errorf("a search of every header found %d rows, the index holds %d", len(every), len(all))
	}
	for i, p := range all {
		if i%max(1, len(all)/20) != 0 {
			continue
		}
		c, err := s.Read(ctx, "", p.Blob.RelPath())
		if err != nil {
			t.Fatal(err)
		}
		head, _, _ := strings.Cut(string(c.Data), "\n")
		if k := fmt.Sprintf("%s@%d", p.Key, p.Version); !grep(search.Pattern{Expr: head, Fixed: true})[k] {
			t.Errorf("a search of %q did not find %s", head, k)
		}
	}
}
