package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
)

// The retention section: the real trace replayed many times over, under
// new run names, into a store with no policy and into one whose quota is a
// tenth of what the first ends up holding, the two taking turns round by
// round. It samples each store's size every second, times every step that
// offloads, and checks the removal log against the writer's own log of
// when it last wrote to each run.

type retentionRun struct {
	trace     string
	threshold int
	copies    int
	rounds    int
	active    time.Duration
	dir, out  string
	command   string
}

// retentionPass is one replay into one store.
type retentionPass struct {
	Round int    `json:"round"`
	Store string `json:"store"`
	// Quota is the store's max_bytes, 0 without a policy.
	Quota   int64   `json:"quota_bytes"`
	Steps   int     `json:"timed_steps"`
	Parts   int     `json:"parts_written"`
	Seconds float64 `json:"seconds"`
	P50     float64 `json:"step_p50_ms"`
	P99     float64 `json:"step_p99_ms"`
	Max     float64 `json:"step_max_ms"`
	// Samples counts the once-a-second samples of the store's size (its
	// blobs, packs and index, as the quota counts them); MaxBytes is the
	// largest, MaxOver the largest share of the quota it came to.
	Samples  int   `json:"samples"`
	MaxBytes int64 `json:"max_sampled_bytes"`
	// MaxCounted is what the store's own counters (Store.DiskBytes, what
	// the quota is checked against) said at the largest sample.
	MaxCounted int64   `json:"counted_at_largest_sample"`
	MaxOver    float64 `json:"max_share_of_quota"`
	FinalSize  int64   `json:"final_bytes"`
	// Maintenances counts the maintenances writes started; Removals the
	// entries of the removal log and RemovedParts the parts they removed.
	Maintenances int64 `json:"maintenances"`
	Removals     int   `json:"removals"`
	RemovedParts int64 `json:"removed_parts"`
	// ActiveRemoved counts the removals of a run that the writer had
	// written to within the active window before the removal: each one
	// is a part of an active run removed.
	ActiveRemoved int `json:"active_runs_removed"`
}

type retentionReport struct {
	Command    string          `json:"command"`
	Date       time.Time       `json:"date"`
	Machine    machine         `json:"machine"`
	Trace      string          `json:"trace"`
	Copies     int             `json:"copies"`
	Threshold  int             `json:"threshold"`
	Active     string          `json:"active"`
	LoadBefore string          `json:"load_before"`
	LoadAfter  string          `json:"load_after"`
	Passes     []retentionPass `json:"passes"`
	Targets    []target        `json:"targets"`
}

func runRetention(ctx context.Context, rr retentionRun, stdout, stderr io.Writer) error {
	rt, err := loadRealTrace(rr.trace)
	if err != nil {
		return usageError{err}
	}
	rep := retentionReport{Command: rr.command, Date: time.Now().UTC().Truncate(time.Second), Machine: describeMachine(rr.dir),
		Trace: filepath.Base(rr.trace), Copies: rr.copies, Threshold: rr.threshold, Active: rr.active.String(), LoadBefore: loadAverage()}
	var quota int64
	for round := range rr.rounds {
		order := []bool{false, true}
		if round%2 == 1 {
			order = []bool{true, false}
		}
		if round == 0 {
			order = []bool{false, true} // the quota comes from the first store without one
		}
		for _, withQuota := range order {
			q := int64(0)
			name := "no policy"
			if withQuota {
				q, name = quota, "quota"
			}
			fmt.Fprintf(stderr, "retention: round %d, %s: replaying %d copies of the trace…\n", round+1, name, rr.copies)
			p, err := retentionReplay(ctx, rr, rt, filepath.Join(rr.dir, "retention"), q)
			if err != nil {
				return err
			}
			p.Round, p.Store = round+1, name
			rep.Passes = append(rep.Passes, p)
			fmt.Fprintf(stderr, "  %d steps in %.1f s: p50 %.2f ms, p99 %.2f ms; %s at the end, largest sample %s\n",
				p.Steps, p.Seconds, p.P50, p.P99, mib(p.FinalSize), mib(p.MaxBytes))
			if !withQuota && quota == 0 {
				quota = p.FinalSize / 10
			}
		}
	}
	rep.LoadAfter = loadAverage()
	rep.Targets = retentionTargets(rep)
	for _, t := range rep.Targets {
		fmt.Fprintf(stdout, "%-58s %-28s %s %s\n", t.What, t.Target, t.Measured, map[bool]string{true: "met", false: "NOT MET"}[t.Met])
	}
	if rr.out == "" {
		return nil
	}
	return writeSection(rr.out, "retention.json", rep, "RETENTION.md", retentionMarkdown(rep))
}

// retentionReplay replays copies of rt into a new store in dir, with a
// quota of quota bytes when it is not 0.
func retentionReplay(ctx context.Context, rr retentionRun, rt *realTrace, dir string, quota int64) (retentionPass, error) {
	var p retentionPass
	p.Quota = quota
	if err := os.RemoveAll(dir); err != nil {
		return p, err
	}
	s, err := store.Open(ctx, dir, store.WithCreate())
	if err != nil {
		return p, err
	}
	defer s.Close()
	if quota > 0 {
		err := s.SetRetention(ctx, store.Retention{MaxBytes: quota, Active: rr.active, KeepLooseFor: rr.active})
		if err != nil {
			return p, err
		}
	}
	h, err := hook.New(s, policy.MustStrategies(policy.Default(policy.OverChars(rr.threshold))))
	if err != nil {
		return p, err
	}
	// The sampler: the store's blobs, packs and index, once a second.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var samples, counted []int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				u := du(dir)
				n, _ := s.DiskBytes(ctx)
				samples = append(samples, u.data+u.index)
				counted = append(counted, n)
			}
		}
	}()
	lastWrite := map[string]time.Time{}
	var times []time.Duration
	start := time.Now()
	for c := range rr.copies {
		for _, st := range rt.steps {
			results, big := copyResults(st.Results, c, rr.threshold)
			run := st.Run
			if c > 0 {
				run = fmt.Sprintf("%s.copy%d", run, c)
			}
			t0 := time.Now()
			if _, err := h.Offload(ctx, hook.Step{Run: run, Number: st.Number}, results); err != nil {
				close(stop)
				wg.Wait()
				return p, fmt.Errorf("replay %s step %d: %w", run, st.Number, err)
			}
			if big > 0 {
				times = append(times, time.Since(t0))
				lastWrite[run] = time.Now()
				p.Parts += big
			}
		}
	}
	p.Seconds = time.Since(start).Seconds()
	close(stop)
	wg.Wait()
	if err := s.Close(); err != nil { // waits for a maintenance under way
		return p, err
	}
	u := du(dir)
	p.FinalSize = u.data + u.index
	p.Samples = len(samples)
	for i, n := range samples {
		if n > p.MaxBytes {
			p.MaxBytes, p.MaxCounted = n, counted[i]
		}
	}
	p.MaxBytes = max(p.MaxBytes, p.FinalSize)
	if quota > 0 {
		p.MaxOver = float64(p.MaxBytes) / float64(quota)
	}
	slices.Sort(times)
	p.Steps = len(times)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p.P50, p.P99, p.Max = ms(quantileSorted(times, 0.5)), ms(quantileSorted(times, 0.99)), ms(times[len(times)-1])
	s2, err := store.Open(ctx, dir, store.ReadOnly())
	if err != nil {
		return p, err
	}
	defer s2.Close()
	if p.Maintenances, err = s2.Maintenances(ctx); err != nil {
		return p, err
	}
	log, err := s2.Removals(ctx, time.Time{}, 0)
	if err != nil {
		return p, err
	}
	p.Removals = len(log)
	for _, m := range log {
		p.RemovedParts += m.Parts
		if last, ok := lastWrite[m.Run]; ok && last.After(m.At.Add(-rr.active)) {
			p.ActiveRemoved++
		}
	}
	return p, nil
}

// copyResults returns copy c of a step's results, and how many of their
// text parts are over threshold characters: copy 0 is the original; any
// other has "-copyC" after each call id and a last line "[copyC]" in each
// text part over the threshold, so that no copy dedups against another.
func copyResults(rs []hook.Result, c, threshold int) ([]hook.Result, int) {
	out := make([]hook.Result, len(rs))
	big := 0
	for i, r := range rs {
		r.Parts = slices.Clone(r.Parts)
		over := false
		for j, part := range r.Parts {
			if part.Kind != hook.KindText || utf8.RuneCountInString(part.Text) <= threshold {
				continue
			}
			over = true
			if c > 0 {
				text := part.Text
				if !strings.HasSuffix(text, "\n") {
					text += "\n"
				}
				r.Parts[j] = hook.Text(fmt.Sprintf("%s[copy%d]\n", text, c))
			}
		}
		if over {
			big++
		}
		if c > 0 && r.CallID != "" {
			r.CallID = fmt.Sprintf("%s-copy%d", r.CallID, c)
		}
		out[i] = r
	}
	return out, big
}

func quantileSorted(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(float64(len(ds))*q))]
}

// retentionTargets are the section's goals, as measured.
func retentionTargets(rep retentionReport) []target {
	var ts []target
	var worstOver float64
	var quotaP99, freeP99 []float64
	active := 0
	for _, p := range rep.Passes {
		if p.Quota > 0 {
			worstOver = max(worstOver, p.MaxOver)
			quotaP99 = append(quotaP99, p.P99)
		} else {
			freeP99 = append(freeP99, p.P99)
		}
		active += p.ActiveRemoved
	}
	ts = append(ts, target{"store size at every 1 s sample, vs its quota", "≤ 1.10 × the quota",
		fmt.Sprintf("at most %.2f × the quota", worstOver), worstOver, worstOver <= 1.10})
	slices.Sort(quotaP99)
	slices.Sort(freeP99)
	if len(quotaP99) > 0 && len(freeP99) > 0 {
		r := medianOf(quotaP99) / medianOf(freeP99)
		ts = append(ts, target{"writers' step p99 with the quota vs without", "≤ 1.2 ×",
			fmt.Sprintf("%.2f ms vs %.2f ms (medians of the rounds): %.2f ×", medianOf(quotaP99), medianOf(freeP99), r), r, r <= 1.2})
	}
	ts = append(ts, target{"parts of runs active within the window removed", "none",
		fmt.Sprintf("%d removals of an active run", active), float64(active), active == 0})
	return ts
}

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[len(xs)/2]
}

func retentionMarkdown(rep retentionReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Retention: a quota kept while agents write\n\n")
	fmt.Fprintf(&b, "`%s`, %s, on %s (%d cores, %s); load %s before, %s after.\n\n", rep.Command, rep.Date.Format("2006-01-02"),
		rep.Machine.CPU, rep.Machine.Cores, rep.Machine.FileSystem, rep.LoadBefore, rep.LoadAfter)
	fmt.Fprintf(&b, "The real trace (`%s`) replayed %d times under new run names, results over %d characters offloaded, "+
		"durably, into a store with no policy and into one whose `max_bytes` is a tenth of what the first held at the end "+
		"(`active` and `keep_loose_for` %s), the two taking turns. A sampler adds up the store's blobs, packs and index "+
		"every second; each step that offloads is timed; the removal log is checked against the writer's own record of "+
		"when it last wrote to each run.\n\n", rep.Trace, rep.Copies, rep.Threshold, rep.Active)
	fmt.Fprintln(&b, "| goal | target | measured | met |")
	fmt.Fprintln(&b, "| --- | --- | --- | --- |")
	for _, t := range rep.Targets {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.What, t.Target, t.Measured, map[bool]string{true: "yes", false: "**no**"}[t.Met])
	}
	fmt.Fprintln(&b, "\n| round | store | quota | steps | seconds | p50 ms | p99 ms | max ms | samples | largest sample (counted then) | × quota | at the end | maintenances | removals (parts) | active runs removed |")
	fmt.Fprintln(&b, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, p := range rep.Passes {
		q, over := "none", ""
		if p.Quota > 0 {
			q, over = mib(p.Quota), fmt.Sprintf("%.2f", p.MaxOver)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %.1f | %.2f | %.2f | %.1f | %d | %s (%s) | %s | %s | %d | %d (%d) | %d |\n",
			p.Round, p.Store, q, p.Steps, p.Seconds, p.P50, p.P99, p.Max, p.Samples, mib(p.MaxBytes), mib(p.MaxCounted), over, mib(p.FinalSize),
			p.Maintenances, p.Removals, p.RemovedParts, p.ActiveRemoved)
	}
	return b.String()
}
