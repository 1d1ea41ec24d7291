package store

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var raceRuns = flag.Int("race.gcruns", 0, "how many gc runs each writer of TestWritersAgainstGC races (default 8, 2 with -short)")

// raceGCRuns is how many gc runs each writer of a race against gc goes on
// for.
func raceGCRuns() int {
	switch {
	case *raceRuns > 0:
		return *raceRuns
	case testing.Short():
		// Two: a whole gc run falls between a writer's first write and its
		// last.
		return 2
	}
	return 8
}

// raceDeadline only keeps the children of a race that hangs from running
// for ever: they stop on what the others did, not on the time. A writer
// waiting for gc runs fails when gc completed none for this long.
const raceDeadline = 5 * time.Minute

// raceGCDeadline keeps a gc child whose writers never tell it to stop
// (their test died) from running for ever. Its writers may go on for
// several raceDeadlines while gc keeps completing runs, slowly, on a busy
// machine; this outlasts any race the package's time limit lets finish.
const raceGCDeadline = 30 * time.Minute

// raceChildren names the files through which the processes of a race
// against gc say when to stop: gc counts its runs in runs, and stops once
// stop exists; each writer stops once gc has run runsPer times since its
// first write.
type raceChildren struct{ stop, runs string }

func newRaceChildren(t *testing.T) raceChildren {
	dir := t.TempDir()
	return raceChildren{stop: filepath.Join(dir, "stop"), runs: filepath.Join(dir, "gc-runs")}
}

// gcArgs are the gc child's arguments after the store and the lock.
func (r raceChildren) gcArgs() []string {
	return []string{fmt.Sprint(raceGCDeadline.Milliseconds()), r.stop, r.runs}
}

// writerArgs are a racer's arguments after the store and its seed.
func (r raceChildren) writerArgs(lock string, runsPer int) []string {
	return []string{fmt.Sprint(raceDeadline.Milliseconds()), lock, "", r.runs, fmt.Sprint(runsPer)}
}

// stopGC tells the gc child to stop.
func (r raceChildren) stopGC(t *testing.T) {
	if err := os.WriteFile(r.stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writersAgainstGC runs 8 writer processes storing overlapping content,
// each reading back at once what it wrote and pruning its older runs, while
// a gc process sweeps in a loop with no grace period: each writer goes on
// until gc has run runsPer times since its first write, and gc until the
// writers are done. It returns the parts written, the gc runs, and the
// first failure seen.
func writersAgainstGC(t *testing.T, runsPer int, nolock bool) (parts, gcRuns int, failure string) {
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
	r := newRaceChildren(t)
	gc := startChild(t, "gc", append([]string{dir, lock}, r.gcArgs()...)...)
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for w := range 8 {
		cmd := startChild(t, "racer", append([]string{dir, fmt.Sprint(w)}, r.writerArgs(lock, runsPer)...)...)
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
	r.stopGC(t)
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
// dedup hits race the sweep, against gc in a loop with no grace period,
// each writer writing until gc has run a number of times since its first
// write. No writer sees an error, and no committed row points at a missing
// blob.
func TestWritersAgainstGC(t *testing.T) {
	n := raceGCRuns()
	parts, gcRuns, failure := writersAgainstGC(t, n, false)
	if failure != "" {
		t.Fatal(failure)
	}
	if parts < 8 || gcRuns < n {
		t.Fatalf("%d parts written, %d gc runs; want each of 8 writers to write through %d gc runs", parts, gcRuns, n)
	}
	t.Logf("8 writers wrote and read back %d parts against %d gc runs", parts, gcRuns)
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
		parts, gcRuns, failure := writersAgainstGC(t, 20, true)
		if failure != "" {
			t.Logf("without the lock, attempt %d (%d parts, %d gc runs) failed as expected: %s", attempt, parts, gcRuns, failure)
			return
		}
	}
	t.Error("without the lock the race never showed in 5 attempts")
}

// TestLoopEndWaitsWhileTheRaceMoves: a writer waiting for gc runs goes on
// as long as gc keeps completing runs, however long the whole race takes,
// fails once gc completed none for the deadline's length, and stops
// without an error once it saw the runs it waits for.
func TestLoopEndWaitsWhileTheRaceMoves(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	now := time.Unix(1e9, 0)
	e := loopEndOf(fmt.Sprint(time.Minute.Milliseconds()), "", runs, "3")
	e.now = func() time.Time { return now }
	e.deadline = now.Add(e.window)
	gcRun := func() {
		f, err := os.OpenFile(runs, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte{1})
		f.Close()
	}
	if stop, err := e.done(1); stop || err != nil {
		t.Fatalf("first round: done = %v, %v", stop, err)
	}
	for round := 2; round <= 3; round++ {
		now = now.Add(50 * time.Second)
		gcRun()
		if stop, err := e.done(round); stop || err != nil {
			t.Fatalf("%v in, gc ran %d times: done = %v, %v; want to go on", now.Sub(time.Unix(1e9, 0)), round-1, stop, err)
		}
	}
	stalled := e
	now = now.Add(61 * time.Second)
	if stop, err := stalled.done(4); !stop || err == nil {
		t.Errorf("gc ran nothing for 61 s: done = %v, %v; want a failure", stop, err)
	}
	gcRun()
	if stop, err := e.done(4); !stop || err != nil {
		t.Errorf("gc ran 3 times: done = %v, %v; want to stop", stop, err)
	}
}
