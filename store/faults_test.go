package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
)

// TestGCFailsClosed injects an error at each point where gc lists rows or
// files: nothing may be deleted, and the error says so.
func TestGCFailsClosed(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, point string
		// ahead fails the read of one shard's rows only, the shard after a
		// garbage blob's, which gc may read ahead, in another goroutine,
		// while it sorts the garbage blob's shard.
		ahead bool
	}{
		{"gc:referenced", "gc:referenced/", false},
		{"gc:referenced one later shard", "gc:referenced/", true},
		{"gc:walk", "gc:walk", false},
		{"gc:unreferenced", "gc:unreferenced", false},
		{"gc:sweep", "gc:sweep", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken := errors.New("injected listing failure")
			fail := false
			var mu sync.Mutex
			point := tc.point
			s := MustOpen(t, withFaults(func(p string) error {
				mu.Lock()
				defer mu.Unlock()
				if fail && strings.HasPrefix(p, point) {
					return broken
				}
				return nil
			}))
			keep := mustWrite(t, s, item("keep", 1, "kept"))
			garbage := mustWrite(t, s, item("junk", 1, "garbage one"), item("junk", 2, "garbage two"))
			os.WriteFile(filepath.Join(s.Dir(), "blobs", "00", ".tmp-old"), []byte("x"), 0o644)
			if _, err := s.Prune(ctx, PruneOptions{Run: "junk"}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			fail = true
			if tc.ahead {
				sh := blobOf(t, s, garbage[0]).Digest[0]
				if sh == 0xff {
					sh = blobOf(t, s, garbage[1]).Digest[0]
				}
				point = fmt.Sprintf("%s%02x", point, sh+1)
			}
			mu.Unlock()
			res, err := s.GC(ctx, GCOptions{Grace: 0})
			if !errors.Is(err, broken) || !strings.Contains(err.Error(), "nothing deleted") {
				t.Fatalf("GC = %+v, %v; want the injected error, saying nothing was deleted", res, err)
			}
			for _, st := range append(keep, garbage...) {
				if _, err := os.Stat(st.Path); err != nil {
					t.Errorf("%s deleted by a failed gc: %v", st.Key, err)
				}
			}
			if _, err := os.Stat(filepath.Join(s.Dir(), "blobs", "00", ".tmp-old")); err != nil {
				t.Error("temp file deleted by a failed gc")
			}
			for _, st := range garbage {
				if _, err := s.ix.Blob(ctx, blobOf(t, s, st)); err != nil {
					t.Errorf("blob row of %s deleted by a failed gc: %v", st.Key, err)
				}
			}
			// Once the failure is gone, gc does its work.
			mu.Lock()
			fail = false
			mu.Unlock()
			res, err = s.GC(ctx, GCOptions{Grace: 0})
			if err != nil || res.RemovedBlobs != 2 || res.RemovedTemp != 1 {
				t.Errorf("GC after the failure = %+v, %v; want 2 blobs and a temp file removed", res, err)
			}
		})
	}
}

// TestGCFailsAfterRowsDeleted: gc fails once its rows' delete has
// committed and before it unlinks their files. The rows are gone, the files
// stay: verify calls them orphans and nothing missing, and the next gc
// removes them.
func TestGCFailsAfterRowsDeleted(t *testing.T) {
	ctx := context.Background()
	broken := errors.New("injected failure after the delete")
	var mu sync.Mutex
	fail := false
	s := MustOpen(t, withFaults(func(p string) error {
		mu.Lock()
		defer mu.Unlock()
		if fail && p == "gc:rows-deleted" {
			fail = false
			return broken
		}
		return nil
	}))
	keep := mustWrite(t, s, item("keep", 1, "kept"))
	garbage := mustWrite(t, s, item("junk", 1, "garbage one"), item("junk", 2, "garbage two"))
	if _, err := s.Prune(ctx, PruneOptions{Run: "junk"}); err != nil {
		t.Fatal(err)
	}
	blobs := map[cas.Blob]bool{}
	for _, st := range garbage {
		blobs[blobOf(t, s, st)] = true
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	if res, err := s.GC(ctx, GCOptions{Grace: 0}); !errors.Is(err, broken) {
		t.Fatalf("GC = %+v, %v; want the injected error", res, err)
	}
	for b := range blobs {
		if _, err := s.ix.Blob(ctx, b); !errors.Is(err, index.ErrNotFound) {
			t.Errorf("row of %s: %v; want it deleted before the failure", b, err)
		}
	}
	for _, st := range append(keep, garbage...) {
		if _, err := os.Stat(st.Path); err != nil {
			t.Errorf("%s: %v; want the file kept by the failed gc", st.Key, err)
		}
	}
	v, err := s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orphans := 0
	for _, o := range v.Orphans {
		if blobs[o.Blob] {
			orphans++
		}
	}
	if !v.OK || len(v.Missing) != 0 || orphans != len(blobs) {
		t.Errorf("verify = OK %v, missing %v, orphans %v; want OK, nothing missing, the %d garbage blobs orphans", v.OK, v.Missing, v.Orphans, len(blobs))
	}
	res, err := s.GC(ctx, GCOptions{Grace: 0})
	if err != nil || res.RemovedBlobs != len(blobs) {
		t.Errorf("the next GC = %+v, %v; want the %d orphans removed", res, err, len(blobs))
	}
	for _, st := range garbage {
		if _, err := os.Stat(st.Path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v; want its file gone after the next gc", st.Key, err)
		}
	}
	if _, err := os.Stat(keep[0].Path); err != nil {
		t.Errorf("kept blob: %v", err)
	}
}

// TestCorruptionFixtures damages a store every way docs/design.md names; verify
// reports each, reads of damaged blobs fail cleanly, and the rest works.
func TestCorruptionFixtures(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, s *Store, st hook.Stored)
		report func(VerifyResult) []Problem
		reason string
	}{
		{"flipped byte", func(t *testing.T, s *Store, st hook.Stored) {
			damage(t, st.Path, func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b })
		}, corrupt, "content hashes to"},
		{"truncated", func(t *testing.T, s *Store, st hook.Stored) {
			damage(t, st.Path, func(b []byte) []byte { return b[:len(b)-1] })
		}, corrupt, "truncated"},
		{"zero length", func(t *testing.T, s *Store, st hook.Stored) {
			damage(t, st.Path, func(b []byte) []byte { return nil })
		}, corrupt, "truncated: 0 of"},
		{"deleted", func(t *testing.T, s *Store, st hook.Stored) {
			os.Remove(st.Path)
		}, missing, "missing"},
		{"directory where the blob should be", func(t *testing.T, s *Store, st hook.Stored) {
			os.Remove(st.Path)
			os.Mkdir(st.Path, 0o755)
		}, corrupt, "directory"},
		{"symbolic link where the blob should be", func(t *testing.T, s *Store, st hook.Stored) {
			os.Remove(st.Path)
			outside := filepath.Join(t.TempDir(), "x")
			os.WriteFile(outside, []byte("outside"), 0o644)
			os.Symlink(outside, st.Path)
		}, corrupt, "symbolic link"},
		{"blob under the wrong name", func(t *testing.T, s *Store, st hook.Stored) {
			other, _ := os.ReadFile(filepath.Join(s.Dir(), "other.txt"))
			damage(t, st.Path, func([]byte) []byte { return other })
		}, corrupt, "misnamed"},
		{"stray temp file", func(t *testing.T, s *Store, st hook.Stored) {
			os.WriteFile(filepath.Join(filepath.Dir(st.Path), ".tmp-crash"), []byte("half"), 0o644)
		}, func(r VerifyResult) []Problem { return r.Temp }, "temp file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := MustOpen(t)
			st := mustWrite(t, s, item("r", 1, strings.Repeat("victim ", 50)), item("r", 2, strings.Repeat("bystander ", 50)))
			other := mustWrite(t, s, item("r", 3, strings.Repeat("victim ", 49)))
			data, _ := os.ReadFile(other[0].Path)
			os.WriteFile(filepath.Join(s.Dir(), "other.txt"), data, 0o644)
			tc.damage(t, s, st[0])
			res, err := s.Verify(ctx, VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ps := tc.report(res)
			if len(ps) != 1 || !strings.Contains(ps[0].Reason, tc.reason) {
				t.Fatalf("verify reported %+v, want one problem saying %q (whole result %+v)", ps, tc.reason, res)
			}
			if tc.reason != "temp file" {
				if res.OK {
					t.Error("verify says OK")
				}
				if c, err := s.Read(ctx, "r", st[0].Key); err == nil {
					t.Errorf("read of the damaged blob returned %d bytes", len(c.Data))
				}
			}
			if c, err := s.Read(ctx, "r", st[1].Key); err != nil || !strings.HasPrefix(string(c.Data), "bystander") {
				t.Errorf("intact part: %v", err)
			}
			if _, err := s.Write(ctx, []hook.Item{item("r", 9, "after the damage")}); err != nil {
				t.Errorf("write after the damage: %v", err)
			}
		})
	}
}

func corrupt(r VerifyResult) []Problem { return r.Corrupt }
func missing(r VerifyResult) []Problem { return r.Missing }

// TestDamagedIndex overwrites pages of the index database: opening it or
// verifying it reports the damage; the blobs are untouched.
func TestDamagedIndex(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	var items []hook.Item
	for i := range 300 {
		items = append(items, item("r", i, fmt.Sprintf("part %d %s", i, strings.Repeat("x", i))))
	}
	st := mustWrite(t, s, items...)
	s.Checkpoint(ctx)
	s.Close()
	db := filepath.Join(dir, IndexFile)
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	// Scribble over every page but the first (the header), as a bad sector
	// or a stray write would.
	for off := 4096 + 100; off < len(b); off += 4096 {
		copy(b[off:], strings.Repeat("\xde\xad", 200))
	}
	os.WriteFile(db, b, 0o644)
	s, err = Open(ctx, dir)
	if err != nil {
		t.Logf("open of the damaged index: %v", err)
		if !strings.Contains(err.Error(), "malformed") && !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("open of a damaged index: %v, want it to say the database is damaged", err)
		}
	} else {
		res, err := s.Verify(ctx, VerifyOptions{})
		t.Logf("verify of the damaged index: %v; problems %q", err, res.IndexProblems)
		if err == nil && res.OK {
			t.Error("verify finds nothing wrong with a damaged index")
		}
		s.Close()
	}
	// The blobs are whole.
	c, err := cas.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, x := range st[:5] {
		if err := c.Verify(ctx, cas.Blob{Digest: x.Digest, Ext: ".txt"}); err != nil {
			t.Errorf("blob %s: %v", x.Key, err)
		}
	}
}

// TestDiskFull fills a small tmpfs: the write that hits ENOSPC leaves no
// blob, no row and no temp file, and says the disk is full; once space
// returns, writes succeed. It needs to mount a tmpfs (root on Linux); the
// cas package tests the same with an injected writer everywhere.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; cas.TestDiskFull injects the failure instead")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); cas.TestDiskFull injects the failure instead", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(mnt, "store"), WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	small := mustWrite(t, s, item("r", 1, "fits"))
	before, _ := s.Stats(ctx, "")
	for _, tc := range []struct {
		name  string
		write func() error
	}{
		{"stream", func() error {
			_, err := s.Put(ctx, StreamPart{Key: hook.Key{Run: "r", Step: 2, Tool: "big", CallID: "c", Part: -1}}, genReader(99, 3<<20))
			return err
		}},
		{"batch", func() error {
			_, err := s.Write(ctx, []hook.Item{item("r", 3, string(content(98, 900_000))), item("r", 4, string(content(97, 900_000))), item("r", 5, string(content(96, 900_000)))})
			return err
		}},
	} {
		err := tc.write()
		if err == nil {
			t.Fatalf("%s: a write larger than the disk succeeded", tc.name)
		}
		if !errors.Is(err, cas.ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("%s: %v, want an error saying the disk is full", tc.name, err)
		}
		after, _ := s.Stats(ctx, "")
		if after.Parts != before.Parts {
			t.Errorf("%s: %d rows after the failed write, want %d", tc.name, after.Parts, before.Parts)
		}
		res, err := s.Verify(ctx, VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Temp) > 0 || len(res.Orphans) > 0 || !res.OK {
			t.Errorf("%s: after the failed write: temp %v, orphans %v, ok %v", tc.name, res.Temp, res.Orphans, res.OK)
		}
	}
	// Space returns.
	if out, err := exec.Command("mount", "-o", "remount,size=16m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	res, err := s.Put(ctx, StreamPart{Key: hook.Key{Run: "r", Step: 2, Tool: "big", CallID: "c", Part: -1}}, genReader(99, 3<<20))
	if err != nil {
		t.Fatalf("write once space returned: %v", err)
	}
	if c, err := s.Read(ctx, "r", res.Key); err != nil || checkContent(c.Data) != nil {
		t.Errorf("read back: %v", err)
	}
	if c, err := s.Read(ctx, "r", small[0].Key); err != nil || string(c.Data) != "fits" {
		t.Errorf("the part written before: %v", err)
	}
}

// TestDiskFullGCAndPrune fills a tmpfs to its last byte: opened for
// maintenance (as casctl gc and prune do), the store releases its reserve
// file, prune and gc run and free the space, the reserve comes back at its
// size, and writes work again. It does so for a store whose reserve is at
// its floor (a small index; a prune of a run of 32 parts) and for one at
// its cap (an index of over 8 MiB; a prune of a sixteenth of its runs,
// 1,300 parts, in one transaction). It needs root to mount the tmpfs.
func TestDiskFullGCAndPrune(t *testing.T) {
	for _, tc := range []struct {
		name, tmpfs      string
		runs, parts, len int // runs of parts of len bytes each
		prune            int // the oldest runs pruned at once
		reserve          int64
		// tooSmall, when set, is a reserve with which the same prune fails
		// on the full disk, losing nothing.
		tooSmall int64
	}{
		{"floor", "8m", 8, 32, 16 << 10, 1, MinReserve, 0},
		{"cap", "160m", 220, 100, 1000, 220 / 16, DefaultReserve, MinReserve},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.tooSmall > 0 {
				// 22,000 parts to make an index of over 8 MiB: minutes
				// under the race detector.
				t.Skip("a store at the reserve's cap takes minutes to fill; run without -short")
			}
			mnt := mountTmpfs(t, tc.tmpfs)
			ctx := context.Background()
			dir := filepath.Join(mnt, "store")
			c := &clock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			s, err := Open(ctx, dir, WithCreate(), WithClock(c.now), WithDurability(cas.SyncNone))
			if err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(filepath.Join(dir, ReserveFile)); err != nil || fi.Size() != MinReserve {
				t.Fatalf("a new store's reserve: %v, %v; want %d bytes", fi, err, MinReserve)
			}
			var before time.Time
			for r := range tc.runs {
				if r == tc.prune {
					before = c.t
				}
				items := make([]hook.Item, tc.parts)
				for i := range items {
					items[i] = hook.Item{Key: hook.Key{Run: fmt.Sprintf("astropy__astropy-%05d", r), Step: i, Tool: "bash",
						CallID: fmt.Sprintf("call_00_%05d_%05d_abcdefghijklmnopqrstu", r, i), Part: -1, Ext: ".txt"},
						Part: hook.Text(string(content(uint64(r<<20|i), tc.len)))}
				}
				mustWrite(t, s, items...)
				c.t = c.t.Add(time.Minute)
			}
			keep := mustWrite(t, s, item("keep", 1, "kept through it all"))
			s.Close()
			// The next open makes the reserve at the index's size.
			if s, err = Open(ctx, dir, WithClock(c.now)); err != nil {
				t.Fatal(err)
			}
			s.Close()
			ixBytes := indexFileBytes(dir)
			if fi, err := os.Stat(filepath.Join(dir, ReserveFile)); err != nil || fi.Size() != tc.reserve {
				t.Fatalf("the reserve of an index of %d bytes: %v, %v; want %d bytes", ixBytes, fi, err, tc.reserve)
			}
			if tc.tooSmall > 0 {
				// A reserve smaller than one transaction of the whole
				// prune: the prune goes in batches, each within it.
				if err := os.Truncate(reservePath(dir), tc.tooSmall); err != nil {
					t.Fatal(err)
				}
				fillDisk(t, filepath.Join(mnt, "filler"))
				m, err := Open(ctx, dir, Maintenance(), WithClock(c.now), WithReserve(tc.tooSmall))
				if err != nil {
					t.Fatalf("open for maintenance at 0 bytes free: %v", err)
				}
				pr, err := m.Prune(ctx, PruneOptions{Before: before})
				if want := int64(tc.prune * tc.parts); err != nil || pr.RemovedParts != want {
					t.Fatalf("prune at 0 bytes free with a reserve of %d: %+v, %v; want %d parts removed, in batches",
						tc.tooSmall, pr, err, want)
				}
				if st, err := m.Stats(ctx, ""); err != nil || st.Parts != int64((tc.runs-tc.prune)*tc.parts+1) {
					t.Errorf("after the prune: %d parts, %v; want %d", st.Parts, err, (tc.runs-tc.prune)*tc.parts+1)
				}
				res, err := m.GC(ctx, GCOptions{Grace: 0})
				if err != nil || int64(res.RemovedBlobs) != pr.RemovedParts {
					t.Fatalf("gc on the full disk after the batched prune: %+v, %v", res, err)
				}
				m.Close()
				// The space gc freed makes the reserve again, at its size.
				if s, err = Open(ctx, dir, WithClock(c.now)); err != nil {
					t.Fatal(err)
				}
				s.Close()
				if fi, err := os.Stat(filepath.Join(dir, ReserveFile)); err != nil || fi.Size() != reserveFor(indexFileBytes(dir)) {
					t.Errorf("the reserve made again after gc freed space: %v, %v", fi, err)
				}
				return
			}
			fillDisk(t, filepath.Join(mnt, "filler"))
			if free, _ := freeBytes(dir); free != 0 {
				t.Fatalf("%d bytes still free", free)
			}
			if s, err := Open(ctx, dir, WithClock(c.now)); err == nil {
				t.Log("a plain open works on the full disk too")
				s.Close()
			} else {
				t.Logf("a plain open on the full disk: %v", err)
			}
			m, err := Open(ctx, dir, Maintenance(), WithClock(c.now))
			if err != nil {
				t.Fatalf("open for maintenance at 0 bytes free: %v", err)
			}
			defer m.Close()
			// Verify on the full disk reports what it found, whether or not
			// it can record it.
			v, err := m.Verify(ctx, VerifyOptions{})
			if err != nil || v.Checked < tc.runs*tc.parts {
				t.Fatalf("verify at 0 bytes free: checked %d blobs, %v; want a report of every blob", v.Checked, err)
			}
			t.Logf("verify at 0 bytes free: OK %v, %d checked, not recorded: %q", v.OK, v.Checked, v.NotRecorded)
			pr, err := m.Prune(ctx, PruneOptions{Before: before})
			if want := int64(tc.prune * tc.parts); err != nil || pr.RemovedParts != want {
				t.Fatalf("prune at 0 bytes free, index of %d bytes, reserve of %d: %+v, %v; want %d parts removed",
					ixBytes, tc.reserve, pr, err, want)
			}
			res, err := m.GC(ctx, GCOptions{Grace: 0})
			if err != nil || int64(res.RemovedBlobs) != pr.RemovedParts {
				t.Fatalf("gc on the full disk: %+v, %v; want %d blobs removed", res, err, pr.RemovedParts)
			}
			t.Logf("index of %d bytes, reserve of %d: prune removed %d parts, gc %d blobs (%d bytes) on a full disk",
				ixBytes, tc.reserve, pr.RemovedParts, res.RemovedBlobs, res.FreedBytes)
			if fi, err := os.Stat(filepath.Join(dir, ReserveFile)); err != nil || fi.Size() != reserveFor(indexFileBytes(dir)) || fi.Size() != tc.reserve {
				t.Errorf("the reserve after gc: %v, %v; want %d bytes", fi, err, tc.reserve)
			}
			if _, err := m.Write(ctx, []hook.Item{item("after", 1, "written once gc freed space")}); err != nil {
				t.Errorf("write after gc: %v", err)
			}
			if c, err := m.Read(ctx, "keep", keep[0].Key); err != nil || string(c.Data) != "kept through it all" {
				t.Errorf("the part kept: %v", err)
			}
			v, err = m.Verify(ctx, VerifyOptions{})
			if err != nil || !v.OK || len(v.Orphans) > 0 {
				t.Errorf("verify: %+v, %v", v, err)
			}
		})
	}
}

// TestFailedCommitLeavesNoLastingOrphan: when the row commit fails after
// the blobs were written (a full disk, here injected), the blobs left
// behind are marked so that the next gc removes them, default grace period
// or not; a blob another part uses is kept.
func TestFailedCommitLeavesNoLastingOrphan(t *testing.T) {
	ctx := context.Background()
	fail := false
	s := MustOpen(t, withFaults(func(p string) error {
		if fail && p == "write:record" {
			return fmt.Errorf("injected: %w", syscall.ENOSPC)
		}
		return nil
	}))
	shared := mustWrite(t, s, item("r", 1, "already stored"))[0]
	fail = true
	_, err := s.Write(ctx, []hook.Item{item("r", 2, "already stored"), item("r", 3, "new and orphaned")})
	if err == nil {
		t.Fatal("the injected commit failure did not fail the write")
	}
	_, perr := s.Put(ctx, StreamPart{Key: hook.Key{Run: "r", Step: 4, Tool: "t", CallID: "c", Part: -1}}, genReader(5, 2<<20))
	if perr == nil {
		t.Fatal("the injected commit failure did not fail the put")
	}
	fail = false
	res, err := s.GC(ctx, GCOptions{Grace: DefaultGrace})
	if err != nil || res.RemovedBlobs != 2 {
		t.Errorf("gc with the default grace period = %+v, %v; want the two orphans of the failed writes removed", res, err)
	}
	if c, err := s.Read(ctx, "r", shared.Key); err != nil || string(c.Data) != "already stored" {
		t.Errorf("the blob a committed part uses: %v", err)
	}
	v, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || !v.OK || len(v.Orphans) > 0 {
		t.Errorf("verify: %+v, %v", v, err)
	}
}

// mountTmpfs mounts a tmpfs of the given size for the test, or skips it
// where that needs privileges the test does not have.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	return mnt
}

// fillDisk writes path until the disk is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// verify on a disk with no room at all (and no reserve to give up)
// cannot record which blobs it found whole: it reports what it found all
// the same, and says what it could not record.
func TestVerifyReportsOnAFullDisk(t *testing.T) {
	mnt := mountTmpfs(t, "8m")
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(mnt, "store"), WithCreate(), WithReserve(0), WithDurability(cas.SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 40 {
		mustWrite(t, s, item("r", i, fmt.Sprintf("part %d\n%s", i, strings.Repeat("x", 4000))))
	}
	if err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	fillDisk(t, filepath.Join(mnt, "filler"))
	v, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || v.Checked != 40 || !v.OK {
		t.Fatalf("verify on a full disk = checked %d, OK %v, %v; want the 40 blobs reported whole", v.Checked, v.OK, err)
	}
	if v.NotRecorded == "" || !strings.Contains(v.NotRecorded, "full") {
		t.Errorf("verify on a full disk recorded its marks, or did not say why not: %q", v.NotRecorded)
	}
}
