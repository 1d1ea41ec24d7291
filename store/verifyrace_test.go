package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
)

// textsInShard returns n texts whose blobs fall in shard sh, each starting
// with prefix.
func textsInShard(sh byte, prefix string, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		text := fmt.Sprintf("%s %d", prefix, i)
		if cas.Sum([]byte(text))[0] == sh {
			out = append(out, text)
		}
	}
	return out
}

// holdVerify returns an option that holds a store's verify once, where
// the walk has listed shard sh's files and verify is about to read that
// shard's rows: held is closed then, and verify goes on once release is
// closed.
func holdVerify(t *testing.T, sh byte) (opt Option, held <-chan struct{}, release func()) {
	h, r := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	release = func() { released.Do(func() { close(r) }) }
	t.Cleanup(release) // a test that fails while verify is held lets it go
	point := fmt.Sprintf("verify:rows/%02x", sh)
	return withFaults(func(p string) error {
		if p == point {
			once.Do(func() {
				close(h)
				<-r
			})
		}
		return nil
	}), h, release
}

// TestVerifyDuringPruneAndGC holds verify where its walk has listed a
// shard's files and it has not read that shard's rows yet, and meanwhile,
// through another store on the same directory (as another process would):
// prunes a run and collects its blobs, listed by the walk, with no grace
// period; writes a new blob into the shard, which the walk did not list
// and whose row verify then reads; and writes again the content of a blob
// pruned before verify began, whose row verify took for unused. A blob gc
// removes legitimately is not damage, nor is one written since the walk:
// verify reports nothing missing or corrupt, and no blob a row uses as an
// orphan. On SQLite and on PostgreSQL.
func TestVerifyDuringPruneAndGC(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			const sh = 0x5a
			texts := textsInShard(sh, "verify race", 6)
			opt, held, release := holdVerify(t, sh)
			s := MustOpen(t, opt)
			// Other content, in other shards, so that gc removes a small
			// share of the store.
			for i := range 12 {
				mustWrite(t, s, item("other", i, fmt.Sprintf("elsewhere %d", i)))
			}
			gone := mustWrite(t, s, item("old", 1, texts[0]), item("old", 2, texts[1]))
			kept := mustWrite(t, s, item("keep", 1, texts[2]))
			mustWrite(t, s, item("revived", 1, texts[3]))
			if _, err := s.Prune(ctx, PruneOptions{Run: "revived"}); err != nil {
				t.Fatal(err)
			}
			for _, st := range append(append([]hook.Stored{}, gone...), kept...) {
				if b := blobOf(t, s, st); b.Digest[0] != sh {
					t.Fatalf("%s is in shard %02x, want %02x", st.Key, b.Digest[0], sh)
				}
			}
			other, err := Open(ctx, s.Dir())
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()

			type verified struct {
				res VerifyResult
				err error
			}
			done := make(chan verified, 1)
			go func() {
				res, err := s.Verify(ctx, VerifyOptions{})
				done <- verified{res, err}
			}()
			select {
			case <-held:
			case v := <-done:
				t.Fatalf("verify ended (%+v, %v) without reading shard %02x's rows", v.res, v.err, sh)
			}
			// The walk has listed the shard: what follows happens between
			// its listing and verify's read of the shard's rows.
			revived := mustWrite(t, other, item("revived-again", 1, texts[3]))
			if !revived[0].Dedup {
				t.Fatalf("writing a pruned blob's content again = %+v, want a dedup hit", revived[0])
			}
			written := mustWrite(t, other, item("new", 1, texts[4]))
			if _, err := other.Prune(ctx, PruneOptions{Run: "old"}); err != nil {
				t.Fatal(err)
			}
			gc, err := other.GC(ctx, GCOptions{Grace: 0})
			if err != nil || gc.RemovedBlobs != len(gone) {
				t.Fatalf("gc while verify was held = %+v, %v; want the %d blobs of the pruned run removed", gc, err, len(gone))
			}
			for _, st := range gone {
				if _, err := os.Stat(st.Path); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("%s after gc: %v; want it removed", st.Path, err)
				}
			}
			release()
			v := <-done
			if v.err != nil {
				t.Fatal(v.err)
			}
			res := v.res
			if !res.OK || len(res.Missing) > 0 || len(res.Corrupt) > 0 {
				t.Errorf("verify during prune and gc: ok=%v, missing %v, corrupt %v", res.OK, res.Missing, res.Corrupt)
			}
			for _, st := range []hook.Stored{kept[0], revived[0], written[0]} {
				b := blobOf(t, s, st)
				if slices.ContainsFunc(res.Orphans, func(p Problem) bool { return p.Blob == b }) {
					t.Errorf("verify calls %s's blob, which a row uses, an orphan", st.Key)
				}
			}
			// Verify again, with nothing under way: all whole.
			again, err := s.Verify(ctx, VerifyOptions{})
			if err != nil || !again.OK || len(again.Orphans) > 0 || again.Checked != 12+3 {
				t.Errorf("verify after = ok %v, checked %d, orphans %v, %v; want ok, 15 checked, no orphans", again.OK, again.Checked, again.Orphans, err)
			}
		})
	}
}

// TestVerifyDuringPruneAndGCProcesses runs verify a few times while writer
// processes write, read back and prune their older runs and a gc process
// collects with no grace period; each verify is held, once its walk has
// listed a shard, until gc has run twice more, so that a whole gc run and
// the writers' work fall inside it. No verify run may report anything
// missing or corrupt.
func TestVerifyDuringPruneAndGCProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("TestVerifyDuringPruneAndGC forces the interleavings; this one adds processes")
	}
	ctx := context.Background()
	var holdMu sync.Mutex
	var hold func()
	s := MustOpen(t, withFaults(func(p string) error {
		if p == "verify:rows/80" {
			holdMu.Lock()
			h := hold
			holdMu.Unlock()
			if h != nil {
				h()
			}
		}
		return nil
	}))
	r := newRaceChildren(t)
	gc := startChild(t, "gc", append([]string{s.Dir(), "lock"}, r.gcArgs()...)...)
	// The writers stop once told, as gc does.
	writerArgs := []string{fmt.Sprint(raceDeadline.Milliseconds()), "lock", r.stop}
	var writers []*exec.Cmd
	for w := range 4 {
		writers = append(writers, startChild(t, "racer", append([]string{s.Dir(), fmt.Sprint(w)}, writerArgs...)...))
	}
	const runs = 4
	for i := range runs {
		holdMu.Lock()
		hold = func() { waitRuns(t, r.runs, fileSize(r.runs)+2) }
		holdMu.Unlock()
		res, err := s.Verify(ctx, VerifyOptions{})
		if err != nil {
			t.Fatalf("verify run %d: %v", i+1, err)
		}
		if !res.OK || len(res.Missing) > 0 || len(res.Corrupt) > 0 {
			t.Errorf("verify run %d during prune and gc: ok=%v, missing %v, corrupt %v", i+1, res.OK, res.Missing, res.Corrupt)
		}
	}
	r.stopGC(t)
	for i, w := range append(writers, gc) {
		if err := waitExit(t, w, time.Minute); err != nil {
			t.Fatalf("child %d: %v: %s", i, err, w.Stdout)
		}
	}
	t.Logf("%d verify runs against 4 writers pruning and gc sweeping, each across 2 gc runs: none called the store damaged", runs)
}

// waitRuns polls, with a deadline, until the runs file counts n runs.
func waitRuns(t *testing.T, runs string, n int64) {
	deadline := time.Now().Add(raceDeadline)
	for fileSize(runs) < n {
		if time.Now().After(deadline) {
			t.Errorf("%s counts %d runs after %v, want %d", filepath.Base(runs), fileSize(runs), raceDeadline, n)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
