package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolcas/toolcas/catalog"
	"github.com/toolcas/toolcas/index"
)

// DefaultActive is how recently a run must have been written to for
// retention and pack to leave it alone, unless the policy says otherwise.
const DefaultActive = time.Hour

// DefaultKeepLooseFor is how long a blob stays a file of its own, which
// file tools can read by the path its pointers name, before maintenance
// packs it, unless the policy says otherwise.
const DefaultKeepLooseFor = DefaultPackAge

// The rules of a retention policy, as the removal log names them.
const (
	RuleMaxAge   = "max_age"
	RuleKeepRuns = "keep_runs"
	RuleMaxBytes = "max_bytes"
	// RuleRunTTL removes a run whose own ttl, given by its writer
	// (hook.Step.TTL), has run out since its last write. It applies
	// whatever the store's policy, within the policy's active window as
	// the other rules do.
	RuleRunTTL = "ttl"
	// RuleByName is a prune asked for by name (casctl prune).
	RuleByName = index.RuleByName
)

// retentionSetting is the index setting that holds the policy.
const retentionSetting = "retention"

// Retention is a store's policy of what it keeps, kept in its index so
// that every process and machine using the store applies the same one.
// The zero value keeps everything.
type Retention struct {
	// MaxAge removes parts created longer ago than this.
	MaxAge time.Duration
	// KeepRuns removes every part of all but the KeepRuns runs written to
	// most recently.
	KeepRuns int
	// MaxBytes is a quota on what the store takes on disk (loose blobs,
	// packs and index): past quotaHighWater of it, the runs written to
	// least recently go first, until the store is under quotaHeadroom of
	// it.
	MaxBytes int64
	// Active protects the runs written to within it (DefaultActive when
	// zero): no rule removes any of their parts, and pack leaves their
	// blobs loose. A quota that only their removal could meet is reported
	// as not met instead.
	Active time.Duration
	// KeepLooseFor is how long after its last use a blob stays loose
	// before maintenance packs it (DefaultKeepLooseFor when zero), so
	// that file tools can read it by the path its pointers name.
	KeepLooseFor time.Duration
}

// IsZero reports whether the policy has no rule: it removes nothing.
func (r Retention) IsZero() bool { return r.MaxAge == 0 && r.KeepRuns == 0 && r.MaxBytes == 0 }

// Rules lists the rules the policy sets, by name.
func (r Retention) Rules() []string {
	var out []string
	if r.MaxAge > 0 {
		out = append(out, RuleMaxAge)
	}
	if r.KeepRuns > 0 {
		out = append(out, RuleKeepRuns)
	}
	if r.MaxBytes > 0 {
		out = append(out, RuleMaxBytes)
	}
	return out
}

// ActiveWindow is Active, or DefaultActive when it is not set.
func (r Retention) ActiveWindow() time.Duration {
	if r.Active == 0 {
		return DefaultActive
	}
	return r.Active
}

// LooseWindow is KeepLooseFor, or DefaultKeepLooseFor when it is not set.
func (r Retention) LooseWindow() time.Duration {
	if r.KeepLooseFor == 0 {
		return DefaultKeepLooseFor
	}
	return r.KeepLooseFor
}

// ErrRetention is returned by SetRetention for a policy that makes no
// sense.
var ErrRetention = errors.New("invalid retention policy")

// Validate returns an error wrapping ErrRetention that names the first
// setting out of range.
func (r Retention) Validate() error {
	switch {
	case r.MaxAge < 0:
		return fmt.Errorf("%w: max_age %v is negative", ErrRetention, r.MaxAge)
	case r.KeepRuns < 0:
		return fmt.Errorf("%w: keep_runs %d is negative", ErrRetention, r.KeepRuns)
	case r.MaxBytes < 0:
		return fmt.Errorf("%w: max_bytes %d is negative", ErrRetention, r.MaxBytes)
	case r.Active < 0:
		return fmt.Errorf("%w: active %v is negative", ErrRetention, r.Active)
	case r.KeepLooseFor < 0:
		return fmt.Errorf("%w: keep_loose_for %v is negative", ErrRetention, r.KeepLooseFor)
	case r.MaxAge > 0 && r.MaxAge < r.ActiveWindow():
		// A part older than max_age in a run written to since would stay
		// anyway; a max_age under the window says something it cannot do.
		return fmt.Errorf("%w: max_age %v is shorter than the active window %v", ErrRetention, r.MaxAge, r.ActiveWindow())
	}
	return nil
}

// retentionJSON is Retention as the index keeps it and casctl retention
// --json prints it: durations as Go writes them ("168h0m0s"), unset
// values left out.
type retentionJSON struct {
	MaxAge       string `json:"max_age,omitempty"`
	KeepRuns     int    `json:"keep_runs,omitempty"`
	MaxBytes     int64  `json:"max_bytes,omitempty"`
	Active       string `json:"active,omitempty"`
	KeepLooseFor string `json:"keep_loose_for,omitempty"`
}

// MarshalJSON writes the policy with durations as strings.
func (r Retention) MarshalJSON() ([]byte, error) {
	d := func(v time.Duration) string {
		if v == 0 {
			return ""
		}
		return v.String()
	}
	return json.Marshal(retentionJSON{d(r.MaxAge), r.KeepRuns, r.MaxBytes, d(r.Active), d(r.KeepLooseFor)})
}

// UnmarshalJSON reads what MarshalJSON writes, refusing unknown fields.
func (r *Retention) UnmarshalJSON(b []byte) error {
	var j retentionJSON
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&j); err != nil {
		return fmt.Errorf("%w: %w", ErrRetention, err)
	}
	var out Retention
	for _, f := range []struct {
		name string
		s    string
		to   *time.Duration
	}{{"max_age", j.MaxAge, &out.MaxAge}, {"active", j.Active, &out.Active}, {"keep_loose_for", j.KeepLooseFor, &out.KeepLooseFor}} {
		if f.s == "" {
			continue
		}
		v, err := time.ParseDuration(f.s)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrRetention, f.name, err)
		}
		*f.to = v
	}
	out.KeepRuns, out.MaxBytes = j.KeepRuns, j.MaxBytes
	*r = out
	return nil
}

// Retention returns the store's retention policy; the zero value when none
// is set.
func (s *Store) Retention(ctx context.Context) (Retention, error) {
	v, ok, err := s.ix.Setting(ctx, retentionSetting)
	if err != nil || !ok {
		return Retention{}, err
	}
	var r Retention
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return Retention{}, fmt.Errorf("retention policy in %s: %w", s.ix.Path(), err)
	}
	return r, nil
}

// SetRetention sets the store's retention policy, for every process that
// uses the store; the zero Retention clears it. Nothing is removed until
// the policy is applied (ApplyRetention, gc, or a write's maintenance).
func (s *Store) SetRetention(ctx context.Context, r Retention) error {
	if s.readOnly {
		return fmt.Errorf("set retention: %w", ErrReadOnly)
	}
	if err := r.Validate(); err != nil {
		return err
	}
	v := ""
	if r != (Retention{}) {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		v = string(b)
	}
	return s.ix.SetSetting(ctx, retentionSetting, v)
}

// RetentionOptions configure ApplyRetention.
type RetentionOptions struct {
	// DryRun reports what the policy would remove and removes nothing.
	// Each rule is counted as if it ran alone: a part that two rules
	// pick is counted under both, and a quota counts the runs its first
	// estimate picks, before any gc measures again.
	DryRun bool
	// LockTimeout is GCOptions.LockTimeout for the gc that frees what the
	// policy removed.
	LockTimeout time.Duration
}

// RuleResult is what one rule of the policy removed.
type RuleResult struct {
	Rule  string
	Parts int64
	Runs  []string
}

// RetentionResult says what ApplyRetention removed, or would remove.
type RetentionResult struct {
	DryRun bool
	Policy Retention
	// Rules lists, for each rule that removed parts, what it removed.
	Rules []RuleResult
	// GC sums what the gcs that freed the removed parts' blobs did.
	GC GCResult
	// DiskBytes is what the store takes on disk afterwards, as the quota
	// counts it; OverQuota how far it is still over MaxBytes (0 when
	// under, or with no quota): only active runs were left to remove.
	DiskBytes int64
	OverQuota int64
}

// RemovedParts counts the parts the policy removed.
func (r RetentionResult) RemovedParts() int64 {
	var n int64
	for _, x := range r.Rules {
		n += x.Parts
	}
	return n
}

// DiskBytes is what the store takes on disk, as a quota counts it: its
// loose blobs, its pack files and its index, from the kept counters.
func (s *Store) DiskBytes(ctx context.Context) (int64, error) {
	st, err := s.ix.Totals(ctx)
	if err != nil {
		return 0, err
	}
	return diskBytes(st), nil
}

func diskBytes(st Stats) int64 {
	return st.StoredBytes - st.PackedBytes + st.UnreferencedBytes + st.PackFileBytes + st.IndexBytes
}

// quotaRounds bounds how many times ApplyRetention removes runs and
// measures again to meet a quota: each round removes at least one run.
const quotaRounds = 32

// ApplyRetention applies the store's retention policy: it removes the
// parts the policy's rules pick (never of a run written to within the
// active window), logging each removal with its rule, then frees their
// blobs as gc does. A quota is met by removing whole runs, the least
// recently written first, measuring again after each gc.
func (s *Store) ApplyRetention(ctx context.Context, o RetentionOptions) (RetentionResult, error) {
	res := RetentionResult{DryRun: o.DryRun}
	if !o.DryRun && s.readOnly {
		return res, fmt.Errorf("retention: %w", ErrReadOnly)
	}
	r, err := s.Retention(ctx)
	if err != nil {
		return res, err
	}
	res.Policy = r
	a := &retentionPass{s: s, o: o, r: r, now: s.now(), res: &res}
	a.activeSince = a.now.Add(-r.ActiveWindow())
	// The runs' own ttls first: they hold with no policy as well.
	if err := a.prune(ctx, index.PruneOptions{Expired: a.now, Rule: RuleRunTTL}); err != nil {
		return res, err
	}
	if r.IsZero() && len(res.Rules) == 0 {
		return res, nil
	}
	if r.MaxAge > 0 {
		if err := a.prune(ctx, index.PruneOptions{Before: a.now.Add(-r.MaxAge), Rule: RuleMaxAge}); err != nil {
			return res, err
		}
	}
	if r.KeepRuns > 0 {
		if err := a.prune(ctx, index.PruneOptions{KeepRuns: r.KeepRuns, Rule: RuleKeepRuns}); err != nil {
			return res, err
		}
	}
	if err := a.measure(ctx); err != nil {
		return res, err
	}
	quota, err := a.meetQuota(ctx)
	if err != nil {
		return res, err
	}
	if res.RemovedParts()+quota.Parts > 0 && !a.collected {
		if _, err := a.gc(ctx); err != nil {
			return res, fmt.Errorf("retention: %w", err)
		}
		if err := a.measure(ctx); err != nil {
			return res, err
		}
	}
	if quota.Parts > 0 {
		res.Rules = append(res.Rules, quota)
	}
	if !o.DryRun && r.MaxBytes > 0 && res.DiskBytes > r.MaxBytes {
		res.OverQuota = res.DiskBytes - r.MaxBytes
	}
	return res, nil
}

// retentionPass is one ApplyRetention: its policy, its clock reading, and
// what it has done so far.
type retentionPass struct {
	s           *Store
	o           RetentionOptions
	r           Retention
	now         time.Time
	activeSince time.Time
	res         *RetentionResult
	// st is the store's stats as last measured.
	st Stats
	// collected says a gc ran.
	collected bool
}

// prune removes what a rule picks, never of an active run, and records it
// under the rule.
func (a *retentionPass) prune(ctx context.Context, po index.PruneOptions) error {
	pr, err := a.pruneRaw(ctx, po)
	if err != nil {
		return err
	}
	if pr.RemovedParts > 0 {
		a.res.Rules = append(a.res.Rules, RuleResult{Rule: po.Rule, Parts: pr.RemovedParts, Runs: pr.Runs})
	}
	return nil
}

func (a *retentionPass) pruneRaw(ctx context.Context, po index.PruneOptions) (index.PruneResult, error) {
	if po.Rule == "" {
		panic("store: prune without a rule")
	}
	po.ActiveSince, po.DryRun = a.activeSince, a.o.DryRun
	pr, err := a.s.ix.Prune(ctx, po)
	if err != nil {
		return pr, fmt.Errorf("retention: %w", err)
	}
	return pr, nil
}

// measure reads the store's stats and its size on disk.
func (a *retentionPass) measure(ctx context.Context) error {
	st, err := a.s.Stats(ctx, "")
	if err != nil {
		return err
	}
	a.st, a.res.DiskBytes = st, diskBytes(st)
	return nil
}

// gc frees what the rules and the quota removed, and adds what it freed
// (blobs, and dead packs dropped or rewritten) to the result; a dry run
// collects nothing.
func (a *retentionPass) gc(ctx context.Context) (freed int64, err error) {
	if a.o.DryRun {
		return 0, nil
	}
	a.collected = true
	g, err := a.s.GC(ctx, GCOptions{Grace: a.r.ActiveWindow(), LockTimeout: a.o.LockTimeout})
	t := &a.res.GC
	t.RemovedBlobs += g.RemovedBlobs
	t.FreedBytes += g.FreedBytes
	t.RemovedTemp += g.RemovedTemp
	t.Packs.Rewritten += g.Packs.Rewritten
	t.Packs.Dropped += g.Packs.Dropped
	t.Packs.FreedBytes += g.Packs.FreedBytes
	t.IndexFreed += g.IndexFreed
	return g.FreedBytes + g.Packs.FreedBytes, err
}

// meetQuota removes whole runs, the least recently written first, while
// the store is past its quota's high-water mark, measuring again after a
// gc each round, and returns what it removed.
func (a *retentionPass) meetQuota(ctx context.Context) (RuleResult, error) {
	quota := RuleResult{Rule: RuleMaxBytes}
	r := a.r
	if !overHighWater(r, a.res.DiskBytes) {
		return quota, nil
	}
	gone := map[string]bool{}
	for _, rr := range a.res.Rules {
		if rr.Rule == RuleKeepRuns {
			for _, run := range rr.Runs {
				gone[run] = true
			}
		}
	}
	// Once past the high-water mark, runs go until the store is under
	// quotaHeadroom of the quota: the writes that go on meanwhile, and
	// until the next maintenance, have room. The gc after each round also
	// frees what the rules removed.
	aim := int64(float64(r.MaxBytes) * quotaHeadroom)
	for round := 0; round < quotaRounds && a.res.DiskBytes > aim; round++ {
		runs := quotaRuns(a.st, r.MaxBytes, a.activeSince, gone)
		if len(runs) == 0 {
			break
		}
		for _, chunk := range pruneChunks(runs) {
			for _, run := range chunk {
				gone[run] = true
			}
			pr, err := a.pruneRaw(ctx, index.PruneOptions{Runs: chunk, Rule: RuleMaxBytes})
			if err != nil {
				return quota, err
			}
			quota.Parts += pr.RemovedParts
			quota.Runs = append(quota.Runs, pr.Runs...)
		}
		if a.o.DryRun {
			break // a dry run removes nothing, so cannot measure again
		}
		freed, err := a.gc(ctx)
		if err != nil {
			return quota, fmt.Errorf("retention: %w", err)
		}
		if err := a.measure(ctx); err != nil {
			return quota, err
		}
		if freed == 0 {
			// The blobs of the runs removed are younger than gc's grace
			// period (or runs that stay share them): removing more runs
			// would free no more now; a later gc frees them.
			break
		}
	}
	return quota, nil
}

// A quota is kept between two marks. A store past quotaHighWater of its
// quota is due for maintenance, whose removals then aim under
// quotaHeadroom of it: the writes that go on while a maintenance prunes
// and collects (seconds, on a busy store) fill the gap to the quota
// itself, not past it, and a store near its quota does not remove a run
// on every write.
const (
	quotaHighWater = 0.9
	quotaHeadroom  = 0.7
)

// overHighWater reports whether a store taking disk bytes is past its
// quota's high-water mark.
func overHighWater(r Retention, disk int64) bool {
	return r.MaxBytes > 0 && float64(disk) > float64(r.MaxBytes)*quotaHighWater
}

// The most runs, and about the most parts, one prune of a quota removes.
// SQLite and PostgreSQL bound a statement's parameters; and a prune holds
// the index's write lock while it deletes, each part with its triggers'
// updates, so that a prune of whole runs by the thousand parts (100 to
// 230 ms in the retention benchmark) kept writers waiting as long.
const (
	pruneRunsAtOnce  = 500
	prunePartsAtOnce = 512
)

// pruneChunks splits runs into prunes of at most pruneRunsAtOnce runs and
// prunePartsAtOnce parts, or of one run when it alone has more.
func pruneChunks(runs []GroupStats) [][]string {
	var out [][]string
	var cur []string
	var parts int64
	for _, g := range runs {
		if len(cur) > 0 && (len(cur) == pruneRunsAtOnce || parts+g.Parts > prunePartsAtOnce) {
			out, cur, parts = append(out, cur), nil, 0
		}
		cur = append(cur, g.Name)
		parts += g.Parts
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// quotaRuns picks the runs to remove, least recently written first, for
// the store whose stats are st to come under quota×quotaHeadroom: each
// run's share of the stored bytes, scaled by what the store takes on disk
// for a stored byte. Runs written to since activeSince and runs in skip
// are never picked. The estimate counts a blob shared with runs that stay
// as freed, so it picks too few rather than too many: the caller measures
// again after gc and comes back.
func quotaRuns(st Stats, quota int64, activeSince time.Time, skip map[string]bool) []GroupStats {
	disk := diskBytes(st)
	target := disk - int64(float64(quota)*quotaHeadroom)
	stored := st.StoredBytes + st.UnreferencedBytes
	perByte := 1.0
	if stored > 0 {
		perByte = float64(disk-st.IndexBytes) / float64(stored)
	}
	runs := append([]GroupStats(nil), st.ByRun...)
	sortRunsByLast(runs)
	var out []GroupStats
	var freed float64
	for _, g := range runs {
		if freed >= float64(target) {
			break
		}
		if skip[g.Name] || !g.Last.Before(activeSince) {
			continue
		}
		out = append(out, g)
		freed += float64(g.StoredBytes) * perByte
	}
	return out
}

// sortRunsByLast sorts runs the least recently written first.
func sortRunsByLast(runs []GroupStats) {
	slices.SortStableFunc(runs, func(a, b GroupStats) int {
		return cmp.Or(a.Last.Compare(b.Last), cmp.Compare(a.Name, b.Name))
	})
}

// Removal is one entry of the removal log: the parts of one run that one
// prune removed, and the rule that removed them (RuleByName for casctl
// prune).
type Removal = catalog.Removal

// Removals returns the removal log, newest first: entries from since on
// (all when zero), at most limit of them (all when 0).
func (s *Store) Removals(ctx context.Context, since time.Time, limit int) ([]Removal, error) {
	return s.ix.Removals(ctx, since, limit)
}
