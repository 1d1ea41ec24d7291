package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/testclock"
	"github.com/toolcas/toolcas/policy"
)

// runKeys lists the keys of a run's parts, sorted.
func runKeys(t *testing.T, s *Store, run string) []string {
	t.Helper()
	parts, err := s.List(context.Background(), ListOptions{Run: run})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, p := range parts {
		keys = append(keys, p.Key)
	}
	slices.Sort(keys)
	return keys
}

func TestRetentionSetAndValidate(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t, WithoutAutoMaintenance())
	if r, err := s.Retention(ctx); err != nil || r != (Retention{}) {
		t.Fatalf("Retention of a new store = %+v, %v; want none", r, err)
	}
	want := Retention{MaxAge: 7 * 24 * time.Hour, KeepRuns: 5, MaxBytes: 1 << 30, Active: 2 * time.Hour, KeepLooseFor: 48 * time.Hour}
	if err := s.SetRetention(ctx, want); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Retention(ctx); err != nil || got != want {
		t.Errorf("Retention = %+v, %v; want %+v", got, err, want)
	}
	b, _ := json.Marshal(want)
	if got := string(b); got != `{"max_age":"168h0m0s","keep_runs":5,"max_bytes":1073741824,"active":"2h0m0s","keep_loose_for":"48h0m0s"}` {
		t.Errorf("JSON = %s", got)
	}
	for _, tc := range []struct {
		r    Retention
		want string
	}{
		{Retention{MaxAge: -time.Hour}, "max_age -1h0m0s is negative"},
		{Retention{KeepRuns: -1}, "keep_runs -1 is negative"},
		{Retention{MaxBytes: -5}, "max_bytes -5 is negative"},
		{Retention{Active: -time.Second}, "active -1s is negative"},
		{Retention{KeepLooseFor: -time.Second}, "keep_loose_for -1s is negative"},
		{Retention{MaxAge: 30 * time.Minute}, "max_age 30m0s is shorter than the active window 1h0m0s"},
	} {
		err := s.SetRetention(ctx, tc.r)
		if !errors.Is(err, ErrRetention) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetRetention(%+v) = %v, want an ErrRetention saying %q", tc.r, err, tc.want)
		}
	}
	if got, _ := s.Retention(ctx); got != want {
		t.Errorf("a refused policy changed the policy: %+v", got)
	}
	var r Retention
	if err := json.Unmarshal([]byte(`{"max_age":"7d"}`), &r); !errors.Is(err, ErrRetention) {
		t.Errorf("a bad duration = %v, want ErrRetention", err)
	}
	if err := json.Unmarshal([]byte(`{"max_ages":"7h"}`), &r); !errors.Is(err, ErrRetention) {
		t.Errorf("an unknown field = %v, want ErrRetention", err)
	}
	if err := s.SetRetention(ctx, Retention{}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Retention(ctx); err != nil || r != (Retention{}) {
		t.Errorf("Retention after clearing = %+v, %v", r, err)
	}
}

// TestRetentionRules applies each rule, and the rules together, to runs
// written at known times, and checks what stays, what the removal log
// says, and that a run written to within the active window keeps every
// part whatever the rules say.
func TestRetentionRules(t *testing.T) {
	ctx := context.Background()
	day := 24 * time.Hour
	for _, tc := range []struct {
		name   string
		policy Retention
		// gone lists the runs that lose every part, with the rule named in
		// the log; "active" and "young" always keep theirs.
		gone map[string]string
	}{
		{"max_age", Retention{MaxAge: 5 * day}, map[string]string{"r10": RuleMaxAge, "r8": RuleMaxAge}},
		{"keep_runs", Retention{KeepRuns: 3}, map[string]string{"r10": RuleKeepRuns, "r8": RuleKeepRuns}},
		// keep_runs counts the active runs among those kept.
		{"keep_runs_1", Retention{KeepRuns: 1}, map[string]string{"r10": RuleKeepRuns, "r8": RuleKeepRuns, "r4": RuleKeepRuns, "young": RuleKeepRuns}},
		{"both", Retention{MaxAge: 9 * day, KeepRuns: 3}, map[string]string{"r10": RuleMaxAge, "r8": RuleKeepRuns}},
		{"none", Retention{MaxAge: 30 * day, KeepRuns: 10}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testclock.New(time.Date(2026, 1, 20, 12, 0, 0, 0, time.UTC))
			s := MustOpen(t, WithClock(c.Now), WithoutAutoMaintenance())
			start := c.Now()
			// Runs last written 10, 8 and 4 days ago, one two hours ago
			// (past the window, young) and one that started 10 days ago and
			// is written to still (active).
			for _, r := range []struct {
				run string
				ago time.Duration
			}{{"r10", 10 * day}, {"active", 10 * day}, {"r8", 8 * day}, {"r4", 4 * day}, {"young", 2 * time.Hour}} {
				c.Set(start.Add(-r.ago))
				mustWrite(t, s, item(r.run, 1, r.run+" one"), item(r.run, 2, r.run+" two"))
			}
			c.Set(start.Add(-10 * time.Minute))
			mustWrite(t, s, item("active", 3, "active three"))
			c.Set(start)
			if err := s.SetRetention(ctx, tc.policy); err != nil {
				t.Fatal(err)
			}
			if ok, err := s.Due(ctx); err != nil || ok != (len(tc.gone) > 0) {
				t.Errorf("Due = %v, %v; want %v", ok, err, len(tc.gone) > 0)
			}
			dry, err := s.ApplyRetention(ctx, RetentionOptions{DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.ApplyRetention(ctx, RetentionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// A dry run counts each rule as if it ran alone.
			if len(tc.policy.Rules()) == 1 && dry.RemovedParts() != res.RemovedParts() {
				t.Errorf("dry run removed %d parts, the run %d", dry.RemovedParts(), res.RemovedParts())
			}
			if want := int64(2 * len(tc.gone)); res.RemovedParts() != want {
				t.Errorf("removed %d parts, want %d: %+v", res.RemovedParts(), want, res.Rules)
			}
			for _, run := range []string{"r10", "active", "r8", "r4", "young"} {
				keys := runKeys(t, s, run)
				_, gone := tc.gone[run]
				if gone != (len(keys) == 0) {
					t.Errorf("run %s keeps %v; want gone %v", run, keys, gone)
				}
			}
			if n := len(runKeys(t, s, "active")); n != 3 {
				t.Errorf("the active run keeps %d parts, want all 3", n)
			}
			log, err := s.Removals(ctx, time.Time{}, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, m := range log {
				got[m.Run] = m.Rule
				if m.Parts != 2 || !m.At.Equal(start) {
					t.Errorf("log entry %+v: want 2 parts at %v", m, start)
				}
			}
			if len(got) != len(tc.gone) || len(log) != len(tc.gone) {
				t.Errorf("removal log %+v, want one entry for each of %v", log, tc.gone)
			}
			for run, rule := range tc.gone {
				if got[run] != rule {
					t.Errorf("log says run %s went by %q, want %q", run, got[run], rule)
				}
			}
			if ok, err := s.Due(ctx); err != nil || ok {
				t.Errorf("Due after applying = %v, %v; want false", ok, err)
			}
			// Applied again, it removes nothing more.
			if res, err := s.ApplyRetention(ctx, RetentionOptions{}); err != nil || res.RemovedParts() != 0 {
				t.Errorf("applied again: %+v, %v", res, err)
			}
		})
	}
}

// TestRetentionMaxAgeCutsInactiveRuns: max_age removes a run's old parts
// and keeps its newer ones, and leaves an active run whole.
func TestRetentionMaxAgeCutsInactiveRuns(t *testing.T) {
	ctx := context.Background()
	c := testclock.New(time.Date(2026, 1, 20, 12, 0, 0, 0, time.UTC))
	s := MustOpen(t, WithClock(c.Now), WithoutAutoMaintenance())
	start := c.Now()
	c.Set(start.Add(-48 * time.Hour))
	mustWrite(t, s, item("long", 1, "old part"), item("busy", 1, "busy old part"))
	c.Set(start.Add(-3 * time.Hour))
	mustWrite(t, s, item("long", 2, "new part"))
	c.Set(start.Add(-time.Minute))
	mustWrite(t, s, item("busy", 2, "busy new part"))
	c.Set(start)
	if err := s.SetRetention(ctx, Retention{MaxAge: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyRetention(ctx, RetentionOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := runKeys(t, s, "long"); len(got) != 1 || !strings.HasPrefix(got[0], "long/2_") {
		t.Errorf("long keeps %v, want its step 2 only", got)
	}
	if got := runKeys(t, s, "busy"); len(got) != 2 {
		t.Errorf("the active run keeps %v, want both parts", got)
	}
	st, err := s.Stats(ctx, "")
	if err != nil || st.Parts != 3 {
		t.Errorf("stats: %d parts, %v; want 3", st.Parts, err)
	}
}

// TestRetentionQuota fills a store past its quota with runs of unique
// content: the oldest go until it fits, gc frees their blobs, and a quota
// that only active runs could meet is reported, not met by removing them.
func TestRetentionQuota(t *testing.T) {
	ctx := context.Background()
	// gc ages blobs by their files' times, which the clock does not set:
	// the clock starts at the real time, the runs are written "in the
	// past", and the clock then moves past the grace period.
	c := testclock.New(time.Now())
	s := MustOpen(t, WithClock(c.Now), WithoutAutoMaintenance())
	start := c.Now()
	const runs, size = 10, 64 << 10
	for i := range runs {
		c.Set(start.Add(time.Duration(i-runs) * 2 * time.Hour))
		text := strings.Repeat(fmt.Sprintf("run %d unique ", i), size/12)
		mustWrite(t, s, item(fmt.Sprintf("run%02d", i), 1, text))
	}
	c.Set(start.Add(2 * time.Hour))
	disk, err := s.DiskBytes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// (The policy's own row may take the index a page further.)
	if err := s.SetRetention(ctx, Retention{MaxBytes: (disk + 64<<10) * 10 / 9}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Due(ctx); ok {
		t.Fatal("due under 90 % of the quota")
	}
	// Past the high-water mark, under the quota itself: due, so that the
	// writes that go on while a maintenance runs stay under the quota.
	if err := s.SetRetention(ctx, Retention{MaxBytes: disk * 100 / 95}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Due(ctx); !ok {
		t.Fatal("not due at 95 % of the quota")
	}
	if res, err := s.ApplyRetention(ctx, RetentionOptions{DryRun: true}); err != nil || len(res.Rules) != 1 || res.Rules[0].Rule != RuleMaxBytes {
		t.Fatalf("at 95 %% of the quota, a dry run removes %+v (%v): want runs by max_bytes", res.Rules, err)
	}
	st, _ := s.Stats(ctx, "")
	quota := disk - st.StoredBytes/2
	if err := s.SetRetention(ctx, Retention{MaxBytes: quota}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Due(ctx); !ok {
		t.Fatal("not due past the quota")
	}
	res, err := s.ApplyRetention(ctx, RetentionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := s.DiskBytes(ctx)
	if after > quota || res.DiskBytes != after || res.OverQuota != 0 {
		t.Errorf("after: %d bytes on disk (result says %d, over by %d), quota %d", after, res.DiskBytes, res.OverQuota, quota)
	}
	if res.GC.RemovedBlobs == 0 {
		t.Errorf("gc removed no blob: %+v", res.GC)
	}
	// The oldest went, in order: every run left is newer than every run gone.
	var kept []int
	for i := range runs {
		if len(runKeys(t, s, fmt.Sprintf("run%02d", i))) > 0 {
			kept = append(kept, i)
		}
	}
	if len(kept) == 0 || len(kept) == runs || kept[0] != runs-len(kept) {
		t.Errorf("kept runs %v: want the newest few", kept)
	}
	log, _ := s.Removals(ctx, time.Time{}, 0)
	if len(log) != runs-len(kept) {
		t.Errorf("log has %d entries, want %d", len(log), runs-len(kept))
	}
	for _, m := range log {
		if m.Rule != RuleMaxBytes {
			t.Errorf("log entry %+v: want rule max_bytes", m)
		}
	}
	// A quota below what the active runs take: everything else goes, the
	// active run stays, and the result says how far over it still is.
	mustWrite(t, s, item("fresh", 1, strings.Repeat("fresh ", 1000)))
	c.Add(30 * time.Minute)
	if err := s.SetRetention(ctx, Retention{MaxBytes: 1}); err != nil {
		t.Fatal(err)
	}
	res, err = s.ApplyRetention(ctx, RetentionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.OverQuota <= 0 {
		t.Errorf("over quota by %d, want more than 0", res.OverQuota)
	}
	if got := runKeys(t, s, "fresh"); len(got) != 1 {
		t.Errorf("active run keeps %v", got)
	}
	if st, _ := s.Stats(ctx, ""); st.Runs != 1 {
		t.Errorf("%d runs left, want only the active one", st.Runs)
	}
}

// TestPackLeavesActiveRunsLoose: pack with an active window keeps every
// blob of a run written to within it loose, however old the blob, so
// that its pointers stay readable by file tools.
func TestPackLeavesActiveRunsLoose(t *testing.T) {
	ctx := context.Background()
	c := testclock.New(time.Date(2026, 1, 20, 12, 0, 0, 0, time.UTC))
	s := MustOpen(t, WithClock(c.Now), WithoutAutoMaintenance())
	start := c.Now()
	c.Set(start.Add(-48 * time.Hour))
	live := mustWrite(t, s, item("live", 1, strings.Repeat("live old ", 100)))[0]
	cold := mustWrite(t, s, item("cold", 1, strings.Repeat("cold old ", 100)))[0]
	c.Set(start.Add(-5 * time.Minute))
	mustWrite(t, s, item("live", 2, "live new"))
	c.Set(start)
	res, err := s.Pack(ctx, PackOptions{OlderThan: 24 * time.Hour, Active: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.Blobs != 1 {
		t.Errorf("packed %d blobs, want the cold run's only", res.Blobs)
	}
	if _, err := os.Stat(live.Path); err != nil {
		t.Errorf("the active run's old blob is not loose: %v", err)
	}
	if _, err := os.Stat(cold.Path); !os.IsNotExist(err) {
		t.Errorf("the cold blob is still loose: %v", err)
	}
	d, err := s.Show(ctx, cold.Key)
	if err != nil {
		t.Fatal(err)
	}
	if d.OnDisk.Pack == "" || d.OnDiskErr != nil {
		t.Errorf("show of a packed part: pack %q, err %v", d.OnDisk.Pack, d.OnDiskErr)
	}
	// Reads say which part is packed; the read tool tells the agent.
	for _, tc := range []struct {
		st     hook.Stored
		packed bool
	}{{live, false}, {cold, true}} {
		c, err := s.Read(ctx, "", tc.st.Key)
		if err != nil || (c.Packed != "") != tc.packed {
			t.Errorf("Read(%s).Packed = %q, %v; want packed %v", tc.st.Key, c.Packed, err, tc.packed)
		}
		_, rc, err := s.OpenRead(ctx, "", tc.st.Key)
		if err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	rt, err := hook.NewReadTool(s)
	if err != nil {
		t.Fatal(err)
	}
	got := rt.Call(ctx, "cold", "c", []byte(`{"ref": "`+cold.Key+`"}`))
	if got.Error || !strings.Contains(got.Parts[0].Text, "(packed in pack-") {
		t.Errorf("read tool on a packed part: %q", got.Parts[0].Text)
	}
	got = rt.Call(ctx, "live", "c", []byte(`{"ref": "`+live.Key+`"}`))
	if got.Error || strings.Contains(got.Parts[0].Text, "packed") {
		t.Errorf("read tool on a loose part: %q", got.Parts[0].Text)
	}
	if _, err := s.Pack(ctx, PackOptions{Active: -time.Second}); err == nil {
		t.Error("a negative window was taken")
	}
}

// TestAutoMaintenance: a write that finds the store past its policy starts
// one maintenance in the background, which applies it; the write does not
// wait for it, and Close stops it.
func TestAutoMaintenance(t *testing.T) {
	ctx := context.Background()
	c := testclock.New(time.Date(2026, 1, 20, 12, 0, 0, 0, time.UTC))
	s := MustOpen(t, WithClock(c.Now))
	done := make(chan error, 10)
	s.auto.done = func(_ MaintainResult, err error) { done <- err }
	for i := range 3 {
		mustWrite(t, s, item(fmt.Sprintf("old%d", i), 1, fmt.Sprintf("old run %d", i)))
		// Each write's look at the policy ends before the next step: one
		// that a loaded machine held back until the policy below is set
		// would apply it before the new run is written.
		s.auto.wg.Wait()
		c.Add(time.Hour)
	}
	if err := s.SetRetention(ctx, Retention{KeepRuns: 2, Active: time.Minute}); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Hour)
	mustWrite(t, s, item("new", 1, "new run"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no maintenance started")
	}
	for run, want := range map[string]int{"old0": 0, "old1": 0, "old2": 1, "new": 1} {
		if got := len(runKeys(t, s, run)); got != want {
			t.Errorf("run %s has %d parts, want %d", run, got, want)
		}
	}
	if n, err := s.ix.LeaseTaken(ctx, MaintenanceLease); err != nil || n != 1 {
		t.Errorf("maintenance lease taken %d times, %v; want 1", n, err)
	}
	// Under the policy, writes start nothing more.
	c.Add(2 * time.Second)
	mustWrite(t, s, item("new", 2, "new run again"))
	s.auto.wg.Wait()
	select {
	case err := <-done:
		t.Errorf("a maintenance ran under the policy: %v", err)
	default:
	}
}

// TestMaintenanceLease: one maintenance at a time, across stores opened
// on the same index; a holder that died frees it when its time passes.
func TestMaintenanceLease(t *testing.T) {
	ctx := context.Background()
	c := testclock.New(time.Date(2026, 1, 20, 12, 0, 0, 0, time.UTC))
	s := MustOpen(t, WithClock(c.Now), WithoutAutoMaintenance())
	other, err := Open(ctx, s.Location(), WithClock(c.Now), WithoutAutoMaintenance())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if ok, err := s.ix.TryLease(ctx, MaintenanceLease, "dead", maintenanceTTL); err != nil || !ok {
		t.Fatalf("TryLease = %v, %v", ok, err)
	}
	if _, err := other.Maintain(ctx); !errors.Is(err, ErrMaintenanceBusy) {
		t.Errorf("Maintain while another holds the lease = %v, want ErrMaintenanceBusy", err)
	}
	c.Add(maintenanceTTL + time.Second)
	if _, err := other.Maintain(ctx); err != nil {
		t.Errorf("Maintain once the dead holder's time passed = %v", err)
	}
	if _, err := s.Maintain(ctx); err != nil {
		t.Errorf("Maintain after another released the lease = %v", err)
	}
	if n, _ := s.ix.LeaseTaken(ctx, MaintenanceLease); n != 3 {
		t.Errorf("lease taken %d times, want 3", n)
	}
}

func init() {
	// maintainer DIR RUN N: write N parts of run RUN into DIR, each its
	// own step, letting writes start maintenance, with a clock an hour
	// ahead; then wait for the maintenance.
	lockRoles["maintainer"] = func(a []string) error {
		ctx := context.Background()
		s, err := Open(ctx, a[0], WithClock(func() time.Time { return time.Now().Add(time.Hour) }))
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(a[2])
		for i := range n {
			if _, err := s.Write(ctx, []hook.Item{item(a[1], i, fmt.Sprintf("%s part %d %s", a[1], i, strings.Repeat("x", 100)))}); err != nil {
				return err
			}
		}
		s.auto.wg.Wait()
		return s.Close()
	}
}

// TestTwoProcessesOneMaintenance: two processes whose writes both find the
// store past its policy run one maintenance between them.
func TestTwoProcessesOneMaintenance(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, WithCreate(), WithoutAutoMaintenance())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustWrite(t, s, item(fmt.Sprintf("old%02d", i), 1, fmt.Sprintf("old run %d", i)))
	}
	// The children's clocks are an hour ahead: to them, every old run is
	// past the window and past keep_runs, once either has written to the
	// run both write to.
	if err := s.SetRetention(ctx, Retention{KeepRuns: 1, Active: time.Minute}); err != nil {
		t.Fatal(err)
	}
	a := startChild(t, "maintainer", dir, "new", "3")
	b := startChild(t, "maintainer", dir, "new", "3")
	for _, cmd := range []*exec.Cmd{a, b} {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v: %s", err, cmd.Stdout)
		}
	}
	if n, err := s.ix.LeaseTaken(ctx, MaintenanceLease); err != nil || n != 1 {
		t.Errorf("maintenance ran %d times, %v; want once", n, err)
	}
	for i := range 20 {
		if got := runKeys(t, s, fmt.Sprintf("old%02d", i)); len(got) != 0 {
			t.Errorf("old run %d kept %v", i, got)
		}
	}
	s.Close()
}

// TestRetentionQuotaStopsWhenGCFreesNothing: when the blobs of the runs a
// quota removes are younger than gc's grace, gc frees nothing, and the
// quota stops there instead of removing every other run too; once they
// have aged, applying the policy again frees them.
func TestRetentionQuotaStopsWhenGCFreesNothing(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	// The runs are written "two hours ago" by the clock, which stamps the
	// rows, while their files are made now, which ages them for gc.
	c := testclock.New(now.Add(-2 * time.Hour))
	s := MustOpen(t, WithClock(c.Now), WithoutAutoMaintenance())
	const runs = 10
	for i := range runs {
		mustWrite(t, s, item(fmt.Sprintf("run%02d", i), 1, strings.Repeat(fmt.Sprintf("run %d ", i), 5000)))
		c.Add(time.Second)
	}
	c.Set(now)
	disk, _ := s.DiskBytes(ctx)
	st, _ := s.Stats(ctx, "")
	quota := disk - st.StoredBytes/2
	if err := s.SetRetention(ctx, Retention{MaxBytes: quota}); err != nil {
		t.Fatal(err)
	}
	res, err := s.ApplyRetention(ctx, RetentionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	left := 0
	for i := range runs {
		if len(runKeys(t, s, fmt.Sprintf("run%02d", i))) > 0 {
			left++
		}
	}
	if res.GC.RemovedBlobs != 0 || res.OverQuota <= 0 || left == 0 || left == runs {
		t.Fatalf("young blobs: gc removed %d, over quota by %d, %d of %d runs left; want nothing freed, the quota unmet, some runs kept",
			res.GC.RemovedBlobs, res.OverQuota, left, runs)
	}
	c.Add(2 * time.Hour)
	res, err = s.ApplyRetention(ctx, RetentionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.GC.RemovedBlobs == 0 || res.OverQuota != 0 || res.DiskBytes > quota {
		t.Errorf("aged: gc removed %d, over quota by %d, %d bytes for a quota of %d", res.GC.RemovedBlobs, res.OverQuota, res.DiskBytes, quota)
	}
}

// TestRemoteRetention: on a store shared through S3 and PostgreSQL, the
// policy one machine sets is the one another applies; the maintenance
// lease keeps them apart; the removed runs' objects go by the shared gc's
// leases.
func TestRemoteRetention(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	c := testclock.New(time.Now().Add(-3 * time.Hour))
	a := mustOpenRemote(t, e, WithClock(c.Now), WithoutAutoMaintenance())
	for i := range 4 {
		mustWrite(t, a, item(fmt.Sprintf("r%d", i), 1, fmt.Sprintf("remote run %d", i)))
		c.Add(time.Minute)
	}
	c.Set(time.Now().Add(2 * time.Hour)) // past every blob's grace, by rows and objects alike
	if err := a.SetRetention(ctx, Retention{KeepRuns: 1}); err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, e.url, e.options(t.TempDir(), WithClock(c.Now), WithoutAutoMaintenance())...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if r, err := b.Retention(ctx); err != nil || r.KeepRuns != 1 {
		t.Fatalf("the other machine's policy = %+v, %v", r, err)
	}
	if ok, err := a.ix.TryLease(ctx, MaintenanceLease, "machine-a", maintenanceTTL); err != nil || !ok {
		t.Fatalf("TryLease = %v, %v", ok, err)
	}
	if _, err := b.Maintain(ctx); !errors.Is(err, ErrMaintenanceBusy) {
		t.Errorf("Maintain while machine a holds the lease = %v, want ErrMaintenanceBusy", err)
	}
	if err := a.ix.ReleaseLease(ctx, MaintenanceLease, "machine-a", false); err != nil {
		t.Fatal(err)
	}
	res, err := b.Maintain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Retention.RemovedParts(); got != 3 {
		t.Errorf("removed %d parts, want the 3 older runs'", got)
	}
	if res.Retention.GC.RemovedBlobs != 3 {
		t.Errorf("gc removed %d objects, want 3: %+v", res.Retention.GC.RemovedBlobs, res.Retention.GC)
	}
	if got := runKeys(t, a, "r3"); len(got) != 1 {
		t.Errorf("the newest run keeps %v", got)
	}
	if log, err := a.Removals(ctx, time.Time{}, 0); err != nil || len(log) != 3 {
		t.Errorf("removal log seen from machine a: %d entries, %v; want 3", len(log), err)
	}
}

// TestAutoMaintenanceConfig: a hook's store configuration turns automatic
// maintenance off with "auto_maintenance": false, and saves it so.
func TestAutoMaintenanceConfig(t *testing.T) {
	for _, tc := range []struct {
		field string
		off   bool
	}{{``, false}, {`, "auto_maintenance": true`, false}, {`, "auto_maintenance": false`, true}} {
		dir := t.TempDir()
		st, err := loadStore([]byte(`{"dir": "` + dir + `"` + tc.field + `}`))
		if err != nil {
			t.Fatal(err)
		}
		s := st.(*Store)
		if s.auto.off != tc.off {
			t.Errorf("%s: automatic maintenance off = %v, want %v", tc.field, s.auto.off, tc.off)
		}
		_, p := s.StoreConfig()
		b, _ := json.Marshal(p)
		if got := strings.Contains(string(b), `"auto_maintenance":false`); got != tc.off {
			t.Errorf("%s: saved as %s", tc.field, b)
		}
		s.Close()
	}
	if _, err := loadStore([]byte(`{"dir": "` + t.TempDir() + `", "auto_maintenance": "no"}`)); err == nil {
		t.Error("a string for auto_maintenance was taken")
	}
}

// TestPruneChunks: a quota's prunes name at most pruneRunsAtOnce runs and
// prunePartsAtOnce parts, a run larger than that alone, in the order the
// runs were picked.
func TestPruneChunks(t *testing.T) {
	runs := func(parts ...int64) []GroupStats {
		out := make([]GroupStats, len(parts))
		for i, n := range parts {
			out[i] = GroupStats{Name: fmt.Sprintf("r%d", i), Parts: n}
		}
		return out
	}
	many := make([]int64, pruneRunsAtOnce+1)
	for i := range many {
		many[i] = 1
	}
	for _, tc := range []struct {
		name  string
		runs  []GroupStats
		sizes []int // runs in each prune
	}{
		{"none", nil, nil},
		{"one small", runs(3), []int{1}},
		{"parts fill a prune", runs(200, 300, 12, 1), []int{3, 1}},
		{"a large run alone", runs(10, prunePartsAtOnce+5, 10), []int{1, 1, 1}},
		{"runs bound a prune", runs(many...), []int{pruneRunsAtOnce, 1}},
	} {
		got := pruneChunks(tc.runs)
		var sizes []int
		var names []string
		for _, c := range got {
			sizes = append(sizes, len(c))
			names = append(names, c...)
		}
		if !slices.Equal(sizes, tc.sizes) {
			t.Errorf("%s: prunes of %v runs, want %v", tc.name, sizes, tc.sizes)
		}
		for i, g := range tc.runs {
			if i >= len(names) || names[i] != g.Name {
				t.Errorf("%s: runs out of order or lost: %v", tc.name, names)
				break
			}
		}
	}
}

// TestRunTTL: a run's own ttl, given by the hook's step, removes the run
// once it has not been written to for that long, on a store with no
// policy; not a run written to within the active window, whatever its
// ttl, nor a run without one. The removal log names the rule.
func TestRunTTL(t *testing.T) {
	ctx := context.Background()
	c := testclock.New(time.Date(2026, 1, 20, 12, 0, 0, 0, time.UTC))
	t0 := c.Now()
	s := MustOpen(t, WithClock(c.Now), WithoutAutoMaintenance())
	h, err := hook.New(s, policy.MustStrategies(policy.Default(policy.Always)))
	if err != nil {
		t.Fatal(err)
	}
	offload := func(step hook.Step, text string) {
		t.Helper()
		if _, err := h.Offload(ctx, step, []hook.Result{{Tool: "bash", CallID: "c1", Parts: []hook.Part{hook.Text(text)}}}); err != nil {
			t.Fatal(err)
		}
	}
	offload(hook.Step{Run: "brief", Number: 1, TTL: 2 * time.Hour}, "brief one")
	offload(hook.Step{Run: "kept", Number: 1}, "kept one")
	c.Set(t0.Add(150 * time.Minute))
	offload(hook.Step{Run: "live", Number: 1, TTL: 5 * time.Minute}, "live one")
	if _, err := h.Offload(ctx, hook.Step{Run: "bad", Number: 1, TTL: -time.Minute},
		[]hook.Result{{Tool: "bash", CallID: "c1", Parts: []hook.Part{hook.Text("bad")}}}); err == nil {
		t.Error("a step with a negative TTL was offloaded")
	}
	c.Set(t0.Add(time.Hour))
	if ok, err := s.Due(ctx); err != nil || ok {
		t.Errorf("Due within brief's ttl = %v, %v; want false", ok, err)
	}
	// At 3 h: brief's newest part is 3 h old, over its 2; live's is 30
	// min old, over its 5, but within the hour of the active window.
	c.Set(t0.Add(3 * time.Hour))
	if ok, err := s.Due(ctx); err != nil || !ok {
		t.Errorf("Due once brief's ttl ran out = %v, %v; want true", ok, err)
	}
	res, err := s.ApplyRetention(ctx, RetentionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rules) != 1 || res.Rules[0].Rule != RuleRunTTL || res.RemovedParts() != 1 {
		t.Errorf("ApplyRetention = %+v; want brief's part by %s", res, RuleRunTTL)
	}
	for run, want := range map[string]int{"brief": 0, "kept": 1, "live": 1} {
		if n := len(runKeys(t, s, run)); n != want {
			t.Errorf("run %s keeps %d parts, want %d", run, n, want)
		}
	}
	if log, err := s.Removals(ctx, time.Time{}, 0); err != nil || len(log) != 1 || log[0].Run != "brief" || log[0].Rule != RuleRunTTL {
		t.Errorf("removal log %+v, %v; want brief by %s", log, err, RuleRunTTL)
	}
	if ok, err := s.Due(ctx); err != nil || ok {
		t.Errorf("Due after applying = %v, %v; want false", ok, err)
	}
	// Once live leaves the window, its ttl removes it too.
	c.Set(t0.Add(150*time.Minute + time.Hour + time.Second))
	if res, err := s.ApplyRetention(ctx, RetentionOptions{}); err != nil || res.RemovedParts() != 1 || len(runKeys(t, s, "live")) != 0 {
		t.Errorf("ApplyRetention once live left the window = %+v, %v; want its part removed", res, err)
	}
}
