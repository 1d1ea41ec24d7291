package cas

import (
	"sync"
	"time"

	"github.com/toolcas/toolcas/internal/option"
	"github.com/toolcas/toolcas/internal/quiesce"
)

// WithTempPool makes the store keep n temp files made ahead, locked, in
// the blobs directory, for puts of bytes (PutBytes and its kin) to take
// (0, the default, keeps none). Making a file, that is allocating an
// inode, is one of the slowest calls of a put on some file systems (on
// ext4 that many deletions have passed through, it can cost more than
// the file's fsync); with a pool it happens between puts, off the path
// that a writer waits on. Nothing is made before the second put; the
// pool grows by one file each time a put finds it empty (but the first),
// up to n, and is filled again behind each put that takes one, once that
// put's syncs are done (making a file while a sync runs holds the sync
// back: see RefillTempPool); puts
// further apart than maxPooledAge keep one file ahead; Close empties it. A
// process killed with files in its pool leaves empty temp files, which gc
// removes as it removes any other. Where temp files cannot be locked
// (TempLocking), it keeps none: gc could not tell a pooled file from a
// stray one.
func WithTempPool(n int) Option {
	return option.Check(0 <= n && n <= maxTempPool, func(c *config) { c.tempPool = n },
		"a temp pool of %d files: want 0 to %d", n, maxTempPool)
}

// maxTempPool bounds WithTempPool: a pool is for a few concurrent writers.
const maxTempPool = 64

// maxPooledAge is how long a pooled temp file may wait to be taken. A blob
// keeps its temp file's birth time, and a put that finds a blob already
// stored takes one born more than settleTime ago as on disk without a sync
// (see syncPresent): a file born long before its rename would pass for
// settled too early. A sixth of settleTime leaves the rest, 50 s, for the
// file system's own commit of the name (every 5 s on ext4, up to 30 s on
// XFS and btrfs).
const maxPooledAge = settleTime / 6

// tempPool holds the temp files made ahead; the zero value keeps none.
type tempPool struct {
	mu   sync.Mutex
	want int
	// target is how many files the pool is filled to: one more each time
	// a put found it empty (but the first), up to want. misses counts
	// those puts.
	target int
	misses int
	// stale holds files too old to use, for the filling to remove.
	stale   []pooledTemp
	files   []pooledTemp
	filling bool
	// due is set when a put took a file and the filling waits for that
	// put's syncs to end (see RefillTempPool); dueAt is when it took it.
	due    bool
	dueAt  time.Time
	closed bool
	// failed is when making a file last failed (a full disk, say): the
	// pool is not filled again for a while, and puts make their own.
	failed time.Time
	wg     sync.WaitGroup
	// settled is signalled when filling ends (SettleTempPool).
	settled *sync.Cond
}

type pooledTemp struct {
	name string
	f    file
	made time.Time // by the store's clock, as syncPresent judges births
}

// poolRetry is how long the pool waits after failing to make a file.
const poolRetry = time.Second

// takeTemp returns a pooled temp file in BlobsDir, locked and empty, or
// false when the pool has none fit to take; either way it has the pool
// filled again behind the caller.
func (s *Store) takeTemp() (string, file, bool) {
	p := &s.pool
	// The store's clock is read here, by the writer, never by the filling
	// goroutine: a test's clock need not be safe for concurrent use.
	now := s.now()
	p.mu.Lock()
	if p.want == 0 || p.closed {
		p.mu.Unlock()
		return "", nil, false
	}
	var t pooledTemp
	found, stale := false, false
	for len(p.files) > 0 {
		t = p.files[0]
		p.files = p.files[1:]
		if now.Sub(t.made) < maxPooledAge {
			found = true
			break
		}
		// The filling removes it, off the writer's path.
		p.stale = append(p.stale, t)
		stale = true
	}
	switch {
	case stale:
		// Writes further apart than maxPooledAge: one file ahead is all
		// that can help, and each one made may go stale again.
		p.target = min(p.target, 1)
	case !found:
		// A put that found the pool empty grows it by one, up to want,
		// from the second such put on: a process that writes once makes
		// nothing for nothing.
		p.misses++
		if p.misses > 1 {
			p.target = min(p.want, p.target+1)
		}
	}
	fill := !p.filling && (len(p.stale) > 0 || len(p.files) < p.target) &&
		(p.failed.IsZero() || now.Sub(p.failed) >= poolRetry)
	// The filling waits for the put's syncs (see RefillTempPool), unless
	// one was left due by a put whose caller never asked for it.
	start := fill && p.due
	if start {
		p.due = false
		p.filling = true
		p.wg.Add(1)
	} else if fill {
		p.due, p.dueAt = true, now
	}
	p.mu.Unlock()
	if start {
		go s.fillPool(now)
	}
	if !found {
		return "", nil, false
	}
	if unlinked(t.f) {
		// Someone removed it (it was locked: not gc); the put makes its own.
		t.f.Close()
		return "", nil, false
	}
	return t.name, t.f, true
}

// RefillTempPool starts the filling of the pool behind a put that took a
// file from it, if one is due. A put's own syncs wait for every file
// system change made while they run (on ext4, a file made meanwhile holds
// the journal's commit back), so the filling waits until the put is done:
// the puts of this package start it themselves as they return;
// PutHashedNameUnsynced leaves it to its caller, to call once the name's
// sync, and whatever ran beside it, is done. A pool whose filling is left
// due is filled at the next put that takes a file.
func (s *Store) RefillTempPool() {
	p := &s.pool
	p.mu.Lock()
	start := p.due && !p.filling && !p.closed
	if start {
		p.due = false
		p.filling = true
		p.wg.Add(1)
	}
	now := p.dueAt
	p.mu.Unlock()
	if start {
		go s.fillPool(now)
	}
}

// fillPool removes the pool's stale files, then makes temp files until the
// pool holds its target; now, when the filling started, stands for when
// each was made.
func (s *Store) fillPool(now time.Time) {
	p := &s.pool
	defer p.wg.Done()
	for {
		p.mu.Lock()
		stale := p.stale
		p.stale = nil
		p.mu.Unlock()
		for _, t := range stale {
			s.discard(t.name, t.f)
		}
		p.mu.Lock()
		if p.closed || len(p.files) >= p.target {
			p.filling = false
			p.idle().Broadcast()
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		name, f, err := s.createTempIn(BlobsDir)
		p.mu.Lock()
		if err != nil || p.closed {
			if err != nil {
				p.failed = now
			}
			p.filling = false
			p.idle().Broadcast()
			p.mu.Unlock()
			if err == nil {
				s.discard(name, f)
			}
			return
		}
		p.files = append(p.files, pooledTemp{name: name, f: f, made: now})
		p.mu.Unlock()
	}
}

// closePool removes the pool's files and stops its filling.
func (s *Store) closePool() {
	p := &s.pool
	p.mu.Lock()
	p.closed = true
	files := append(p.files, p.stale...)
	p.files, p.stale = nil, nil
	p.mu.Unlock()
	p.wg.Wait()
	for _, t := range files {
		s.discard(t.name, t.f)
	}
}

func init() { quiesce.Register((*Store).settleTempPool) }

// settleTempPool waits until the pool's filling, if one runs, is done:
// for benchmarks that time puts one by one (quiesce.Wait), so that the
// filling behind one put does not run during whatever is timed next.
func (s *Store) settleTempPool() {
	p := &s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.filling {
		p.idle().Wait()
	}
}

// idle returns the condition that filling ends; p.mu is held.
func (p *tempPool) idle() *sync.Cond {
	if p.settled == nil {
		p.settled = sync.NewCond(&p.mu)
	}
	return p.settled
}
