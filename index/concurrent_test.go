package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// Many goroutines write to one index at once (keys every writer uses, so
// versions race, and a blob they all share) while others prune a scratch
// run, delete its unused blob rows as gc does, and read. No error reaches any
// of them, and every row is there afterwards.
func TestManyGoroutines(t *testing.T) { forEachBackend(t, testManyGoroutines) }

func testManyGoroutines(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	writers, batches := 12, 25
	if testing.Short() {
		writers, batches = 6, 10
	}
	var (
		wg   sync.WaitGroup
		stop = make(chan struct{})
		errs = make(chan error, writers+8)
	)
	for w := range writers {
		wg.Go(func() {
			for n := range batches {
				run := fmt.Sprint("w", w)
				batch := []NewPart{
					newPart(run, n, "t", fmt.Sprint("c", n), fmt.Sprintf("own %d %d", w, n)),
					newPart("shared", 0, "t", "same", fmt.Sprint("shared content ", n%3)),
					newPart("common", n, "t", fmt.Sprint("p", w), "the same bytes everywhere"),
					// Pruned and its blob rows deleted while writers use the
					// same bytes again: the foreign key from a part to its blob
					// fails the write or the delete if they ever interleave.
					newPart("scratch", w*batches+n, "t", "s", fmt.Sprint("scratch ", n%4)),
				}
				if _, err := x.Record(ctx, batch); err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	var bg sync.WaitGroup
	loop := func(f func() error) {
		bg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := f(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	loop(func() error {
		_, err := x.Prune(ctx, PruneOptions{Run: "scratch"})
		return err
	})
	loop(func() error {
		unrefs, err := x.UnreferencedBlobs(ctx)
		if err != nil {
			return err
		}
		for _, u := range unrefs {
			if _, err := x.DeleteUnreferenced(ctx, []cas.Blob{u.Blob}, time.Now().Add(time.Hour)); err != nil {
				return err
			}
		}
		return nil
	})
	loop(func() error {
		if _, err := x.Stats(ctx, ""); err != nil {
			return err
		}
		if _, err := x.List(ctx, ListOptions{Run: "shared", AllVersions: true}); err != nil {
			return err
		}
		_, err := x.Resolve(ctx, Ref{Kind: RefKey, Key: "shared/0_t_same.txt", text: "shared/0_t_same.txt"}, "")
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		return nil
	})
	wg.Wait()
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	for w := range writers {
		ps, err := x.List(ctx, ListOptions{Run: fmt.Sprint("w", w)})
		if err != nil || len(ps) != batches {
			t.Errorf("writer %d: %d own parts, %v; want %d", w, len(ps), err, batches)
		}
	}
	vs, err := x.Versions(ctx, "shared/0_t_same.txt")
	if err != nil {
		t.Fatal(err)
	}
	var nums []int
	for _, v := range vs {
		nums = append(nums, v.Version)
	}
	slices.Sort(nums)
	for i, n := range nums {
		if n != i+1 {
			t.Fatalf("versions of the shared key = %v, want 1..%d", nums, writers*batches)
		}
	}
	if len(nums) != writers*batches {
		t.Errorf("%d versions of the shared key, want %d", len(nums), writers*batches)
	}
	checkOneRowPerBlob(t, x)
}

// checkOneRowPerBlob fails the test if a blob (digest and extension) has
// more than one row: no unique index keeps it to one, the writers do.
func checkOneRowPerBlob(t *testing.T, x *Index) {
	t.Helper()
	var twice []struct {
		Digest []byte `db:"digest"`
		Ext    string `db:"ext"`
		N      int    `db:"n"`
	}
	if err := x.db.SelectContext(context.Background(), &twice, `SELECT digest, ext, count(*) AS n FROM blobs
		GROUP BY digest, ext HAVING count(*) > 1`); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := x.db.GetContext(context.Background(), &rows, `SELECT count(*) FROM blobs`); err != nil || rows == 0 {
		t.Fatalf("%d blob rows (%v): the check sees nothing", rows, err)
	}
	for _, r := range twice {
		t.Errorf("blob %x%s has %d rows", r.Digest, r.Ext, r.N)
	}
}
