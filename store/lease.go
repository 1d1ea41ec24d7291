package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// A leaser gives a shared store's writes their blob leases and gc its
// sweep lock (see gc_shared.go): indexLeases, in the shared index.
type leaser interface {
	// blobLease takes a lease for one write, waiting at most wait for gc's
	// batch to end; the context it returns carries the lease, so that a
	// commit under it checks the lease still holds (index.WithBlobLease).
	// release reports whether the lease held until then.
	blobLease(ctx context.Context, wait time.Duration) (lctx context.Context, release func() error, err error)
	// sweepLock takes the sweep lock for one batch of gc's deletes.
	sweepLock(ctx context.Context, wait time.Duration) (sweepLock, error)
}

// A sweepLock is held by gc for a batch of deletes (index.SweepLock).
type sweepLock interface {
	// DeleteUnreferenced deletes, in the lock's session, the rows of blobs
	// still unused and older than cutoff, and sets the sweep fence window
	// past the server's clock.
	DeleteUnreferenced(ctx context.Context, blobs []cas.Blob, cutoff, now time.Time, window time.Duration) ([]cas.Blob, error)
	Held(ctx context.Context) error
	ClearFence(ctx context.Context) error
	Release() error
}

// indexLeases are the leases and sweep locks of the shared index.
type indexLeases struct{ ix *index.Index }

func (l indexLeases) blobLease(ctx context.Context, wait time.Duration) (context.Context, func() error, error) {
	lease, err := l.ix.AcquireBlobLease(ctx, wait)
	if err != nil {
		return nil, nil, err
	}
	return index.WithBlobLease(ctx, lease), lease.Release, nil
}

func (l indexLeases) sweepLock(ctx context.Context, wait time.Duration) (sweepLock, error) {
	return l.ix.AcquireSweepLock(ctx, wait)
}

// leaseRetries is how many times a write puts its blobs again under a
// new lease when its commit found the lease lost.
const leaseRetries = 3

// takeLease takes a blob lease for one write, waiting at most the store's
// lock timeout for gc's batch to end. It returns ctx carrying the lease
// and the function that releases the lease, once however often it is
// called, and says whether the lease still held until then: a shared
// advisory lock is released only by its unlock or by the end of its
// session, so an unlock that succeeds shows the lease held throughout, and
// one that fails (the session is gone) that it may not have.
func (e *sharedEngine) takeLease(ctx context.Context) (context.Context, func() error, error) {
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	lctx, release, err := e.leases.blobLease(ctx, e.lockTimeout)
	if err != nil {
		<-e.slots
		if errors.Is(err, index.ErrSweepBusy) {
			return nil, nil, fmt.Errorf("%w: %w", ErrLocked, err)
		}
		return nil, nil, err
	}
	var once sync.Once
	return lctx, func() error {
		once.Do(func() { <-e.slots })
		return release()
	}, nil
}

// guard runs one write on an object store: put stores the blobs, and
// commit records their rows, both under one blob lease. The commit checks
// in its transaction that the lease still holds; when it does not, nothing
// is committed and put and commit run again under a new lease, so that
// the rows committed name objects gc has not removed. When the lease turns
// out lost after the commit too, put runs again under a new lease.
func (e *sharedEngine) guard(ctx context.Context, put func(context.Context) ([]cas.PutResult, error), commit func(context.Context) error) error {
	var release func() error
	for try := 0; ; try++ {
		lctx, rel, err := e.takeLease(ctx)
		if err != nil {
			return err
		}
		release = rel
		if _, err := put(ctx); err != nil {
			release()
			return err
		}
		if err := fault(e, "write:record"); err != nil {
			release()
			return err
		}
		err = commit(lctx)
		if errors.Is(err, index.ErrLeaseLost) && try < leaseRetries {
			// Nothing committed: gc may have removed an object the put
			// found. Put again under a new lease.
			release()
			continue
		}
		if err != nil {
			release()
			return err
		}
		break
	}
	defer release()
	fault(e, "write:committed")
	lost := fault(e, "lease:held")
	if lost == nil {
		lost = release()
	}
	if lost == nil {
		return nil
	}
	return e.putAgain(ctx, put, lost)
}

// putAgain puts a write's blobs again under a new lease, once its rows
// are committed, when the lease it committed under may have ended before
// the commit: gc may have removed an object that the put found, before the
// row named it.
func (e *sharedEngine) putAgain(ctx context.Context, put func(context.Context) ([]cas.PutResult, error), lost error) error {
	wctx := context.WithoutCancel(ctx)
	_, release, err := e.takeLease(wctx)
	if err != nil {
		return fmt.Errorf("the rows are committed but the blob lease was lost (%v), and a new one failed (run casctl verify): %w", lost, err)
	}
	defer release()
	if _, err := put(wctx); err != nil {
		return fmt.Errorf("the rows are committed but the blob lease was lost (%v), and putting the blobs again failed (run casctl verify): %w", lost, err)
	}
	return nil
}
