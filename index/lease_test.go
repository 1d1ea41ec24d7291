package index

import (
	"context"
	"errors"
	"testing"
	"time"
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
		if _, err := b.AcquireBlobLease(ctx, wait); !errors.Is(err, ErrSweepBusy) {
			t.Fatalf("lease while the sweep lock is held = %v, want ErrSweepBusy", err)
		}
		if waited := time.Since(start); waited < wait || waited > 4*time.Second {
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
		if _, err := b.AcquireSweepLock(ctx, wait); !errors.Is(err, ErrSweepBusy) {
			t.Fatalf("sweep lock while leases are held = %v, want ErrSweepBusy", err)
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
