package store

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

var raceFor = flag.Duration("race.for", 0, "how long TestWritersAgainstGC runs (default 4s, 2s with -short)")

// writersAgainstGC runs 8 writer processes storing overlapping content,
// each reading back at once what it wrote and pruning its older runs, while
// a gc process sweeps in a loop with no grace period. It returns the parts
// written, the gc runs, and the first failure seen.
func writersAgainstGC(t *testing.T, d time.Duration, nolock bool) (parts, gcRuns int, failure string) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, backendOptions(t, WithCreate())...)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	lock := "lock"
	if nolock {
		lock = "nolock"
	}
	ms := strconv.FormatInt(d.Milliseconds(), 10)
	gc := startChild(t, "gc", dir, lock, ms)
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for w := range 8 {
		cmd := startChild(t, "racer", dir, fmt.Sprint(w), ms, lock)
		outs = append(outs, cmd.Stdout.(*bytes.Buffer))
		cmds = append(cmds, cmd)
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil && failure == "" {
			failure = fmt.Sprintf("writer %d: %v: %s", i, err, strings.TrimSpace(outs[i].String()))
		}
		for _, line := range strings.Split(outs[i].String(), "\n") {
			if v, ok := strings.CutPrefix(line, "PARTS "); ok {
				n, _ := strconv.Atoi(v)
				parts += n
			}
		}
	}
	if err := gc.Wait(); err != nil && failure == "" {
		failure = fmt.Sprintf("gc: %v: %s", err, gc.Stdout)
	}
	for _, line := range strings.Split(fmt.Sprint(gc.Stdout), "\n") {
		if v, ok := strings.CutPrefix(line, "GC_RUNS "); ok {
			gcRuns, _ = strconv.Atoi(v)
		}
	}
	// Whatever the processes saw, no committed row may point at a missing
	// blob.
	s, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if (len(res.Missing) > 0 || len(res.Corrupt) > 0) && failure == "" {
		failure = fmt.Sprintf("verify: %d rows' blobs missing, %d corrupt", len(res.Missing), len(res.Corrupt))
	}
	return parts, gcRuns, failure
}

// TestWritersAgainstGC: 8 writers storing overlapping content, so that
// dedup hits race the sweep, against gc in a loop with no grace period. No
// writer sees an error, and no committed row points at a missing blob.
func TestWritersAgainstGC(t *testing.T) {
	d := *raceFor
	if d == 0 {
		d = 4 * time.Second
		if testing.Short() {
			d = 2 * time.Second
		}
	}
	parts, gcRuns, failure := writersAgainstGC(t, d, false)
	if failure != "" {
		t.Fatal(failure)
	}
	if parts == 0 || gcRuns == 0 {
		t.Fatalf("%d parts written, %d gc runs: the race did not happen", parts, gcRuns)
	}
	t.Logf("8 writers wrote and read back %d parts against %d gc runs in %v", parts, gcRuns, d)
}

// TestWritersAgainstGCWithoutLock runs the same race with gc.lock turned
// off, and shows that the lock is what makes it safe: without it gc deletes
// blobs that writers are about to commit rows for. It is skipped unless
// TOOLCAS_SHOW_RACE=1, since it shows a failure on purpose.
func TestWritersAgainstGCWithoutLock(t *testing.T) {
	if os.Getenv("TOOLCAS_SHOW_RACE") == "" {
		t.Skip("set TOOLCAS_SHOW_RACE=1 to see the race gc.lock prevents")
	}
	for attempt := 1; attempt <= 5; attempt++ {
		parts, gcRuns, failure := writersAgainstGC(t, 3*time.Second, true)
		if failure != "" {
			t.Logf("without the lock, attempt %d (%d parts, %d gc runs) failed as expected: %s", attempt, parts, gcRuns, failure)
			return
		}
	}
	t.Error("without the lock the race never showed in 5 attempts")
}
