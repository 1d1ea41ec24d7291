package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/toolcas/toolcas/index"
)

// MaintainResult says what one maintenance did.
type MaintainResult struct {
	Retention RetentionResult
	Pack      PackResult
}

// MaintenanceLease is the index lease that keeps maintenances apart: one
// at a time per store, across processes and machines.
const MaintenanceLease = "maintenance"

// maintenanceTTL is how long the maintenance lease lasts without renewal:
// a holder that dies frees it after this long.
const maintenanceTTL = time.Minute

// ErrMaintenanceBusy is returned by Maintain when another process's
// maintenance holds the store's maintenance lease.
var ErrMaintenanceBusy = errors.New("another maintenance is running on this store")

// Maintain looks after the store as its retention policy says, as one
// maintenance that no other process runs at the same time: it applies the
// policy (ApplyRetention), whose gc frees what it removed, then, on a local
// store, packs the blobs unused for the policy's KeepLooseFor outside the
// active window once they pass DefaultPackOver, or a quarter of the quota.
// It returns ErrMaintenanceBusy when another maintenance holds the lease.
func (s *Store) Maintain(ctx context.Context) (MaintainResult, error) {
	if s.readOnly {
		return MaintainResult{}, fmt.Errorf("maintain: %w", ErrReadOnly)
	}
	ctx, release, err := s.maintenanceLease(ctx)
	if err != nil {
		return MaintainResult{}, err
	}
	defer release(false)
	return s.maintain(ctx)
}

// maintenanceLease takes the store's maintenance lease, or returns
// ErrMaintenanceBusy, and keeps it renewed until release; the context it
// returns is cancelled if the lease is lost. release(unused) frees it,
// uncounted when unused.
func (s *Store) maintenanceLease(ctx context.Context) (context.Context, func(unused bool), error) {
	holder := maintenanceHolder()
	ok, err := s.ix.TryLease(ctx, MaintenanceLease, holder, maintenanceTTL)
	if err != nil {
		return ctx, nil, fmt.Errorf("maintain: %w", err)
	}
	if !ok {
		return ctx, nil, ErrMaintenanceBusy
	}
	ctx, cancel := context.WithCancelCause(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(maintenanceTTL / 4)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if ok, err := s.ix.TryLease(ctx, MaintenanceLease, holder, maintenanceTTL); err == nil && !ok {
					cancel(errors.New("maintain: lost the maintenance lease"))
					return
				}
			}
		}
	}()
	release := func(unused bool) {
		cancel(nil)
		<-renewed
		// Released on a context of its own: a maintenance cancelled
		// midway still frees the lease for the next.
		_ = s.ix.ReleaseLease(context.WithoutCancel(ctx), MaintenanceLease, holder, unused)
	}
	return ctx, release, nil
}

// maintain is Maintain with the lease held.
func (s *Store) maintain(ctx context.Context) (MaintainResult, error) {
	var res MaintainResult
	// The policy first, then pack: no blob is packed only to go, and a
	// store over its quota is brought under it at once, by pruning and
	// gc, which cost a fraction of a pack.
	var err error
	res.Retention, err = s.ApplyRetention(ctx, RetentionOptions{})
	if err != nil {
		return res, err
	}
	if res.Pack, err = s.packByPolicy(ctx, res.Retention.Policy); err != nil {
		return res, err
	}
	if context.Cause(ctx) != ctx.Err() {
		return res, context.Cause(ctx)
	}
	return res, nil
}

// packByPolicy packs, on a local store, the blobs unused for the policy's
// KeepLooseFor outside its active window, once they pass DefaultPackOver,
// or a quarter of the quota: often enough that the store holds several
// times more history in packs, seldom enough that most maintenances, which
// a quota makes frequent, are a prune and a gc only. pack.lock keeps
// packers apart.
func (s *Store) packByPolicy(ctx context.Context, r Retention) (PackResult, error) {
	if _, err := capability[packer](s, "pack", true); err != nil {
		return PackResult{}, nil // packs are local-only
	}
	limit := int64(DefaultPackOver)
	if r.MaxBytes > 0 {
		limit = min(limit, r.MaxBytes/4)
	}
	res, _, err := s.PackIfOver(ctx, limit, PackOptions{OlderThan: r.LooseWindow(), Active: r.ActiveWindow(), SearchLater: true})
	return res, err
}

// maintenanceHolder names this process as the lease's holder.
func maintenanceHolder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d:%d", host, os.Getpid(), time.Now().UnixNano())
}

// Due reports whether the store is past its retention policy, from the kept
// counters: past 90 % of its quota (the high-water mark), or holding parts
// that max_age, keep_runs or a run's own ttl would remove. It is what a
// write checks before it starts a maintenance, once a second: it reads a
// few aggregate rows, not a row per run.
func (s *Store) Due(ctx context.Context) (bool, error) {
	r, err := s.Retention(ctx)
	if err != nil {
		return false, err
	}
	if r.IsZero() {
		// Without a policy only a run's own ttl can make the store due:
		// most stores have none, and need not read the clock.
		if has, err := s.ix.HasRunTTLs(ctx); err != nil || !has {
			return false, err
		}
	}
	now := s.now()
	// A run's own ttl holds with no policy as well.
	if expired, err := s.ix.HasExpiredRuns(ctx, now, now.Add(-r.ActiveWindow())); err != nil || expired {
		return expired, err
	}
	if r.IsZero() {
		return false, nil
	}
	disk, err := s.DiskBytes(ctx)
	if err != nil || overHighWater(r, disk) {
		return err == nil, err
	}
	if r.MaxAge == 0 && r.KeepRuns == 0 {
		return false, nil
	}
	n, err := s.ix.CountRuns(ctx, now.Add(-r.ActiveWindow()), now.Add(-r.MaxAge))
	if err != nil {
		return false, err
	}
	return dueByRules(r, n), nil
}

// dueByRules reports whether max_age or keep_runs would remove parts of
// the runs n counts. Runs written to within the active window are the
// newest, so keep_runs removes a run as soon as there are more runs than
// it keeps and one of them is inactive.
func dueByRules(r Retention, n index.RunCounts) bool {
	return r.MaxAge > 0 && n.Aged > 0 || r.KeepRuns > 0 && n.Inactive > 0 && n.Runs > int64(r.KeepRuns)
}

// How often writes look at whether the store is due for maintenance, and
// how long they wait after a maintenance that failed, or, at most, after
// one that left the store over its quota (only active runs were left to
// remove) before they try again.
const (
	maintainCheckEvery = time.Second
	maintainBackoff    = time.Minute
)

// autoMaintain is the state of a store's automatic maintenance.
type autoMaintain struct {
	mu      sync.Mutex
	off     bool
	running bool
	packing bool
	closed  bool
	next    time.Time
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
	// done, when set (by tests), is called after each maintenance a
	// write started, with its outcome.
	done func(MaintainResult, error)
}

// afterWrite starts a maintenance in the background when the store is due
// for one and none runs in this process; at most once a second it looks.
// The write that calls it does not wait.
func (s *Store) afterWrite() {
	m := &s.auto
	if m.off || s.readOnly {
		return
	}
	now := s.now()
	m.mu.Lock()
	if m.running || m.closed || now.Before(m.next) {
		m.mu.Unlock()
		return
	}
	m.running = true
	m.next = now.Add(maintainCheckEvery)
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		res, ran, err := s.maintainIfDue(m.ctx)
		m.mu.Lock()
		m.running = false
		switch {
		case ran && err != nil:
			m.next = s.now().Add(maintainBackoff)
		case ran && overHighWater(res.Retention.Policy, res.Retention.DiskBytes):
			// Only active runs were left: the oldest leaves the window
			// within it, so look again after a share of it.
			m.next = s.now().Add(min(maintainBackoff, max(res.Retention.Policy.ActiveWindow()/4, maintainCheckEvery)))
		}
		m.mu.Unlock()
		if ran && err == nil {
			s.packInBackground(res.Retention.Policy)
		}
		if ran && m.done != nil {
			m.done(res, err)
		}
	}()
}

// packInBackground packs by the policy (packByPolicy) in a goroutine of its
// own, unless one of this process's runs already: a pack takes seconds,
// in which writes go on and the next maintenance must be free to prune.
func (s *Store) packInBackground(r Retention) {
	m := &s.auto
	m.mu.Lock()
	if m.packing || m.closed {
		m.mu.Unlock()
		return
	}
	m.packing = true
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		_, _ = s.packByPolicy(m.ctx, r) // best effort: cold blobs stay loose, and readable
		m.mu.Lock()
		m.packing = false
		m.mu.Unlock()
	}()
}

// maintainIfDue applies the retention policy, as Maintain does under the
// maintenance lease, when the store is due for it, and reports whether it
// ran. The caller packs afterwards, outside the lease.
func (s *Store) maintainIfDue(ctx context.Context) (MaintainResult, bool, error) {
	// The look itself is not cancelled by Close, which waits the few
	// milliseconds it takes: cancelling a query interrupts its connection,
	// and an interrupt that comes as the query ends can reach the next
	// statement on that connection instead, such as the checkpoint that
	// closing the index makes, and leave the last writes in the log. Nor
	// does it fold the steps staged by writes without syncs: the look
	// after a write would make every fold the writer's (see
	// index.WithoutFold); the look under the lease below does.
	ok, err := s.Due(index.WithoutFold(context.WithoutCancel(ctx)))
	if err != nil || !ok {
		return MaintainResult{}, false, err
	}
	ctx, release, err := s.maintenanceLease(ctx)
	if errors.Is(err, ErrMaintenanceBusy) {
		return MaintainResult{}, false, nil
	}
	if err != nil {
		return MaintainResult{}, true, err
	}
	// Looked at again under the lease: another process's maintenance may
	// have brought the store back under its policy since.
	if ok, err = s.Due(ctx); err != nil || !ok {
		release(true)
		return MaintainResult{}, false, err
	}
	defer release(false)
	var res MaintainResult
	res.Retention, err = s.ApplyRetention(ctx, RetentionOptions{})
	return res, true, err
}

// stopAuto cancels a maintenance under way and waits for it.
func (s *Store) stopAuto() {
	m := &s.auto
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
}

// Maintenances counts the maintenances run on the store over its life, by
// any process: the times the maintenance lease was taken.
func (s *Store) Maintenances(ctx context.Context) (int64, error) {
	return s.ix.LeaseTaken(ctx, MaintenanceLease)
}
