package store

import (
	"runtime"
	"sync"
	"time"
)

// blobGroup makes concurrent one-part writes durable together, with one
// barrier of the file system (cas.Store.Barrier) for all of them: each
// write puts its bytes in a temp file without a sync, hands its statements
// to the committer, and renames its blob into place once every write of
// the group has handed its own, so that their rows commit in one
// transaction, which leaves SQLite's log unsynced; then one barrier makes
// their bytes, their names and the log durable before any write returns.
// One barrier serves as many writes as overlap, where each write alone
// costs its blob's sync, its directory's and its log's.
//
// Until that barrier ends, a power cut may keep a row whose blob lost its
// name or its bytes: the store's marker, made durable before the first
// such write, has the next Open re-hash the blobs it covers and drop the
// rows of those that did not survive whole (see recoverMarker). No caller
// was told of such a row.
//
// A write that finds itself alone in the group when it has handed its
// statements takes no barrier: it syncs its own file, name and log, as a
// lone write does, whose syncs flush nothing but its own (a barrier
// flushes every file of the file system, whoever wrote it).
type blobGroup struct {
	mu sync.Mutex
	// inflight counts the group's writes begun and not returned; handing,
	// those that have not yet handed their statements over.
	inflight, handing int
	// entered, when made, is closed by the next write to begin; handed,
	// by the write that leaves none handing.
	entered, handed chan struct{}
	// expect is how many writes are expected to overlap: as many as did
	// before, until a wait for them ends without them.
	expect int
	// running is set while a barrier is being taken.
	running bool
	waiting []*barrierWait
}

// barrierWait is one wait for a barrier that begins after it.
type barrierWait struct {
	// turn is sent true when the waiter is to take the barrier itself,
	// false once one taken by another has ended, with err.
	turn chan bool
	err  error
}

// groupMax bounds the size of a blob written in a group: the writes of a
// group wait for each other to have written their bytes, and the next
// Open after an unclean shutdown re-hashes the blobs a marker covers up to
// this size.
const groupMax = 1 << 20

// groupDelay is how long a write that has handed its statements waits for
// as many writes to begin as overlapped before (see awaitExpected).
const groupDelay = 200 * time.Microsecond

// handDelay is how long at most a write that has handed its statements
// waits for the writes begun before it to hand theirs (see awaitHanded):
// less than a barrier and a transaction of their own would cost them.
const handDelay = time.Millisecond

// groupWrite is one write's place in a blobGroup.
type groupWrite struct {
	g       *blobGroup
	handing bool
}

// enter counts a write that has begun; leave must follow.
func (g *blobGroup) enter() *groupWrite {
	g.mu.Lock()
	g.inflight++
	g.handing++
	if g.entered != nil {
		close(g.entered)
		g.entered = nil
	}
	g.expect = max(g.expect, g.inflight)
	g.mu.Unlock()
	return &groupWrite{g: g, handing: true}
}

// handedOver says that w's statements are with the committer, or that w
// hands none the group's transaction could share (a dedup hit, a failed
// write). It may be called more than once.
func (w *groupWrite) handedOver() {
	g := w.g
	g.mu.Lock()
	w.handedLocked()
	g.mu.Unlock()
}

func (w *groupWrite) handedLocked() {
	if !w.handing {
		return
	}
	w.handing = false
	g := w.g
	g.handing--
	if g.handing == 0 && g.handed != nil {
		close(g.handed)
		g.handed = nil
	}
}

// leave says that w has returned.
func (w *groupWrite) leave() {
	g := w.g
	g.mu.Lock()
	w.handedLocked()
	g.inflight--
	g.mu.Unlock()
}

// gather waits, once w has written its bytes (and, when started is set,
// started its statements, which hand themselves over), for the writes
// begun with it to hand theirs, so that one transaction and one barrier
// serve them all; and reports whether w is alone: no other write of the
// group in flight, no barrier running or awaited. A write alone syncs its
// own file.
func (w *groupWrite) gather(started bool) (alone bool) {
	g := w.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if !started {
		w.handedLocked()
	}
	g.awaitHanded()
	if !g.running {
		// Writes begun with this one may not have been counted yet: a
		// goroutine just started waits for a thread while this one runs.
		// Those that can run do so first, and are counted; with others
		// expected, this one waits a moment for one more to begin.
		g.mu.Unlock()
		runtime.Gosched()
		g.mu.Lock()
		if g.inflight < g.expect {
			g.awaitExpected()
		}
		g.awaitHanded()
	}
	return g.alone()
}

// awaitExpected waits, with g.mu held, until as many writes are in flight
// as are expected, or groupDelay has passed; then fewer are expected.
func (g *blobGroup) awaitExpected() {
	if !g.awaitLocked(func() bool { return g.inflight >= g.expect }, &g.entered, groupDelay) {
		g.expect = g.inflight
	}
}

// awaitHanded waits, with g.mu held, until no write of the group is still
// to hand its statements over, or handDelay has passed: a write that
// began a moment ago writes at most groupMax bytes first, and writes that
// keep beginning must not hold this one back.
func (g *blobGroup) awaitHanded() {
	g.awaitLocked(func() bool { return g.handing == 0 }, &g.handed, handDelay)
}

// awaitLocked waits, with g.mu held, until done reports true, looking
// again each time the channel at *wake (made here when nil, closed by
// whoever changes what done looks at) is closed; it gives up after d and
// reports whether done came true.
func (g *blobGroup) awaitLocked(done func() bool, wake *chan struct{}, d time.Duration) bool {
	if done() {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for !done() {
		if *wake == nil {
			*wake = make(chan struct{})
		}
		ch := *wake
		g.mu.Unlock()
		select {
		case <-ch:
			g.mu.Lock()
		case <-t.C:
			g.mu.Lock()
			return done()
		}
	}
	return true
}

// alone reports, with g.mu held, whether the group's one write in flight
// has handed its statements over and nothing waits for a barrier.
func (g *blobGroup) alone() bool {
	return g.inflight == 1 && g.handing == 0 && !g.running && len(g.waiting) == 0
}

// wait waits for a barrier begun after the call, taken with barrier, and
// returns its error.
func (g *blobGroup) wait(barrier func() error) error {
	w := &barrierWait{turn: make(chan bool, 1)}
	g.mu.Lock()
	g.waiting = append(g.waiting, w)
	g.handOffLocked()
	g.mu.Unlock()
	if <-w.turn {
		g.take(barrier, w)
	}
	return w.err
}

// handOffLocked starts a barrier, by giving the first waiter its turn,
// when some wait and none is running: one running began before they
// asked, and they wait for the next.
func (g *blobGroup) handOffLocked() {
	if g.running || len(g.waiting) == 0 {
		return
	}
	g.running = true
	g.waiting[0].turn <- true
}

// take takes a barrier for every write waiting, own among them, and
// tells them how it went.
func (g *blobGroup) take(barrier func() error, own *barrierWait) {
	g.mu.Lock()
	batch := g.waiting
	g.waiting = nil
	g.mu.Unlock()
	err := barrier()
	for _, w := range batch {
		w.err = err
	}
	g.mu.Lock()
	g.running = false
	g.handOffLocked()
	g.mu.Unlock()
	for _, w := range batch {
		if w != own {
			w.turn <- false
		}
	}
}
