package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/cancel"
)

// IntentFile is the lock gc takes before gc.lock, to say it is waiting:
// writers take no new share of gc.lock while gc holds it, so that a stream
// of overlapping writes cannot keep gc out.
const IntentFile = "gc.intent"

// Default lock deadlines, used when the caller's context has none sooner.
const (
	// DefaultLockTimeout bounds how long a write waits for gc to finish.
	DefaultLockTimeout = 30 * time.Second
	// DefaultGCLockTimeout bounds how long gc waits for writes to finish.
	DefaultGCLockTimeout = time.Minute
)

// ErrLocked is wrapped by writes and by GC when the store stayed locked by
// another process past the deadline. It is hook.ErrLocked, so that callers
// of the hook can test for it without importing this package.
var ErrLocked = hook.ErrLocked

// Poll intervals of the lock waits: flock has no wait with a deadline. A
// writer waiting for gc polls often, so that it starts soon after each of
// gc's short holds. gc and packers poll from pollMin, twice as long each
// time up to pollMax: the writes under way gc waits for are short, but
// what holds it longer (a stopped process) should not cost it a core.
const (
	sharedPoll = time.Millisecond
	pollMin    = time.Millisecond
	pollMax    = 50 * time.Millisecond
)

// pollLock calls try until it takes its lock, the wait between tries
// growing from pollMin to pollMax, or until ctx ends.
func pollLock(ctx context.Context, try func() (bool, error)) error {
	wait := pollMin
	for {
		ok, err := try()
		if err != nil || ok {
			return err
		}
		if err := cancel.Sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, pollMax)
	}
}

// fileLocks orders a local store's writers and gc: gc.lock, which
// writers hold shared and gc exclusively, and gc.intent, which gc takes
// first to say it waits, so that a stream of overlapping writes cannot keep
// it out.
type fileLocks struct {
	// lock and intent are the paths of gc.lock and gc.intent.
	lock, intent string
	// timeout is the writers' default deadline.
	timeout time.Duration
	// readOnly: the store creates no lock file (see sharedFiles).
	readOnly bool
	// writers is the share of gc.lock the store's writes hold.
	writers writerLock
}

// newFileLocks returns the locks of the store root dir.
func newFileLocks(dir string, timeout time.Duration, readOnly bool) fileLocks {
	return fileLocks{lock: filepath.Join(dir, LockFile), intent: filepath.Join(dir, IntentFile), timeout: timeout, readOnly: readOnly}
}

// shared takes the writers' side of gc.lock: many writers at once, none
// while gc sweeps. It is held from the first blob written to the row
// committed, and never while a writer waits for its content. A writer waits
// while gc holds gc.intent, and gives up with ErrLocked at the caller's
// deadline or the store's lock timeout, whichever comes first.
//
// The writes of one Store share one share of gc.lock, through files kept
// open (see writerLock): a write costs no open and no close.
func (l *fileLocks) shared(ctx context.Context) (func(), error) {
	if l.readOnly {
		return l.sharedFiles(ctx)
	}
	start := time.Now()
	w := &l.writers
	held, err := w.tryShare(l.intent, l.lock)
	if err == nil && held == "" {
		return w.release, nil
	}
	ctx, cancel := withLockDeadline(ctx, l.timeout)
	defer cancel()
	t := time.NewTicker(sharedPoll)
	defer t.Stop()
	for err == nil && held != "" {
		select {
		case <-ctx.Done():
			return nil, l.writerLockedError(held, ctx.Err(), time.Since(start))
		case <-t.C:
		}
		held, err = w.tryShare(l.intent, l.lock)
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", l.lock, err)
	}
	return w.release, nil
}

// writerLockedError is the error of a write that gave up on gc: gc holds
// held; when that is gc.intent, gc itself waits for whoever holds gc.lock
// (a writer, or a packer recording its pack), whom the error names too.
func (l *fileLocks) writerLockedError(held string, err error, waited time.Duration) error {
	lerr := lockedError(held, "gc", err, waited)
	if held != l.intent {
		return lerr
	}
	if pids := lockHolders(l.lock); len(pids) > 0 {
		return fmt.Errorf("%w; gc waits for pid %s, which holds %s (a writer, or a packer recording its pack)",
			lerr, joinPids(pids), l.lock)
	}
	return lerr
}

// close closes the lock files the store's writers keep open.
func (l *fileLocks) close() { l.writers.close() }

// writerLock is a Store's share of gc.lock, which its concurrent writes
// hold together: a flock belongs to the open file, so the store keeps
// gc.intent and gc.lock open, takes the share when the first of its writes
// starts and drops it when the last one ends. Each write still checks
// gc.intent first, so that gc waiting for the share is not kept out by a
// stream of overlapping writes.
type writerLock struct {
	mu      sync.Mutex
	intent  *os.File
	lock    *os.File
	holders int
}

// tryShare takes a share for one write without waiting: held names the
// lock file gc holds when it could not.
func (w *writerLock) tryShare(intentPath, lockPath string) (held string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holders == 0 {
		// A burst of writes starts: if a lock file was removed or replaced
		// since it was opened, a gc locks the file now at that path, so
		// the share must be taken on that one too.
		w.intent = reopenIfReplaced(w.intent, intentPath)
		w.lock = reopenIfReplaced(w.lock, lockPath)
	}
	if w.intent == nil {
		if w.intent, err = os.OpenFile(intentPath, os.O_RDONLY|os.O_CREATE, 0o600); err != nil {
			return "", err
		}
	}
	if w.lock == nil {
		if w.lock, err = os.OpenFile(lockPath, os.O_RDONLY|os.O_CREATE, 0o600); err != nil {
			return "", err
		}
	}
	if err := flockNB(w.intent, lockSH); err != nil {
		if errors.Is(err, errWouldBlock) {
			return intentPath, nil
		}
		return "", err
	}
	defer flockNB(w.intent, lockUN)
	if w.holders == 0 {
		if err := flockNB(w.lock, lockSH); err != nil {
			if errors.Is(err, errWouldBlock) {
				return lockPath, nil
			}
			return "", err
		}
	}
	w.holders++
	return "", nil
}

// reopenIfReplaced returns f, or nil after closing it when the file at
// path is no longer the file f has open (removed, or replaced by another).
func reopenIfReplaced(f *os.File, path string) *os.File {
	if f == nil {
		return nil
	}
	open, err1 := f.Stat()
	now, err2 := os.Stat(path)
	if err1 == nil && err2 == nil && os.SameFile(open, now) {
		return f
	}
	f.Close()
	return nil
}

// release ends one write's share. A release after close (a write that
// outlived its store's Close) has nothing left to drop.
func (w *writerLock) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holders == 0 {
		return
	}
	if w.holders--; w.holders == 0 {
		flockNB(w.lock, lockUN)
	}
}

// close closes the lock files, once no write holds a share.
func (w *writerLock) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range []*os.File{w.intent, w.lock} {
		if f != nil {
			f.Close()
		}
	}
	w.intent, w.lock, w.holders = nil, nil, 0
}

// sharedFiles takes a share with lock files opened for this write
// alone: verify's second look, on a store opened read-only, locks the
// files if they are there and creates nothing.
func (l *fileLocks) sharedFiles(ctx context.Context) (func(), error) {
	start := time.Now()
	ctx, cancel := withLockDeadline(ctx, l.timeout)
	defer cancel()
	opts := []flock.Option{flock.SetFlag(os.O_RDONLY)}
	intent := flock.New(l.intent, opts...)
	if _, err := intent.TryRLockContext(ctx, sharedPoll); err != nil {
		intent.Close()
		return nil, lockedError(l.intent, "gc", err, time.Since(start))
	}
	lk := flock.New(l.lock, opts...)
	_, err := lk.TryRLockContext(ctx, sharedPoll)
	intent.Unlock()
	intent.Close()
	if err != nil {
		lk.Close()
		return nil, lockedError(l.lock, "gc", err, time.Since(start))
	}
	return func() { lk.Unlock(); lk.Close() }, nil
}

// exclusive takes gc's side: gc.intent first, so that no new writer
// starts, then gc.lock once the writes under way are done.
func (l *fileLocks) exclusive(ctx context.Context, timeout time.Duration) (func(), error) {
	start := time.Now()
	ctx, cancel := withLockDeadline(ctx, timeout)
	defer cancel()
	intent := flock.New(l.intent)
	if err := pollLock(ctx, intent.TryLock); err != nil {
		intent.Close()
		return nil, lockedError(l.intent, "another gc", err, time.Since(start))
	}
	lk := flock.New(l.lock)
	if err := pollLock(ctx, lk.TryLock); err != nil {
		lk.Close()
		intent.Unlock()
		intent.Close()
		return nil, lockedError(l.lock, "a writer", err, time.Since(start))
	}
	return func() {
		lk.Unlock()
		lk.Close()
		intent.Unlock()
		intent.Close()
	}, nil
}

// withLockDeadline adds the default deadline d unless ctx ends sooner; d <= 0
// adds none.
func withLockDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// lockedError says who holds a lock a wait gave up on, when that can be
// known.
func lockedError(path, who string, err error, waited time.Duration) error {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	holder := who
	if pids := lockHolders(path); len(pids) > 0 {
		holder = fmt.Sprintf("%s (pid %s)", who, joinPids(pids))
	}
	return fmt.Errorf("%w: %s is held by %s; gave up after %v: %w",
		ErrLocked, path, holder, waited.Round(time.Millisecond), err)
}

// joinPids lists process ids for a message.
func joinPids(pids []int) string {
	ps := make([]string, len(pids))
	for i, p := range pids {
		ps[i] = strconv.Itoa(p)
	}
	return strings.Join(ps, ", ")
}
