package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
)

// textOf makes a few KiB of text that compresses like tool output.
func textOf(run string, i int) string {
	var b strings.Builder
	for j := range 150 {
		fmt.Fprintf(&b, "%s: file_%d.go:%d: func handle%d(ctx context.Context) error {\n", run, i, j, j%7)
	}
	return b.String()
}

// packedStore writes three runs (one sharing content with another, and an
// image), ages them past DefaultPackAge and packs them.
func packedStore(t *testing.T) (*Store, *clock, map[string][]byte, map[string]hook.Stored) {
	t.Helper()
	ctx := context.Background()
	c := &clock{time.Now()}
	s := MustOpen(t, WithClock(c.now))
	want := map[string][]byte{}
	stored := map[string]hook.Stored{}
	for _, run := range []string{"a", "b", "c"} {
		var items []hook.Item
		for i := range 8 {
			text := textOf(run, i)
			if run == "b" && i < 2 {
				text = textOf("a", i) // the same content as run a's
			}
			items = append(items, hook.Item{Key: hook.Key{Run: run, Step: i, Tool: "grep", CallID: "c", Part: -1, Ext: ".txt"}, Part: hook.Text(text)})
		}
		img := bytes.Repeat([]byte{0x89, 'P', 'N', 'G', run[0]}, 300)
		items = append(items, hook.Item{Key: hook.Key{Run: run, Step: 9, Tool: "screenshot", CallID: "c", Part: -1, Ext: ".png"}, Part: hook.Image("image/png", img)})
		for i, st := range mustWrite(t, s, items...) {
			stored[st.Key] = st
			if items[i].Part.Kind == hook.KindText {
				want[st.Key] = []byte(items[i].Part.Text)
			} else {
				want[st.Key] = items[i].Part.Data
			}
		}
	}
	c.t = c.t.Add(DefaultPackAge + time.Hour)
	res, err := s.Pack(ctx, PackOptions{OlderThan: DefaultPackAge})
	if err != nil {
		t.Fatal(err)
	}
	if res.Blobs != 25 || len(res.Packs) != 1 || res.RemovedLoose != 25 || res.PackBytes*3 > res.RawBytes {
		t.Fatalf("Pack = %+v, want 25 blobs (27 parts, 2 shared) in one pack at least 3x smaller", res)
	}
	return s, c, want, stored
}

func TestPackReadsEverywhere(t *testing.T) {
	ctx := context.Background()
	s, _, want, stored := packedStore(t)
	for key, data := range want {
		st := stored[key]
		if _, err := os.Lstat(st.Path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("loose file of %s still there after pack: %v", key, err)
		}
		run := strings.SplitN(key, "/", 2)[0]
		for _, ref := range []string{key, st.Path, st.Digest.String(), st.Digest.Hex()[:12]} {
			scope := run
			if ref == st.Digest.Hex()[:12] {
				scope = "" // a short prefix may be shared across runs
			}
			c, err := s.Read(ctx, scope, ref)
			if err != nil || !bytes.Equal(c.Data, data) {
				t.Fatalf("Read(%q, %q) after pack = %v; want the stored bytes", scope, ref, err)
			}
		}
		d, err := s.Show(ctx, key)
		if err != nil || d.OnDiskErr != nil || d.OnDisk.Pack == "" || d.OnDisk.Size != int64(len(data)) {
			t.Fatalf("Show(%s) = %+v, %v; want it packed", key, d.OnDisk, err)
		}
		var buf bytes.Buffer
		if _, err := s.Copy(ctx, &buf, d.Part); err != nil || !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("Copy(%s) = %v", key, err)
		}
	}
	v, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || !v.OK || v.Checked != 25 || len(v.Orphans) != 0 || len(v.Temp) != 0 {
		t.Fatalf("verify of a packed store = %+v, %v", v, err)
	}
	st, err := s.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.PackedBlobs != 25 || st.PackedBytes != st.StoredBytes || st.Packs != 1 || st.CompressionRatio < 3 {
		t.Errorf("stats = packed %d blobs %d bytes of %d stored, %d packs, ratio %.2f", st.PackedBlobs, st.PackedBytes, st.StoredBytes, st.Packs, st.CompressionRatio)
	}
	// gc with no grace finds nothing missing and removes nothing used.
	g, err := s.GC(ctx, GCOptions{Grace: 0})
	if err != nil || g.RemovedBlobs != 0 || g.Packs != (PackSweep{}) {
		t.Fatalf("gc of a packed store = %+v, %v", g, err)
	}
	// Empty shard directories went with the loose files.
	des, _ := os.ReadDir(filepath.Join(s.Dir(), cas.BlobsDir))
	if len(des) != 0 {
		t.Errorf("blobs/ after packing everything holds %d entries", len(des))
	}
	// A write after packing makes its shard again.
	mustWrite(t, s, item("d", 1, "new after packing"))
	if c, err := s.Read(ctx, "d", "d/1_t_c.txt"); err != nil || string(c.Data) != "new after packing" {
		t.Fatalf("read of a write after packing = %v", err)
	}
}

func TestPackGCRewritesAndDrops(t *testing.T) {
	ctx := context.Background()
	s, c, want, _ := packedStore(t)
	packsBefore, _, _, _ := localOf(s).blobs.Packs(ctx)
	// Run a shares two blobs with run b; pruning a and c kills well over
	// half of the pack's bytes.
	for _, run := range []string{"a", "c"} {
		if _, err := s.Prune(ctx, PruneOptions{Run: run}); err != nil {
			t.Fatal(err)
		}
	}
	// Blobs written within the grace period stay, packed or not.
	g, err := s.GC(ctx, GCOptions{Grace: DefaultPackAge + 2*time.Hour})
	if err != nil || g.Packs.Rewritten != 0 {
		t.Fatalf("gc inside the grace period = %+v, %v", g, err)
	}
	dry, err := s.GC(ctx, GCOptions{Grace: time.Hour, DryRun: true})
	// Runs a and c had 18 blobs, 2 of them shared with run b.
	if err != nil || dry.Packs.Rewritten != 1 || dry.UnusedPacked != 16 {
		t.Fatalf("gc dry run = %+v, %v; want one pack to rewrite, 16 unused packed blobs", dry, err)
	}
	g, err = s.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil || g.Packs.Rewritten != 1 || g.Packs.FreedBytes <= 0 {
		t.Fatalf("gc = %+v, %v; want the pack rewritten", g, err)
	}
	packs, _, _, err := localOf(s).blobs.Packs(ctx)
	if err != nil || len(packs) != 1 || packs[0].Name == packsBefore[0].Name || len(packs[0].Entries) != 9 {
		t.Fatalf("packs after rewrite = %v, %v; want one new pack of run b's 9 blobs", packs, err)
	}
	for key, data := range want {
		got, err := s.Read(ctx, "", key)
		if strings.HasPrefix(key, "b/") {
			if err != nil || !bytes.Equal(got.Data, data) {
				t.Errorf("read %s after rewrite: %v", key, err)
			}
		} else if err == nil {
			t.Errorf("pruned %s still resolves", key)
		}
	}
	if v, err := s.Verify(ctx, VerifyOptions{}); err != nil || !v.OK || v.Checked != 9 || len(v.Orphans) != 0 {
		t.Fatalf("verify after rewrite = %+v, %v", v, err)
	}
	if _, err := s.Prune(ctx, PruneOptions{Run: "b"}); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(2 * time.Hour)
	if g, err = s.GC(ctx, GCOptions{Grace: time.Hour}); err != nil || g.Packs.Dropped != 1 {
		t.Fatalf("gc of a dead pack = %+v, %v", g, err)
	}
	if packs, _, _, _ := localOf(s).blobs.Packs(ctx); len(packs) != 0 {
		t.Errorf("packs left: %v", packs)
	}
	if st, _ := s.Stats(ctx, ""); st.Packs != 0 {
		t.Errorf("stats still counts %d packs", st.Packs)
	}
}

// TestPackFailures stops a pack at each step: before the pack is written,
// after it is written but not recorded, after it is recorded but before the
// loose files go. Every blob stays readable; verify finds nothing missing;
// gc cleans up what was left and a later pack finishes the job.
func TestPackFailures(t *testing.T) {
	ctx := context.Background()
	for _, point := range []string{"pack:write", "pack:record", "pack:remove"} {
		t.Run(point, func(t *testing.T) {
			c := &clock{time.Now()}
			boom := errors.New("injected")
			var failing bool
			s := MustOpen(t, WithClock(c.now), withFaults(func(p string) error {
				if failing && p == point {
					return boom
				}
				return nil
			}))
			var all []hook.Stored
			for i := range 6 {
				all = append(all, mustWrite(t, s, item("r", i, textOf("r", i)))...)
			}
			c.t = c.t.Add(48 * time.Hour)
			failing = true
			if _, err := s.Pack(ctx, PackOptions{}); !errors.Is(err, boom) {
				t.Fatalf("Pack with %s failing = %v", point, err)
			}
			failing = false
			check := func(when string) {
				t.Helper()
				for i, st := range all {
					got, err := s.Read(ctx, "r", st.Key)
					if err != nil || string(got.Data) != textOf("r", i) {
						t.Fatalf("%s: read %s = %v", when, st.Key, err)
					}
				}
				v, err := s.Verify(ctx, VerifyOptions{})
				if err != nil || len(v.Missing) > 0 || len(v.Corrupt) > 0 {
					t.Fatalf("%s: verify = %+v, %v", when, v, err)
				}
			}
			check("after the failure")
			// Files left by a failing pack are the next gc's.
			if _, err := s.GC(ctx, GCOptions{Grace: 0}); err != nil {
				t.Fatal(err)
			}
			check("after gc")
			if _, err := s.Pack(ctx, PackOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.GC(ctx, GCOptions{Grace: 0}); err != nil {
				t.Fatal(err)
			}
			check("after packing again")
			v, _ := s.Verify(ctx, VerifyOptions{})
			if !v.OK || len(v.Orphans) > 0 || len(v.Temp) > 0 {
				t.Errorf("verify at the end = %+v", v)
			}
			for _, st := range all {
				if _, err := os.Lstat(st.Path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("loose %s still there at the end: %v", st.Key, err)
				}
			}
			if st, _ := s.Stats(ctx, ""); st.PackedBlobs != 6 {
				t.Errorf("packed blobs at the end = %d, want 6", st.PackedBlobs)
			}
		})
	}
}

// TestPackDamageFound corrupts a pack on purpose: verify names the damaged
// blobs with their keys, reads fail rather than return wrong bytes, and gc
// does not delete anything because of it.
func TestPackDamageFound(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"flip", "truncate", "remove"} {
		t.Run(how, func(t *testing.T) {
			s, _, want, _ := packedStore(t)
			packs, _, _, _ := localOf(s).blobs.Packs(ctx)
			path := filepath.Join(s.Dir(), cas.PacksDir, packs[0].Name)
			os.Chmod(path, 0o644)
			switch how {
			case "flip":
				b, _ := os.ReadFile(path)
				b[100] ^= 1
				os.WriteFile(path, b, 0o644)
			case "truncate":
				os.Truncate(path, packs[0].Size-40)
			case "remove":
				os.Remove(path)
			}
			s2, err := Open(ctx, s.Dir())
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			v, err := s2.Verify(ctx, VerifyOptions{})
			if err != nil || v.OK || len(v.Corrupt)+len(v.Missing) == 0 {
				t.Fatalf("verify of a damaged pack = %+v, %v", v, err)
			}
			keys := 0
			for _, p := range append(v.Corrupt, v.Missing...) {
				keys += len(p.Keys)
			}
			if keys == 0 {
				t.Errorf("verify names no key that lost its bytes: %+v", v)
			}
			for key, data := range want {
				if got, err := s2.Read(ctx, "", key); err == nil && !bytes.Equal(got.Data, data) {
					t.Fatalf("read %s from a damaged pack returned wrong bytes", key)
				}
			}
			// gc refuses a pack whose table of contents is gone, as it
			// refuses missing blobs, and never deletes a damaged pack.
			_, err = s2.GC(ctx, GCOptions{Grace: 0})
			switch how {
			case "remove", "truncate":
				if err == nil {
					t.Error("gc ran with rows pointing at a missing or unreadable pack")
				}
			default:
				if err != nil {
					t.Errorf("gc = %v", err)
				}
			}
			if _, err := os.Stat(path); how != "remove" && err != nil {
				t.Errorf("damaged pack gone after gc: %v", err)
			}

			// Repair: what reads whole goes to a new pack, the damaged
			// pack to quarantine; what its frames still hold is salvaged
			// (a pack cut short loses its table of contents, not its
			// blobs); keys of corrupt blobs stay; keys of blobs whose
			// pack is gone are lost.
			rep, err := s2.Repair(ctx, RepairOptions{})
			if err != nil {
				t.Fatalf("repair: %v", err)
			}
			v, err = s2.Verify(ctx, VerifyOptions{})
			if err != nil || !v.OK || len(v.Corrupt) > 0 || len(v.Missing) > 0 {
				t.Fatalf("verify after repair = %+v, %v", v, err)
			}
			if _, err := s2.GC(ctx, GCOptions{Grace: 0}); err != nil {
				t.Fatalf("gc after repair: %v", err)
			}
			lost := map[string]bool{}
			for _, r := range rep.Lost {
				for _, k := range r.Keys {
					lost[k] = true
				}
			}
			healed := 0
			for key, data := range want {
				got, err := s2.Read(ctx, "", key)
				switch {
				case err == nil && !bytes.Equal(got.Data, data):
					t.Fatalf("read %s after repair returned wrong bytes", key)
				case err == nil:
				case lost[key]:
				default:
					// Corrupt and kept: the same content written again heals it.
					run, _, _ := strings.Cut(key, "/")
					kind := hook.Text(string(data))
					ext := ".txt"
					if strings.HasSuffix(key, ".png") {
						kind, ext = hook.Image("image/png", data), ".png"
					}
					mustWrite(t, s2, hook.Item{Key: hook.Key{Run: run + "-again", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: ext}, Part: kind})
					if got, err := s2.Read(ctx, "", key); err != nil || !bytes.Equal(got.Data, data) {
						t.Fatalf("read %s after writing its content again = %v", key, err)
					}
					healed++
				}
			}
			switch how {
			case "flip":
				if healed == 0 || len(rep.Lost) != 0 {
					t.Errorf("repair of a flipped pack: %d healed, %d lost; want some healed, none lost", healed, len(rep.Lost))
				}
			case "truncate":
				if healed != 0 || len(rep.Lost) != 0 || len(rep.Salvaged) == 0 {
					t.Errorf("repair of a truncated pack: %d healed, %d lost, %d salvaged; want every blob salvaged",
						healed, len(rep.Lost), len(rep.Salvaged))
				}
			case "remove":
				if len(rep.Lost) == 0 {
					t.Errorf("repair of a removed pack lost nothing")
				}
			}
			v, err = s2.Verify(ctx, VerifyOptions{})
			if err != nil || !v.OK || len(v.Quarantined) != 0 {
				t.Fatalf("verify after healing = %+v, %v", v, err)
			}
		})
	}
}

// crashPackLimit is the most blob bytes a crash loop's packer puts in one
// pack: about twenty small writes' worth (a large one goes alone). With
// packs of PackLimit, a packer was most often still writing its first pack
// when it was killed (in the loop without syncs, with thousands of loose
// blobs, always), and kills seldom landed in recording a pack or removing
// its loose files.
const crashPackLimit = 64 << 10

// The lines a packer prints as it starts writing a pack, as it stops at
// its hold point (followed by the point), and (followed by a count) once
// a pack is done.
const (
	packWritingLine = "writing a pack"
	packHeldLine    = "held at"
	packedLine      = "packed, blobs so far:"
)

// holdPoints are the points of a pack's work where the crash loop stops a
// packer to kill it: its file written, no row yet; its rows committed, its
// blobs' loose files still there.
var holdPoints = []string{"pack:record", "pack:remove"}

// packLoop packs everything loose, prunes a junk run and collects garbage
// with no grace period, so that packs are written, recorded, emptied of
// their loose files and rewritten, again and again until killed. Its gc is
// forced, as every gc of the crash loop is: writers killed between their
// blobs and their rows may leave orphans that are most of a young store.
// Its packs are small (crashPackLimit); it prints a line as it starts
// writing each, and once each is done. Given a point of a pack's work
// (pack:record, pack:remove), it stops there, says so, and waits to be
// killed.
func packLoop(dir string, holdAt ...string) error {
	ctx := context.Background()
	hold := ""
	if len(holdAt) > 0 {
		hold = holdAt[0]
	}
	s, err := openChild(ctx, dir, false, withPackLimit(crashPackLimit), withFaults(func(point string) error {
		switch point {
		case "pack:write":
			fmt.Println(packWritingLine)
		case hold:
			fmt.Println(packHeldLine, point)
			time.Sleep(time.Hour) // until killed
		}
		return nil
	}))
	if err != nil {
		return err
	}
	defer s.Close()
	// Each pack written, recorded and its loose files removed.
	progress := func(done, _ int) { fmt.Printf("%s %d\n", packedLine, done) }
	for i := 0; ; i++ {
		if _, err := s.Pack(ctx, PackOptions{Progress: progress}); err != nil {
			return err
		}
		if _, err := s.Prune(ctx, PruneOptions{Run: fmt.Sprintf("junk-%d", i%3)}); err != nil {
			return err
		}
		if _, err := s.GC(ctx, GCOptions{Grace: 0, Force: true}); err != nil {
			return err
		}
	}
}

func TestPackIfOver(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Now()}
	s := MustOpen(t, WithClock(c.now))
	for i := range 4 {
		mustWrite(t, s, item("r", i, textOf("r", i)))
	}
	if res, did, err := s.PackIfOver(ctx, 1, PackOptions{OlderThan: DefaultPackAge}); err != nil || did || res.Blobs != 0 {
		t.Fatalf("PackIfOver of young blobs = %+v, %v, %v", res, did, err)
	}
	c.t = c.t.Add(DefaultPackAge + time.Minute)
	if _, did, err := s.PackIfOver(ctx, 1<<30, PackOptions{OlderThan: DefaultPackAge}); err != nil || did {
		t.Fatalf("PackIfOver under the limit packed: %v, %v", did, err)
	}
	res, did, err := s.PackIfOver(ctx, 1000, PackOptions{OlderThan: DefaultPackAge})
	if err != nil || !did || res.Blobs != 4 {
		t.Fatalf("PackIfOver over the limit = %+v, %v, %v", res, did, err)
	}
}

// TestPackWaitsForPackerWithDeadline: a second packer gives up with
// ErrLocked, naming the first, when its context ends.
func TestPackWaitsForPackerWithDeadline(t *testing.T) {
	s := MustOpen(t)
	unlock, err := localOf(s).packLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = s.Pack(ctx, PackOptions{})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "another pack") {
		t.Errorf("Pack while another packs = %v, want ErrLocked naming the other pack", err)
	}
}

// walBytes returns the size of the index's write-ahead log under dir.
func walBytes(t *testing.T, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, IndexFile+"-wal"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestPackTruncatesLog: while writers in other processes write, read back
// and prune, this process packs again and again (each writer goes on until
// three packs have run since its first write); every pack and every
// writer succeeds, and once the writers are gone, a pack leaves the
// index's write-ahead log empty, though the store (and another on the
// same directory) still has the index open, where it held the pages of
// the writes and of the pack before.
func TestPackTruncatesLog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := MustOpenDir(t, dir, WithCreate())
	other := MustOpenDir(t, dir)
	packsFile := filepath.Join(t.TempDir(), "packs")
	var writers []*exec.Cmd
	for w := range 3 {
		writers = append(writers, startChild(t, "racer", dir, fmt.Sprint(w), fmt.Sprint(raceDeadline.Milliseconds()), "lock", "", packsFile, "3"))
	}
	done := make(chan error, len(writers))
	for _, cmd := range writers {
		go func() { done <- cmd.Wait() }()
	}
	packs, packed := 0, 0
	for left := len(writers); left > 0; {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("a writer: %v", err)
			}
			left--
			continue
		default:
		}
		res, err := s.Pack(ctx, PackOptions{OlderThan: 0})
		if err != nil {
			t.Fatalf("pack with writers at work: %v", err)
		}
		packs++
		packed += res.Blobs
		if err := countRun(packsFile); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range writers {
		out := cmd.Stdout.(*bytes.Buffer).String()
		if !strings.Contains(out, "PARTS ") {
			t.Errorf("writer %d wrote nothing: %s", i, out)
		}
	}
	if packed == 0 {
		t.Fatalf("%d packs with writers at work packed nothing", packs)
	}
	t.Logf("%d packs packed %d blobs while 3 writers wrote", packs, packed)
	mustWrite(t, other, item("last", 1, textOf("last", 1)), item("last", 2, textOf("last", 2)))
	if n := walBytes(t, dir); n == 0 {
		t.Fatal("no write-ahead log after a write: the test shows nothing")
	}
	res, err := s.Pack(ctx, PackOptions{OlderThan: 0})
	if err != nil || res.Blobs < 2 {
		t.Fatalf("pack of the last writes = %+v, %v; want the 2 blobs at least", res, err)
	}
	if n := walBytes(t, dir); n != 0 {
		t.Errorf("the write-ahead log after pack: %d bytes, want 0", n)
	}
	v, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || !v.OK {
		t.Errorf("verify after packs among writers: %+v, %v", v, err)
	}
}

// A pack of a few hundred blobs loses its last hundred bytes (its trailer
// and the end of its table of contents): verify calls its blobs damaged,
// not missing, and repair salvages every one from the pack's frames, byte
// for byte, dropping no row.
func TestRepairSalvagesPackCutShort(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Now()}
	s := MustOpen(t, WithClock(c.now))
	want := map[string][]byte{}
	// In one batch: a write of its own for each is minutes of syncs on a
	// busy machine, and the pack is the same.
	var items []hook.Item
	for i := range 300 {
		text := fmt.Sprintf("result %d\n%s", i, strings.Repeat(fmt.Sprintf("line of result %d\n", i), 50+i%200))
		items = append(items, item(fmt.Sprintf("run-%d", i%7), i, text))
	}
	for i, st := range mustWrite(t, s, items...) {
		want[st.Key] = []byte(items[i].Part.Text)
	}
	c.t = c.t.Add(DefaultPackAge + time.Hour)
	if _, err := s.Pack(ctx, PackOptions{OlderThan: DefaultPackAge}); err != nil {
		t.Fatal(err)
	}
	packs, _, _, _ := localOf(s).blobs.Packs(ctx)
	if len(packs) != 1 || len(packs[0].Entries) != 300 {
		t.Fatalf("packed into %d packs, want one of 300 blobs", len(packs))
	}
	path := filepath.Join(s.Dir(), cas.PacksDir, packs[0].Name)
	os.Chmod(path, 0o644)
	if err := os.Truncate(path, packs[0].Size-100); err != nil {
		t.Fatal(err)
	}
	s = MustOpenDir(t, s.Dir(), WithClock(c.now))
	v, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || v.OK || len(v.Missing) != 0 {
		t.Fatalf("verify of the cut pack = OK %v, %d missing, %d corrupt, %v; want its blobs damaged, none missing",
			v.OK, len(v.Missing), len(v.Corrupt), err)
	}
	rep, err := s.Repair(ctx, RepairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Lost) != 0 || len(rep.Salvaged) != 300 {
		t.Fatalf("repair: %d lost, %d salvaged, %d quarantined; want all 300 salvaged", len(rep.Lost), len(rep.Salvaged), len(rep.Quarantined))
	}
	for key, data := range want {
		got, err := s.Read(ctx, "", key)
		if err != nil || !bytes.Equal(got.Data, data) {
			t.Fatalf("read %s after repair: %v", key, err)
		}
	}
	if v, err := s.Verify(ctx, VerifyOptions{}); err != nil || !v.OK {
		t.Fatalf("verify after repair = %+v, %v", v, err)
	}
}

// A blob pack chose is collected by gc (its rows and file gone) before pack
// writes it: pack leaves it out and packs the rest, instead of failing with
// "blob not found".
func TestPackSkipsBlobCollectedMeanwhile(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Now()}
	var s *Store
	var gone cas.Blob
	s = MustOpen(t, WithClock(c.now), withFaults(func(point string) error {
		if point != "pack:write" || gone.Digest.IsZero() {
			return nil
		}
		// What gc does to an unused blob: rows first, then the file.
		b := gone
		gone = cas.Blob{}
		if _, err := s.ix.DeletePartsOf(ctx, []cas.Blob{b}); err != nil {
			return err
		}
		if _, err := s.ix.DeleteBlobRows(ctx, []cas.Blob{b}); err != nil {
			return err
		}
		return localOf(s).blobs.Remove(ctx, b)
	}))
	var stored []hook.Stored
	for i := range 5 {
		stored = append(stored, mustWrite(t, s, item("r", i, fmt.Sprintf("part %d of the run", i)))...)
	}
	gone = blobOf(t, s, stored[2])
	c.t = c.t.Add(DefaultPackAge + time.Hour)
	res, err := s.Pack(ctx, PackOptions{OlderThan: DefaultPackAge})
	if err != nil || res.Blobs != 4 {
		t.Fatalf("Pack = %+v, %v; want the 4 blobs left packed", res, err)
	}
	for i, st := range stored {
		if i == 2 {
			continue
		}
		if got, err := s.Read(ctx, "r", st.Key); err != nil || string(got.Data) != fmt.Sprintf("part %d of the run", i) {
			t.Errorf("read %s after the pack: %v", st.Key, err)
		}
	}
	if v, err := s.Verify(ctx, VerifyOptions{}); err != nil || !v.OK {
		t.Errorf("verify after the pack = %+v, %v", v, err)
	}
}

// A packer writing its pack holds no lock of the writers': a gc that
// starts meanwhile sweeps, and writes go on, however long the pack takes
// (here: until the test lets it go on). Before, the packer held the
// writers' side of gc.lock while it wrote, gc took gc.intent waiting for
// it, and every new write waited behind both.
func TestPackHoldsUpNoWriter(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Now()}
	atWrite, goOn := make(chan struct{}), make(chan struct{})
	var once sync.Once
	packer := MustOpen(t, WithClock(c.now), withFaults(func(point string) error {
		if point == "pack:write" {
			once.Do(func() {
				close(atWrite)
				<-goOn
			})
		}
		return nil
	}))
	for i := range 5 {
		mustWrite(t, packer, item("old", i, fmt.Sprintf("old part %d", i)))
	}
	c.t = c.t.Add(DefaultPackAge + time.Hour)
	packed := make(chan error, 1)
	go func() {
		_, err := packer.Pack(ctx, PackOptions{OlderThan: DefaultPackAge})
		packed <- err
	}()
	<-atWrite
	defer func() {
		select {
		case <-goOn:
		default:
			close(goOn)
		}
	}()
	other := MustOpenDir(t, packer.Dir(), WithClock(c.now), WithLockTimeout(20*time.Second))
	if _, err := other.Prune(ctx, PruneOptions{Run: "old"}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.GC(ctx, GCOptions{Grace: 0, LockTimeout: 20 * time.Second}); err != nil {
		t.Fatalf("gc while a packer writes: %v", err)
	}
	if _, err := other.Write(ctx, []hook.Item{item("new", 1, "written while the pack is written")}); err != nil {
		t.Fatalf("write while a packer writes, after a gc: %v", err)
	}
	close(goOn)
	if err := <-packed; err != nil {
		t.Fatalf("pack: %v", err)
	}
	if v, err := other.Verify(ctx, VerifyOptions{}); err != nil || !v.OK || len(v.Missing) != 0 {
		t.Errorf("verify after pack and gc = %+v, %v", v, err)
	}
}

// TestGCRemovesLooseCopyOfUnusedPackedBlob: a blob no row names, with a
// copy in a pack and a loose one (a pack killed before it removed its
// loose files, then the blob's row collected), loses its loose copy to
// gc: verify finds no orphan after. The packed copy goes with its pack.
func TestGCRemovesLooseCopyOfUnusedPackedBlob(t *testing.T) {
	ctx := context.Background()
	s, _, want, stored := packedStore(t)
	// Run c's 9 blobs are less than half of the pack: it stays as it is.
	if _, err := s.Prune(ctx, PruneOptions{Run: "c"}); err != nil {
		t.Fatal(err)
	}
	if g, err := s.GC(ctx, GCOptions{Grace: time.Hour}); err != nil || g.Packs.Rewritten+g.Packs.Dropped != 0 || g.UnusedPacked != 9 {
		t.Fatalf("gc of run c = %+v, %v; want 9 unused packed blobs, the pack kept", g, err)
	}
	key := "c/0_grep_c.txt"
	st := stored[key]
	path := st.Path
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, want[key], 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := s.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil || g.RemovedBlobs != 1 {
		t.Fatalf("gc with a loose copy of %s = %+v, %v; want it removed", key, g, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the loose copy is still there: %v", err)
	}
	if v, err := s.Verify(ctx, VerifyOptions{}); err != nil || !v.OK || len(v.Orphans) != 0 {
		t.Errorf("verify after gc = %+v, %v; want no orphan", v, err)
	}
}
