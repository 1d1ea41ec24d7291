package store

import (
	"runtime"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// blobGroup makes the blobs of concurrent one-part writes durable together:
// each write puts its bytes in a temp file without a sync, and one barrier
// of the file system (cas.Store.Barrier) makes every waiting write's bytes
// durable; each then renames its blob into place, their rows commit
// without syncing the log, and one more barrier makes the names and the
// log durable. Two barriers serve as many writes as overlap, where each
// write alone costs its blob's sync, its directory's and its log's.
//
// A barrier starts once no write of the group is still writing its temp
// file, so that the writes that began together share it; the one after a
// commit is asked for by the committer, once for its transaction (see
// Store.commit), and serves whatever writes wait meanwhile. A write that
// finds itself alone in the group when its bytes are written takes no
// barrier: it syncs its own file, as a lone write does, whose syncs flush
// nothing but its own (a barrier flushes every file of the file system,
// whoever wrote it).
type blobGroup struct {
	mu sync.Mutex
	// inflight counts the group's writes begun and not returned; writing,
	// those still writing their temp files.
	inflight, writing int
	// entered, when made, is closed by the next write to begin.
	entered chan struct{}
	// expect is how many writes are expected to overlap: as many as did
	// before, until a wait for them ends without them.
	expect int
	// running is set while a barrier is being taken.
	running bool
	waiting []*barrierWait
	// barriers counts the barriers taken, for tests.
	barriers int
	// barrier, when set (by tests), is called instead of the file
	// system's barrier.
	barrier func() error
}

// barrierWait is one wait for a barrier that begins after it.
type barrierWait struct {
	// turn is sent true when the waiter is to take the barrier itself,
	// false once one taken by another has ended, with err.
	turn chan bool
	err  error
}

// groupMax bounds the size of a blob written in a group: the group's
// barrier waits for its writes to have written their bytes.
const groupMax = 1 << 20

// groupDelay is how long the write that would start a barrier waits for
// as many writes to begin as overlapped before (see awaitExpected).
const groupDelay = 200 * time.Microsecond

// groupWrite is one write's place in a blobGroup.
type groupWrite struct {
	g       *blobGroup
	writing bool
}

// enter counts a write that has begun and is writing its temp file; leave
// must follow.
func (g *blobGroup) enter() *groupWrite {
	g.mu.Lock()
	g.inflight++
	g.writing++
	if g.entered != nil {
		close(g.entered)
		g.entered = nil
	}
	g.expect = max(g.expect, g.inflight)
	g.mu.Unlock()
	return &groupWrite{g: g, writing: true}
}

// written says that w writes nothing more, or needs no barrier for its
// bytes (a dedup hit, a failed write).
func (w *groupWrite) written() {
	if !w.writing {
		return
	}
	w.writing = false
	g := w.g
	g.mu.Lock()
	g.writing--
	g.handOffLocked()
	g.mu.Unlock()
}

// leave says that w has returned.
func (w *groupWrite) leave() {
	w.written()
	w.g.mu.Lock()
	w.g.inflight--
	w.g.mu.Unlock()
}

// bytesWritten waits for a barrier begun after w's temp file was written,
// and returns its error; or, alone reports that no other write of the
// group is in flight or waiting, and then no barrier was taken: the write
// syncs its own file.
func (w *groupWrite) bytesWritten(blobs *cas.Store) (alone bool, err error) {
	g := w.g
	g.mu.Lock()
	if g.writing == 1 && !g.running {
		// A barrier would start now, or none be taken. Writes begun with
		// this one may not have been counted yet: a goroutine just
		// started waits for a thread while this one runs. Those that can
		// run do so first, and are counted; with others in flight, this
		// one waits a moment for one more to begin, still counted as
		// writing, so that no barrier starts meanwhile.
		g.mu.Unlock()
		runtime.Gosched()
		g.mu.Lock()
		if g.inflight < g.expect {
			g.awaitExpected()
		}
	}
	w.writing = false
	g.writing--
	if g.alone() {
		g.mu.Unlock()
		return true, nil
	}
	return false, g.waitLocked(blobs)
}

// awaitExpected waits, with g.mu held, until as many writes are in flight
// as are expected, or groupDelay has passed; then fewer are expected.
func (g *blobGroup) awaitExpected() {
	t := time.NewTimer(groupDelay)
	defer t.Stop()
	for g.inflight < g.expect {
		if g.entered == nil {
			g.entered = make(chan struct{})
		}
		entered := g.entered
		g.mu.Unlock()
		select {
		case <-entered:
			g.mu.Lock()
		case <-t.C:
			g.mu.Lock()
			g.expect = g.inflight
		}
	}
}

// alone reports, with g.mu held, whether the group's one write in flight
// has written its bytes and nothing waits for a barrier.
func (g *blobGroup) alone() bool {
	return g.inflight == 1 && g.writing == 0 && !g.running && len(g.waiting) == 0
}

// wait waits for a barrier begun after the call, and returns its error.
func (g *blobGroup) wait(blobs *cas.Store) error {
	g.mu.Lock()
	return g.waitLocked(blobs)
}

// waitLocked is wait with g.mu held; it unlocks it.
func (g *blobGroup) waitLocked(blobs *cas.Store) error {
	w := &barrierWait{turn: make(chan bool, 1)}
	g.waiting = append(g.waiting, w)
	g.handOffLocked()
	g.mu.Unlock()
	if <-w.turn {
		g.take(blobs, w)
	}
	return w.err
}

// handOffLocked starts a barrier, by giving the first waiter its turn,
// when some wait, none is running, and no write is still writing: one of
// those would ask for the next barrier a moment later.
func (g *blobGroup) handOffLocked() {
	if g.running || g.writing > 0 || len(g.waiting) == 0 {
		return
	}
	g.running = true
	g.waiting[0].turn <- true
}

// take takes a barrier for every write waiting, own among them, and
// tells them how it went.
func (g *blobGroup) take(blobs *cas.Store, own *barrierWait) {
	g.mu.Lock()
	batch := g.waiting
	g.waiting = nil
	g.barriers++
	g.mu.Unlock()
	var err error
	if g.barrier != nil {
		err = g.barrier()
	} else {
		err = blobs.Barrier()
	}
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
