package store

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
	"github.com/toolcas/toolcas/index"
)

// Options only tests use, and the test hooks (testHooks) behind them: an
// option names what a test changes in the store it opens; the hooks see
// the engine Open makes from that config and apply it there.

// withFaults makes the named points of a store's work fail with what
// inject returns (or hold there, as long as inject blocks).
func withFaults(inject func(point string) error) Option {
	return seamOption(func(s *seamSet) { s.inject = inject })
}

// withoutGCLock turns off what keeps gc from removing the blobs writes are
// about to record, to show what it prevents: gc.lock on a local store (the
// store locks files of its own that no other store locks), the blob leases
// and the sweep lock on a shared one.
func withoutGCLock() Option {
	return seamOption(func(s *seamSet) { s.noGCLock = true })
}

// withoutIntent makes gc skip gc.intent, to show the starvation it prevents.
func withoutIntent() Option {
	return seamOption(func(s *seamSet) { s.noIntent = true })
}

// withSweepWindow sets how long gc may delete a batch's objects under the
// sweep fence, for tests that wait for a fence to pass.
func withSweepWindow(d time.Duration) Option {
	return seamOption(func(s *seamSet) { s.sweepWindow = d })
}

// withBarrierCheap makes the store ask f, not the machine's unwritten
// bytes, whether a barrier is cheap now (see localEngine.groupable).
func withBarrierCheap(f func() bool) Option {
	return seamOption(func(s *seamSet) { s.barrierCheap = f })
}

// withCommittedRows makes the store call f with the parts of each write
// without syncs once their rows are committed.
func withCommittedRows(f func(parts []index.NewPart)) Option {
	return seamOption(func(s *seamSet) { s.committed = f })
}

// withPackLimit makes each pack the store writes take at most n bytes of
// blobs, so that a pack of a few blobs' worth makes many packs.
func withPackLimit(n int64) Option {
	return seamOption(func(s *seamSet) { s.packLimit = n })
}

// A seamSet is what a test changes in one store.
type seamSet struct {
	inject       func(point string) error
	noGCLock     bool
	noIntent     bool
	sweepWindow  time.Duration
	barrierCheap func() bool
	committed    func(parts []index.NewPart)
	packLimit    int64
	// counts holds what count saw, by what.
	countMu sync.Mutex
	counts  map[string][]int
}

// seamHooks is testHooks in this package's tests.
type seamHooks struct {
	mu       sync.Mutex
	byConfig map[*config]*seamSet
	byEngine map[engine]*seamSet
}

var hooks = &seamHooks{byConfig: map[*config]*seamSet{}, byEngine: map[engine]*seamSet{}}

func init() { testHooks = hooks }

// seamOption is an option that changes the seamSet of the store being
// opened.
func seamOption(f func(*seamSet)) Option {
	return func(c *config) error {
		hooks.mu.Lock()
		defer hooks.mu.Unlock()
		s := hooks.byConfig[c]
		if s == nil {
			s = &seamSet{}
			hooks.byConfig[c] = s
		}
		f(s)
		return nil
	}
}

// opened moves the seams of c to e, and applies those Open cannot.
func (h *seamHooks) opened(c *config, e engine) {
	h.mu.Lock()
	s := h.byConfig[c]
	delete(h.byConfig, c)
	if s == nil {
		s = &seamSet{}
	}
	h.byEngine[e] = s
	h.mu.Unlock()
	switch e := e.(type) {
	case *localEngine:
		// Lock files of its own, which no other store locks.
		private := func(name string) string {
			dir, err := os.MkdirTemp("", "toolcas-nolock-")
			if err != nil {
				panic(err)
			}
			return filepath.Join(dir, name)
		}
		if s.noGCLock {
			e.locks.lock, e.locks.intent = private(LockFile), private(IntentFile)
		}
		if s.noIntent {
			e.locks.intent = private(IntentFile)
		}
	case *sharedEngine:
		if s.noGCLock {
			e.leases = noLeases{e.ix}
		}
		if s.sweepWindow != 0 {
			e.sweepWindow = s.sweepWindow
		}
	}
}

func (h *seamHooks) seams(e engine) *seamSet {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byEngine[e]
}

func (h *seamHooks) fault(e engine, point string) error {
	if s := h.seams(e); s != nil && s.inject != nil {
		return s.inject(point)
	}
	return nil
}

func (h *seamHooks) barrierCheap(e engine) (bool, bool) {
	if s := h.seams(e); s != nil && s.barrierCheap != nil {
		return s.barrierCheap(), true
	}
	return false, false
}

func (h *seamHooks) count(e engine, what string, n int) {
	s := h.seams(e)
	if s == nil {
		return
	}
	s.countMu.Lock()
	defer s.countMu.Unlock()
	if s.counts == nil {
		s.counts = map[string][]int{}
	}
	s.counts[what] = append(s.counts[what], n)
}

func (h *seamHooks) rowsCommitted(e engine, parts []index.NewPart) {
	if s := h.seams(e); s != nil && s.committed != nil {
		s.committed(parts)
	}
}

func (h *seamHooks) packLimit(e engine) int64 {
	if s := h.seams(e); s != nil {
		return s.packLimit
	}
	return 0
}

// counted returns what the store's work counted of what, in order.
func counted(st *Store, what string) []int {
	s := hooks.seams(st.eng)
	if s == nil {
		return nil
	}
	s.countMu.Lock()
	defer s.countMu.Unlock()
	return slices.Clone(s.counts[what])
}

// total sums what the store's work counted of what.
func total(st *Store, what string) int {
	n := 0
	for _, c := range counted(st, what) {
		n += c
	}
	return n
}

// noLeases gives leases that hold nothing, and a sweep lock that deletes
// without a fence: what the leases prevent.
type noLeases struct{ ix *index.Index }

func (l noLeases) blobLease(ctx context.Context, _ time.Duration) (context.Context, func() error, error) {
	return ctx, func() error { return nil }, nil
}

func (l noLeases) sweepLock(context.Context, time.Duration) (sweepLock, error) {
	return noSweepLock(l), nil
}

type noSweepLock noLeases

func (l noSweepLock) DeleteUnreferenced(ctx context.Context, blobs []cas.Blob, cutoff, now time.Time, _ time.Duration) ([]cas.Blob, error) {
	return l.ix.DeleteUnreferencedAt(ctx, blobs, cutoff, now)
}
func (noSweepLock) Held(context.Context) error       { return nil }
func (noSweepLock) ClearFence(context.Context) error { return nil }
func (noSweepLock) Release() error                   { return nil }

// localOf returns a local store's engine.
func localOf(s *Store) *localEngine { return s.eng.(*localEngine) }

// sharedOf returns a shared store's engine.
func sharedOf(s *Store) *sharedEngine { return s.eng.(*sharedEngine) }

// indexPart is the index's part of a store's part.
func indexPart(p Part) index.Part {
	return index.Part{ID: p.ID, Key: p.Key, Run: p.Run, Step: p.Step, Tool: p.Tool, CallID: p.CallID, Part: p.Part,
		Version: p.Version, Kind: catalog.Kind(p.Kind), MIME: p.MIME, Filename: p.Filename, Chars: p.Chars,
		Bytes: p.Bytes, Blob: p.Blob, CreatedAt: p.CreatedAt}
}
