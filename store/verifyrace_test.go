package store

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

var verifyFor = flag.Duration("verify.for", 0, "how long TestVerifyDuringPruneAndGC runs (default 6s, 3s with -short)")

// TestVerifyDuringPruneAndGC runs verify again and again while writer
// processes write, read back and prune their older runs and a gc process
// collects with no grace period. A blob gc removes legitimately is not
// damage: no verify run may report anything missing or corrupt.
func TestVerifyDuringPruneAndGC(t *testing.T) {
	ctx := context.Background()
	d := *verifyFor
	if d == 0 {
		d = 6 * time.Second
	}
	if testing.Short() && *verifyFor == 0 {
		d = 3 * time.Second
	}
	s := MustOpen(t)
	// The children race for twice d, so that verify, which goes on past d
	// until it has run five times (slower under -race on a busy machine),
	// always runs against them.
	ms := strconv.FormatInt((2 * d).Milliseconds(), 10)
	gc := startChild(t, "gc", s.Dir(), "lock", ms)
	var writers []*exec.Cmd
	for w := range 4 {
		writers = append(writers, startChild(t, "racer", s.Dir(), fmt.Sprint(w), ms, "lock"))
	}
	runs, bad := 0, 0
	start := time.Now()
	for ; time.Since(start) < 2*d && (time.Since(start) < d || runs < 5); runs++ {
		res, err := s.Verify(ctx, VerifyOptions{})
		if err != nil {
			t.Fatalf("verify run %d: %v", runs+1, err)
		}
		if !res.OK || len(res.Missing) > 0 || len(res.Corrupt) > 0 {
			bad++
			if bad <= 3 {
				t.Errorf("verify run %d during prune and gc: ok=%v, missing %v, corrupt %v", runs+1, res.OK, res.Missing, res.Corrupt)
			}
		}
	}
	for i, w := range append(writers, gc) {
		if err := waitExit(t, w, time.Minute); err != nil {
			t.Fatalf("child %d: %v: %s", i, err, w.Stdout)
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d verify runs called the store damaged", bad, runs)
	}
	if runs < 5 {
		t.Fatalf("only %d verify runs: the race did not happen", runs)
	}
	t.Logf("%d verify runs against 4 writers pruning and gc sweeping: none called the store damaged", runs)
}
