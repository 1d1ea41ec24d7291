package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/toolcas/toolcas/hook"
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

// Poll intervals of the lock waits: flock has no wait with a deadline.
const (
	sharedPoll    = 5 * time.Millisecond
	exclusivePoll = 10 * time.Millisecond
)

// sharedLock takes the writers' side of gc.lock: many writers at once, none
// while gc sweeps. It is held from the first blob written to the row
// committed, and never while a writer waits for its content. A writer waits
// while gc holds gc.intent, and gives up with ErrLocked at the caller's
// deadline or the store's lock timeout, whichever comes first.
func (s *Store) sharedLock(ctx context.Context) (func(), error) {
	if s.noLock {
		return func() {}, nil
	}
	start := time.Now()
	ctx, cancel := withLockDeadline(ctx, s.lockTimeout)
	defer cancel()
	var opts []flock.Option
	if s.readOnly {
		// Verify's second look, on a store opened read-only: lock the files
		// if they are there, create nothing.
		opts = append(opts, flock.SetFlag(os.O_RDONLY))
	}
	intent := flock.New(s.intent, opts...)
	if _, err := intent.TryRLockContext(ctx, sharedPoll); err != nil {
		intent.Close()
		return nil, lockedError(s.intent, "gc", err, time.Since(start))
	}
	l := flock.New(s.lock, opts...)
	_, err := l.TryRLockContext(ctx, sharedPoll)
	intent.Unlock()
	intent.Close()
	if err != nil {
		l.Close()
		return nil, lockedError(s.lock, "gc", err, time.Since(start))
	}
	return func() { l.Unlock(); l.Close() }, nil
}

// exclusiveLock takes gc's side: gc.intent first, so that no new writer
// starts, then gc.lock once the writes under way are done.
func (s *Store) exclusiveLock(ctx context.Context, timeout time.Duration) (func(), error) {
	if s.noLock {
		return func() {}, nil
	}
	start := time.Now()
	ctx, cancel := withLockDeadline(ctx, timeout)
	defer cancel()
	intent := flock.New(s.intent)
	if s.noIntent {
		intent = flock.New(s.intent + ".unused")
	}
	if _, err := intent.TryLockContext(ctx, exclusivePoll); err != nil {
		intent.Close()
		return nil, lockedError(s.intent, "another gc", err, time.Since(start))
	}
	l := flock.New(s.lock)
	if _, err := l.TryLockContext(ctx, exclusivePoll); err != nil {
		l.Close()
		intent.Unlock()
		intent.Close()
		return nil, lockedError(s.lock, "a writer", err, time.Since(start))
	}
	return func() {
		l.Unlock()
		l.Close()
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
		return fmt.Errorf("store: lock %s: %w", path, err)
	}
	holder := who
	if pids := lockHolders(path); len(pids) > 0 {
		ps := make([]string, len(pids))
		for i, p := range pids {
			ps[i] = strconv.Itoa(p)
		}
		holder = fmt.Sprintf("%s (pid %s)", who, strings.Join(ps, ", "))
	}
	return fmt.Errorf("store: %w: %s is held by %s; gave up after %v: %w",
		ErrLocked, path, holder, waited.Round(time.Millisecond), err)
}

// lockHolders lists the processes other than this one holding a flock on
// path, from /proc/locks; it is empty where that cannot be known.
func lockHolders(path string) []int {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil
	}
	defer f.Close()
	ino := strconv.FormatUint(uint64(st.Ino), 10)
	var pids []int
	seen := map[int]bool{os.Getpid(): true}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 fe:00:9986097 0 EOF"; waiters
		// have "->" after the number.
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" {
			continue
		}
		dev := strings.Split(fields[5], ":")
		if len(dev) != 3 || dev[2] != ino {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || seen[pid] {
			continue
		}
		seen[pid] = true
		pids = append(pids, pid)
	}
	return pids
}

// lockPaths returns the lock files of a store root.
func lockPaths(dir string) (lock, intent string) {
	return filepath.Join(dir, LockFile), filepath.Join(dir, IntentFile)
}
