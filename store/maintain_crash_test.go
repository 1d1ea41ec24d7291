package store

import (
	"bufio"
	"context"
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

	"github.com/toolcas/toolcas/hook"
)

func init() {
	// maintcrash DIR SEED LOG: until killed, write parts of old runs
	// (through a store whose clock is three hours behind) and of live runs
	// (logging each live write that returned), with automatic maintenance
	// on, and run maintenance now and then too, so that kills land in it.
	lockRoles["maintcrash"] = func(a []string) error {
		ctx := context.Background()
		seed, _ := strconv.ParseUint(a[1], 10, 64)
		old, err := Open(ctx, a[0], WithClock(func() time.Time { return time.Now().Add(-3 * time.Hour) }), WithoutAutoMaintenance())
		if err != nil {
			return err
		}
		defer old.Close()
		live, err := Open(ctx, a[0])
		if err != nil {
			return err
		}
		defer live.Close()
		log, err := os.OpenFile(a[2], os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		defer log.Close()
		for i := uint64(0); ; i++ {
			oldRun := fmt.Sprintf("old-%d-%d", seed, i%3)
			if _, err := old.Write(ctx, []hook.Item{item(oldRun, int(i), string(content(1<<40+seed<<20+i, 3000)))}); err != nil {
				return err
			}
			liveRun := fmt.Sprintf("live-%d", seed%4)
			st, err := live.Write(ctx, []hook.Item{item(liveRun, int(seed<<20+i), string(content(1<<41+seed<<20+i, 3000)))})
			if err != nil {
				return err
			}
			fmt.Fprintf(log, "%s %s\n", st[0].Key, st[0].Digest)
			if i%7 == 6 {
				if _, err := live.Maintain(ctx); err != nil && !errors.Is(err, ErrMaintenanceBusy) {
					return err
				}
			}
		}
	}
}

// TestCrashDuringMaintenance kills processes at random moments while they
// write and while their maintenance (automatic, or run by hand) applies a
// retention policy that removes old runs and a quota that packs their
// blobs first: kills land in a prune, a gc, a pack, or with the
// maintenance lease held. Afterwards every live write a process
// saw return reads back its bytes, verify finds nothing missing or
// corrupt, and a maintenance once the dead holders' lease has run out
// removes every old part and nothing the policy keeps.
func TestCrashDuringMaintenance(t *testing.T) {
	kills := 20
	if testing.Short() {
		kills = 8
	}
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, WithCreate(), WithoutAutoMaintenance())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetRetention(ctx, Retention{MaxAge: 2 * time.Hour, MaxBytes: 1 << 20, Active: time.Hour, KeepLooseFor: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	logPath := filepath.Join(t.TempDir(), "committed.log")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	var mu sync.Mutex
	var wg sync.WaitGroup
	signaled := 0
	for n := range kills {
		delay := time.Duration(50+rng.IntN(1500)) * time.Millisecond
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := startChild(t, "maintcrash", dir, fmt.Sprint(n), logPath)
			timer := time.AfterFunc(delay, func() { cmd.Process.Signal(syscall.SIGKILL) })
			err := cmd.Wait()
			timer.Stop()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			mu.Lock()
			defer mu.Unlock()
			if ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				signaled++
			} else {
				t.Errorf("child %d: %v\n%s", n, err, cmd.Stdout)
			}
		}()
		if n%2 == 1 {
			wg.Wait() // two at a time
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Two minutes on, past the lease of a holder that died.
	later := func() time.Time { return time.Now().Add(2 * time.Minute) }
	s, err = Open(ctx, dir, WithClock(later), WithoutAutoMaintenance())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var committed [][2]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if key, digest, ok := committedLine(sc.Text()); ok {
			committed = append(committed, [2]string{key, digest})
		}
	}
	checkLive := func(when string) {
		for _, c := range committed {
			got, err := s.Read(ctx, "", c[0])
			if err != nil {
				t.Errorf("%s: committed %s: %v", when, c[0], err)
				continue
			}
			if err := checkContent(got.Data); err != nil || got.Digest.String() != c[1] {
				t.Errorf("%s: committed %s: digest %s, want %s; %v", when, c[0], got.Digest, c[1], err)
			}
		}
	}
	checkLive("after the kills")
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Corrupt) > 0 || len(res.Missing) > 0 || len(res.IndexProblems) > 0 {
		t.Errorf("verify after the kills: corrupt %v, missing %v, index %v", res.Corrupt, res.Missing, res.IndexProblems)
	}
	if _, err := s.Maintain(ctx); err != nil {
		t.Fatalf("maintenance after the kills: %v", err)
	}
	checkLive("after a maintenance")
	runs, err := s.Runs(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if strings.HasPrefix(r, "old-") {
			if keys := runKeys(t, s, r); len(keys) > 0 {
				t.Errorf("old run %s keeps %d parts after maintenance", r, len(keys))
			}
		}
	}
	taken, _ := s.ix.LeaseTaken(ctx, MaintenanceLease)
	removals, _ := s.Removals(ctx, time.Time{}, 0)
	st, _ := s.Stats(ctx, "")
	t.Logf("%d processes killed; %d live writes checked; maintenance lease taken %d times; %d removals logged; %d packs left",
		signaled, len(committed), taken, len(removals), st.Packs)
}
