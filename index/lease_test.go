package index

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
	"github.com/toolcas/toolcas/internal/pgtest"
)

// The sweep lock and blob leases exclude each other across sessions: a
// lease waits while another session holds the sweep lock and gives up with
// ErrSweepBusy at its deadline, and the sweep lock waits for every lease;
// leases share. On SQLite, whose store locks with a file, they take
// nothing.
func TestBlobLeases(t *testing.T) {
	ctx := context.Background()
	t.Run("postgres", func(t *testing.T) {
		url := newIndexPath(t)
		a, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		const wait = 300 * time.Millisecond
		sweep, err := a.AcquireSweepLock(ctx, wait)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := b.AcquireBlobLease(ctx, wait); !errors.Is(err, ErrSweepBusy) || !strings.Contains(err.Error(), "a write waited") {
			t.Fatalf("lease while the sweep lock is held = %v, want ErrSweepBusy saying a write waited", err)
		}
		// Not before its deadline; well after it only on a machine too
		// busy to say anything by the clock, or if it waited for the lock
		// regardless.
		if waited := time.Since(start); waited < wait || waited > wait+time.Minute {
			t.Errorf("the lease gave up after %v, want about %v", waited, wait)
		}
		// A lease asked for while the sweep lock is held gets it once the
		// lock is released.
		got := make(chan error, 1)
		go func() {
			l, err := b.AcquireBlobLease(ctx, 0)
			if err == nil {
				err = l.Held(ctx)
				defer l.Release()
			}
			got <- err
		}()
		if err := sweep.Release(); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("lease after the sweep lock's release: %v", err)
		}
		l1, err := a.AcquireBlobLease(ctx, wait)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := b.AcquireBlobLease(ctx, wait)
		if err != nil {
			t.Fatalf("a second lease beside the first: %v", err)
		}
		if _, err := b.AcquireSweepLock(ctx, wait); !errors.Is(err, ErrSweepBusy) || !strings.Contains(err.Error(), "gc waited") || !strings.Contains(err.Error(), "blob leases") {
			t.Fatalf("sweep lock while leases are held = %v, want ErrSweepBusy saying gc waited for the blob leases", err)
		}
		l1.Release()
		l2.Release()
		if err := l2.Release(); err != nil {
			t.Errorf("second Release = %v", err)
		}
		sweep, err = b.AcquireSweepLock(ctx, wait)
		if err != nil {
			t.Fatalf("sweep lock once the leases are released: %v", err)
		}
		sweep.Release()
	})
	t.Run("sqlite", func(t *testing.T) {
		x, err := Open(ctx, newIndexPath(t))
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		sweep, err := x.AcquireSweepLock(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		l, err := x.AcquireBlobLease(ctx, time.Second)
		if err != nil || l.Held(ctx) != nil || l.Release() != nil || sweep.Release() != nil {
			t.Errorf("SQLite's lease and sweep lock take nothing: %v", err)
		}
	})
}

// A gc trying for the sweep lock while a writer holds a lease never holds
// up other writers: a second lease is granted while gc is still trying
// (PostgreSQL would queue it behind a waiting exclusive request), and gc
// gets the lock once both are released.
func TestSweepLockDoesNotQueueWriters(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	w, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	g, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	l1, err := w.AcquireBlobLease(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	tried := make(chan struct{})
	var once sync.Once
	g.sweepTried = func() { once.Do(func() { close(tried) }) }
	swept := make(chan error, 1)
	go func() {
		sl, err := g.AcquireSweepLock(ctx, 0)
		if err == nil {
			err = sl.Release()
		}
		swept <- err
	}()
	<-tried
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l2, err := w.AcquireBlobLease(lctx, 0)
	if err != nil {
		t.Fatalf("a lease while gc tries for the sweep lock: %v", err)
	}
	select {
	case err := <-swept:
		t.Fatalf("gc got the sweep lock while leases were held: %v", err)
	default:
	}
	l1.Release()
	l2.Release()
	if err := <-swept; err != nil {
		t.Fatalf("the sweep lock once the leases were released: %v", err)
	}
}

// A sweep fence that gc set and did not clear (its sweep lock ended
// mid-sweep) holds a writer's lease back until it passes: a lease that may
// wait less fails with ErrSweepBusy, one that may wait longer returns once
// the fence has passed by the server's clock; a fence gc cleared holds
// nothing back.
func TestSweepFence(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	g, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sweep := func(window time.Duration, clear bool) {
		t.Helper()
		sl, err := g.AcquireSweepLock(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sl.DeleteUnreferenced(ctx, nil, time.Now(), time.Now(), window); err != nil {
			t.Fatal(err)
		}
		if clear {
			if err := sl.ClearFence(ctx); err != nil {
				t.Fatal(err)
			}
		}
		sl.Release()
	}
	sweep(time.Hour, false)
	if _, err := w.AcquireBlobLease(ctx, time.Second); !errors.Is(err, ErrSweepBusy) {
		t.Fatalf("a lease under an hour's fence = %v, want ErrSweepBusy", err)
	}
	sweep(time.Hour, true)
	l, err := w.AcquireBlobLease(ctx, time.Second)
	if err != nil {
		t.Fatalf("a lease once gc cleared its fence: %v", err)
	}
	l.Release()
	// A writer already waiting for the lock when gc sets the fence reads
	// the fence as committed once the lock is granted, not as it was when
	// it asked.
	sl, err := g.AcquireSweepLock(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		l, err := w.AcquireBlobLease(ctx, 5*time.Second)
		if err == nil {
			l.Release()
		}
		waited <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n int
		if err := g.db.QueryRow(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer did not wait for the sweep lock within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := sl.DeleteUnreferenced(ctx, nil, time.Now(), time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	sl.Release()
	if err := <-waited; !errors.Is(err, ErrSweepBusy) {
		t.Fatalf("a lease that waited while gc set an hour's fence = %v, want ErrSweepBusy", err)
	}
	const window = 500 * time.Millisecond
	sweep(window, false)
	start := time.Now()
	l, err = w.AcquireBlobLease(ctx, time.Minute)
	if err != nil {
		t.Fatalf("a lease that may wait past the fence: %v", err)
	}
	defer l.Release()
	if waited := time.Since(start); waited < window/2 {
		t.Errorf("the lease returned after %v, before the fence of %v passed", waited, window)
	}
	var left int64
	if err := g.db.QueryRow(`SELECT until_us - (extract(epoch FROM clock_timestamp()) * 1000000)::bigint FROM sweep_fence`).Scan(&left); err != nil || left > 0 {
		t.Errorf("the fence has %dµs left once the lease returned (%v)", left, err)
	}
}

// A commit under a blob lease whose session ended commits nothing and says
// the lease was lost.
func TestRecordChecksLease(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	x, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	l, err := x.AcquireBlobLease(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	lctx := WithBlobLease(ctx, l)
	p := NewPart{Key: "r/1_t_c.txt", Run: "r", Step: 1, Tool: "t", CallID: "c", Part: -1, Kind: catalog.KindText,
		MIME: "text/plain", Blob: cas.Blob{Digest: cas.Sum([]byte("a")), Ext: ".txt"}, Bytes: 1, Chars: 1}
	if _, err := x.Record(lctx, []NewPart{p}); err != nil {
		t.Fatalf("Record under a held lease: %v", err)
	}
	if _, err := x.db.Exec(`SELECT pg_terminate_backend(?)`, l.pid); err != nil {
		t.Fatal(err)
	}
	p.Key, p.Step = "r/2_t_c.txt", 2
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = x.Record(lctx, []NewPart{p})
		if err != nil || time.Now().After(deadline) {
			break
		}
		// The session ends a moment after it is told to: the row just
		// committed was under a lease still held. Undo it and try again.
		if _, err := x.db.Exec(`DELETE FROM parts WHERE step = 2`); err != nil {
			t.Fatal(err)
		}
	}
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Record under a lost lease = %v, want ErrLeaseLost", err)
	}
	var n int
	if err := x.db.QueryRow(`SELECT count(*) FROM parts WHERE step = 2`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows committed under the lost lease (%v)", n, err)
	}
}
