package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/internal/pgtest"
)

// newStore makes a store in a new directory, its index in a new PostgreSQL
// database when pg is set.
func newStore(t *testing.T, pg bool, opts ...Option) *Store {
	t.Helper()
	opts = append([]Option{WithCreate()}, opts...)
	if pg {
		opts = append(opts, WithIndexURL(pgtest.Database(t)))
	}
	s, err := Open(context.Background(), t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fillSource writes a store worth copying: runs of several tools, keys
// with several versions, results of several parts (text, an image, a
// file), content shared across runs, a part over cas's in-memory limit,
// a part pruned (its blob left unused), and half of the blobs packed.
func fillSource(t *testing.T, s *Store, c *clock, runs int) {
	t.Helper()
	ctx := context.Background()
	for r := range runs {
		run := fmt.Sprintf("run-%d", r)
		for step := range 6 {
			c.t = c.t.Add(time.Second)
			items := []hook.Item{
				{Key: hook.Key{Run: run, Step: step, Tool: "grep", CallID: "g", Part: -1, Ext: ".txt"},
					Part: hook.Text(fmt.Sprintf("grep output of step %d\n%s", step, content(uint64(step), 3000)))},
				{Key: hook.Key{Run: run, Step: step, Tool: "shot", CallID: "s", Part: 0, Ext: ".txt"},
					Part: hook.Text(fmt.Sprintf("screenshot %d of run %d", step, r))},
				{Key: hook.Key{Run: run, Step: step, Tool: "shot", CallID: "s", Part: 1, Ext: ".png"},
					Part: hook.Image("image/png", append([]byte("\x89PNG\r\n\x1a\n"), content(uint64(100+step), 2000)...))},
				{Key: hook.Key{Run: run, Step: step, Tool: "fetch", CallID: "f/" + run, Part: -1, Ext: ".pdf"},
					Part: hook.File("application/pdf", "q3 report.pdf", append([]byte("%PDF-1.7\n"), content(uint64(200+r), 1500)...))},
			}
			mustWrite(t, s, items...)
			if step%2 == 0 {
				// The same call again: a second version.
				c.t = c.t.Add(time.Second)
				mustWrite(t, s, hook.Item{Key: items[0].Key, Part: hook.Text(fmt.Sprintf("grep output of step %d, again, run %d", step, r))})
			}
		}
		big := 1<<20 + 4096
		if _, err := s.Put(ctx, StreamPart{Key: hook.Key{Run: run, Step: 9, Tool: "cat", CallID: "big", Part: -1}}, genReader(uint64(300+r), big)); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, s, item("doomed", 1, "pruned before the copy"))
	if _, err := s.Prune(ctx, PruneOptions{Run: "doomed"}); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(DefaultPackAge + time.Hour)
	if res, err := s.Pack(ctx, PackOptions{OlderThan: DefaultPackAge}); err != nil || res.Blobs == 0 {
		t.Fatalf("Pack = %+v, %v", res, err)
	}
}

// checkCopied fails the test unless every part of src is in dst, the same,
// with its bytes readable there, and dst's counters are exact and its
// blobs and rows agree.
func checkCopied(t *testing.T, dst, src *Store) {
	t.Helper()
	ctx := context.Background()
	want, err := src.List(ctx, ListOptions{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range want {
		q, err := dst.ix.PartAt(ctx, p.Run, p.Key, p.Version)
		if err != nil {
			t.Fatalf("%s@%d not copied: %v", p.Key, p.Version, err)
		}
		if !index.SamePart(indexPart(p), q) {
			t.Fatalf("copied %+v, source %+v", q, p)
		}
		a, err := cas.ReadBlob(ctx, src.eng.backend(), p.Blob)
		if err != nil {
			t.Fatal(err)
		}
		b, err := cas.ReadBlob(ctx, dst.eng.backend(), q.Blob)
		if err != nil {
			t.Fatalf("%s@%d: %v", p.Key, p.Version, err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("%s@%d: bytes differ", p.Key, p.Version)
		}
	}
	if drift, err := dst.ix.CountDrift(ctx); err != nil || len(drift) > 0 {
		t.Fatalf("destination's counters: %v, %v", drift, err)
	}
	v, err := dst.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK || len(v.Orphans) > 0 {
		t.Fatalf("verify of the destination: %+v", v)
	}
}

func countParts(t *testing.T, s *Store) int {
	t.Helper()
	ps, err := s.List(context.Background(), ListOptions{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	return len(ps)
}

// Copy copies every part and blob, packed ones too, between local stores
// and between SQLite and PostgreSQL indexes, and back; a second copy copies
// nothing and says so.
func TestCopy(t *testing.T) {
	for _, tc := range []struct {
		name         string
		srcPG, dstPG bool
	}{
		{"sqlite to sqlite", false, false},
		{"sqlite to postgres", false, true},
		{"postgres to sqlite", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := &clock{time.Unix(1_700_000_000, 0)}
			src := newStore(t, tc.srcPG, WithClock(c.now))
			fillSource(t, src, c, 3)
			dst := newStore(t, tc.dstPG)
			var stages []CopyStage
			res, err := Copy(ctx, dst, src, CopyOptions{Batch: 7, Progress: func(p CopyProgress) {
				if len(stages) == 0 || stages[len(stages)-1] != p.Stage {
					stages = append(stages, p.Stage)
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			n := int64(countParts(t, src))
			refs, err := src.ix.ReferencedBlobs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var size int64
			for _, r := range refs {
				size += r.Size
			}
			blobs := int64(len(refs))
			// A second copying pass finds nothing new.
			want := CopyResult{Parts: n, PartsCopied: n, BlobsCopied: blobs, BytesCopied: size, PartsVerified: n, BlobsVerified: blobs,
				Passes: 2}
			if res != want {
				t.Errorf("Copy = %+v, want %+v", res, want)
			}
			if fmt.Sprint(stages) != "[check copy verify]" {
				t.Errorf("progress went through %v", stages)
			}
			checkCopied(t, dst, src)

			again, err := Copy(ctx, dst, src, CopyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want = CopyResult{Parts: n, PartsSkipped: n, BlobsSkipped: blobs, PartsVerified: n, BlobsVerified: blobs, Passes: 1}
			if again != want {
				t.Errorf("Copy again = %+v, want %+v", again, want)
			}

			// And back, into a new store: the same parts.
			back := newStore(t, tc.srcPG)
			if _, err := Copy(ctx, back, dst, CopyOptions{Batch: 5}); err != nil {
				t.Fatal(err)
			}
			checkCopied(t, back, src)
			if got := countParts(t, back); int64(got) != n {
				t.Errorf("copied back %d parts, want %d", got, n)
			}
		})
	}
}

// Copy merges into a store that holds other runs, keeps them, and a write
// after the copy continues a copied key's versions.
func TestCopyIntoStoreWithOtherRuns(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1_700_000_000, 0)}
	src := newStore(t, false, WithClock(c.now))
	fillSource(t, src, c, 1)
	dst := newStore(t, false)
	mine := mustWrite(t, dst, item("mine", 1, "the destination's own"), item("run-0", 40, "a step the source lacks"))
	if _, err := Copy(ctx, dst, src, CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	checkCopied(t, dst, src)
	for _, st := range mine {
		if _, err := dst.Read(ctx, "", st.Key); err != nil {
			t.Errorf("the destination's own %s: %v", st.Key, err)
		}
	}
	key := hook.Key{Run: "run-0", Step: 0, Tool: "grep", CallID: "g", Part: -1, Ext: ".txt"}
	st := mustWrite(t, dst, hook.Item{Key: key, Part: hook.Text("a third version")})[0]
	if st.Version != 3 {
		t.Errorf("a write after the copy made %s version %d, want 3", st.Key, st.Version)
	}
}

// Copy refuses to copy a store onto itself, by any name.
func TestCopyRefusesSameStore(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, false)
	mustWrite(t, s, item("r", 1, "one"))
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(s.Dir(), link); err != nil {
		t.Fatal(err)
	}
	other := MustOpenDir(t, link)
	for _, dst := range []*Store{s, other} {
		if _, err := Copy(ctx, dst, s, CopyOptions{}); !errors.Is(err, ErrCopySameStore) {
			t.Errorf("Copy onto %s = %v, want ErrCopySameStore", dst.Dir(), err)
		}
	}
	if n := countParts(t, s); n != 1 {
		t.Errorf("the store holds %d parts after the refused copies, want 1", n)
	}
	ro := newStore(t, false)
	ro.Close()
	dst, err := Open(ctx, ro.Dir(), ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := Copy(ctx, dst, s, CopyOptions{}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Copy into a read-only store = %v, want ErrReadOnly", err)
	}
}

// A batch size that makes no sense is an error, and nothing is copied.
func TestCopyRefusesNegativeBatch(t *testing.T) {
	ctx := context.Background()
	src, dst := newStore(t, false), newStore(t, false)
	mustWrite(t, src, item("r", 1, "one"))
	_, err := Copy(ctx, dst, src, CopyOptions{Batch: -1})
	if err == nil || !strings.Contains(err.Error(), "negative batch size -1") {
		t.Errorf("Copy with Batch -1 = %v, want an error naming the batch size", err)
	}
	if n := countParts(t, dst); n != 0 {
		t.Errorf("the destination holds %d parts after the refused copy, want 0", n)
	}
}

// A destination that holds other content under a key and version of the
// source is refused before anything is written, naming the key.
func TestCopyConflict(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1_700_000_000, 0)}
	src := newStore(t, false, WithClock(c.now))
	fillSource(t, src, c, 2)
	dst := newStore(t, false)
	mustWrite(t, dst, hook.Item{Key: hook.Key{Run: "run-1", Step: 3, Tool: "grep", CallID: "g", Part: -1, Ext: ".txt"},
		Part: hook.Text("something else entirely")})
	before := countParts(t, dst)
	// Small batches: many would be copied before the one that conflicts.
	_, err := Copy(ctx, dst, src, CopyOptions{Batch: 3})
	if !errors.Is(err, ErrCopyConflict) || !strings.Contains(err.Error(), "run-1/3_grep_g.txt") {
		t.Fatalf("Copy = %v, want ErrCopyConflict naming run-1/3_grep_g.txt", err)
	}
	if after := countParts(t, dst); after != before {
		t.Errorf("the refused copy left %d parts, want %d", after, before)
	}
	n := 0
	if err := localOf(dst).blobs.Walk(ctx, func(e cas.Entry) error {
		if e.Kind == cas.EntryBlob {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("the refused copy left %d blobs, want 1", n)
	}
	if p, err := dst.Read(ctx, "", "run-1/3_grep_g.txt"); err != nil || string(p.Data) != "something else entirely" {
		t.Errorf("the destination's part reads %q, %v", p.Data, err)
	}
}

// A corrupt blob in the source stops the copy with an error naming its key,
// and nothing of it is recorded; a blob corrupted in the destination after
// a copy is found by the next one's verification and copied again.
func TestCopyCorruption(t *testing.T) {
	ctx := context.Background()
	src := newStore(t, false)
	good := mustWrite(t, src, item("r", 1, "whole"))[0]
	bad := mustWrite(t, src, item("r", 2, "about to rot"))[0]
	if err := os.WriteFile(bad.Path, []byte("about to ROT"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := newStore(t, false)
	_, err := Copy(ctx, dst, src, CopyOptions{})
	if !errors.Is(err, cas.ErrCorrupt) || !strings.Contains(err.Error(), bad.Key) {
		t.Fatalf("Copy from a corrupt source = %v, want ErrCorrupt naming %s", err, bad.Key)
	}
	if _, err := dst.ix.PartAt(ctx, "r", bad.Key, 1); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("the corrupt part was recorded: %v", err)
	}

	src2 := newStore(t, false)
	mustWrite(t, src2, item("r", 1, "whole"))
	dst2 := newStore(t, false)
	if _, err := Copy(ctx, dst2, src2, CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst2.Path(cas.Blob{Digest: good.Digest, Ext: ".txt"}), []byte("WHOLE"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Copy(ctx, dst2, src2, CopyOptions{})
	if err != nil || res.BlobsRepaired != 1 {
		t.Errorf("Copy onto a corrupt copy = %+v, %v; want the blob repaired", res, err)
	}
	checkCopied(t, dst2, src2)

	// A blob both stores lost is beyond repair: the copy says so, naming
	// the key.
	if err := os.WriteFile(dst2.Path(cas.Blob{Digest: good.Digest, Ext: ".txt"}), []byte("WHOLE"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(src2.Path(cas.Blob{Digest: good.Digest, Ext: ".txt"})); err != nil {
		t.Fatal(err)
	}
	_, err = Copy(ctx, dst2, src2, CopyOptions{})
	if !errors.Is(err, ErrCopyMismatch) || !errors.Is(err, cas.ErrCorrupt) || !strings.Contains(err.Error(), good.Key) {
		t.Errorf("Copy onto a corrupt copy of a lost blob = %v, want ErrCopyMismatch naming %s", err, good.Key)
	}
}

func init() {
	// copier SRC DST BATCH KILLAT [CACHE]: copy SRC into DST (a directory
	// or an s3:// store, with CACHE its cache), printing a line after each
	// batch copied; with KILLAT > 0, kill itself (SIGKILL) at that batch
	// once its blobs are stored and before its rows commit.
	lockRoles["copier"] = func(a []string) error {
		ctx := context.Background()
		batch, _ := strconv.Atoi(a[2])
		killAt, _ := strconv.Atoi(a[3])
		src, err := Open(ctx, a[0], ReadOnly())
		if err != nil {
			return err
		}
		defer src.Close()
		calls := 0
		opts := []Option{withFaults(func(point string) error {
			if point == "copy:blobs" {
				if calls++; calls == killAt {
					killSelf()
					select {}
				}
			}
			return nil
		})}
		if len(a) > 4 && a[4] != "" {
			opts = append(opts, WithCacheDir(a[4]))
		}
		dst, err := Open(ctx, a[1], opts...)
		if err != nil {
			return err
		}
		defer dst.Close()
		_, err = Copy(ctx, dst, src, CopyOptions{Batch: batch, Progress: func(p CopyProgress) {
			if p.Stage == CopyCopying {
				fmt.Printf("copied %d\n", p.Done)
			}
		}})
		return err
	}
}

// A copy killed with SIGKILL midway, between a batch's blobs and its rows
// or wherever the kill lands, leaves a destination whose rows all have
// their blobs; run again, the copy ends with the destination equal to the
// source. The destination is a directory with its index in SQLite or
// PostgreSQL, or a store on S3 and PostgreSQL.
func TestCopyKilled(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres", "s3"} {
		for _, how := range []string{"between blobs and rows", "at any point"} {
			t.Run(kind+"/"+how, func(t *testing.T) {
				ctx := context.Background()
				c := &clock{time.Unix(1_700_000_000, 0)}
				src := newStore(t, false, WithClock(c.now))
				fillSource(t, src, c, 3)
				var (
					dst      *Store
					cache    string
					reopen   func() *Store
					childEnv []string
				)
				switch kind {
				case "s3":
					e := startRemote(t)
					dst = mustOpenRemote(t, e)
					cache = t.TempDir()
					childEnv = []string{"AWS_ACCESS_KEY_ID=" + e.srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + e.srv.SecretKey}
					reopen = func() *Store {
						s, err := Open(ctx, e.url, e.options(cache)...)
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { s.Close() })
						return s
					}
				default:
					dst = newStore(t, kind == "postgres")
					reopen = func() *Store { return MustOpenDir(t, dst.Dir()) }
				}
				where := dst.Location()
				dst.Close()
				killAt := "0"
				if how == "between blobs and rows" {
					killAt = "4"
				}
				cmd := childCmd("copier", src.Dir(), where, "3", killAt, cache)
				cmd.Env = append(cmd.Env, childEnv...)
				var errb bytes.Buffer
				cmd.Stderr = &errb
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				lines := bufio.NewScanner(out)
				seen := 0
				for lines.Scan() {
					if seen++; seen == 6 && killAt == "0" {
						cmd.Process.Kill()
					}
				}
				err = cmd.Wait()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("the copier ended with %v, not killed; stderr: %s", err, errb.String())
				}
				d := reopen()
				n, total := countParts(t, d), countParts(t, src)
				if n == 0 || n >= total {
					t.Fatalf("killed after %d lines with %d of %d parts copied: not midway", seen, n, total)
				}
				if v, err := d.Verify(ctx, VerifyOptions{}); err != nil || len(v.Missing) > 0 || len(v.Corrupt) > 0 {
					t.Fatalf("after the kill, verify: %+v, %v", v, err)
				}
				res, err := Copy(ctx, d, src, CopyOptions{Batch: 3})
				if err != nil {
					t.Fatal(err)
				}
				if res.PartsCopied != int64(total-n) || res.PartsSkipped != int64(n) {
					t.Errorf("resumed Copy = %+v, want %d parts copied and %d skipped", res, total-n, n)
				}
				if res.BlobsCopied+res.BlobsSkipped != res.BlobsVerified {
					t.Errorf("resumed Copy = %+v: blobs copied and skipped do not add up", res)
				}
				checkCopied(t, d, src)
			})
		}
	}
}

// Copy moves a directory store into a store on S3 and PostgreSQL, packed
// blobs too, and back into a new directory; copied again, nothing moves;
// the store on S3 is not copied onto itself.
func TestCopyS3(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1_700_000_000, 0)}
	src := newStore(t, false, WithClock(c.now))
	fillSource(t, src, c, 2)
	e := startRemote(t)
	remote := mustOpenRemote(t, e)
	res, err := Copy(ctx, remote, src, CopyOptions{Batch: 5})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(countParts(t, src))
	if res.PartsCopied != n || res.BlobsCopied == 0 || res.BlobsCopied != res.BlobsVerified {
		t.Errorf("Copy to S3 = %+v, want %d parts", res, n)
	}
	checkCopied(t, remote, src)
	again, err := Copy(ctx, remote, src, CopyOptions{})
	if err != nil || again.PartsCopied != 0 || again.BlobsCopied != 0 || again.PartsSkipped != n {
		t.Errorf("Copy to S3 again = %+v, %v; want nothing copied", again, err)
	}
	back := newStore(t, false)
	if _, err := Copy(ctx, back, remote, CopyOptions{Batch: 4}); err != nil {
		t.Fatal(err)
	}
	checkCopied(t, back, src)
	// The same store on S3, opened twice, with another cache.
	other, err := Open(ctx, e.url, e.options(t.TempDir())...)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := Copy(ctx, other, remote, CopyOptions{}); !errors.Is(err, ErrCopySameStore) {
		t.Errorf("Copy of a store on S3 onto itself = %v, want ErrCopySameStore", err)
	}
}

// Copy run again onto a destination whose rows name blobs it lost (one
// removed, one damaged, one packed) copies those blobs again from the
// source, and the destination then verifies whole.
func TestCopyRepairsLostBlobs(t *testing.T) {
	for _, pg := range []bool{false, true} {
		t.Run(fmt.Sprint("postgres=", pg), func(t *testing.T) {
			ctx := context.Background()
			c := &clock{time.Unix(1_700_000_000, 0)}
			src := newStore(t, false, WithClock(c.now))
			fillSource(t, src, c, 1)
			dst := newStore(t, pg)
			if _, err := Copy(ctx, dst, src, CopyOptions{Batch: 6}); err != nil {
				t.Fatal(err)
			}
			ps, err := dst.List(ctx, ListOptions{AllVersions: true})
			if err != nil {
				t.Fatal(err)
			}
			lost := map[cas.Blob]bool{}
			for _, p := range ps {
				if len(lost) < 2 && !lost[p.Blob] {
					lost[p.Blob] = true
				}
			}
			i := 0
			for b := range lost {
				if i == 0 {
					if err := os.Remove(dst.Path(b)); err != nil {
						t.Fatal(err)
					}
				} else if err := os.WriteFile(dst.Path(b), []byte("rotten"), 0o644); err != nil {
					t.Fatal(err)
				}
				i++
			}
			if v, err := dst.Verify(ctx, VerifyOptions{}); err != nil || v.OK {
				t.Fatalf("verify of the damaged destination = %+v, %v; want damage", v, err)
			}
			res, err := Copy(ctx, dst, src, CopyOptions{Batch: 6})
			if err != nil {
				t.Fatalf("Copy onto lost blobs = %v", err)
			}
			if res.BlobsRepaired != 2 || res.PartsCopied != 0 {
				t.Errorf("Copy onto lost blobs = %+v, want 2 blobs repaired, no part copied", res)
			}
			checkCopied(t, dst, src)
		})
	}
}

// Parts written to the source while Copy runs are copied without a rerun.
// A pass reads the source in the order of its blobs, oldest first, so a
// new part whose blob the source held already (the same bytes again, in
// another key) is written behind it: a writer racing the first copying
// pass, writing such parts and new ones, has the first pass copy the new
// ones and the next the others, and a third finds nothing; parts written
// as the last copying pass ends, behind it, are copied by the verifying
// pass.
func TestCopyCatchesUpWithWriters(t *testing.T) {
	for _, tc := range []struct {
		when   string
		passes int
	}{{"first pass", 3}, {"last pass", 2}} {
		t.Run(tc.when, func(t *testing.T) {
			ctx := context.Background()
			c := &clock{time.Unix(1_700_000_000, 0)}
			src := newStore(t, false, WithClock(c.now))
			// The oldest blobs, which the writer writes again.
			for i := range 10 {
				mustWrite(t, src, item("seed", i, fmt.Sprint("seen before ", i)))
			}
			fillSource(t, src, c, 1)
			dst := newStore(t, false)
			n := int64(countParts(t, src))
			const writes = 30
			start, wrote := make(chan struct{}), make(chan error, 1)
			go func() {
				<-start
				for i := range writes {
					text := fmt.Sprint("seen before ", i%10)
					if tc.when == "first pass" && i%2 == 1 {
						text = fmt.Sprint("written during the copy ", i)
					}
					if _, err := src.Write(ctx, []hook.Item{item("late", i, text)}); err != nil {
						wrote <- err
						return
					}
				}
				wrote <- nil
			}()
			ends, started := 0, false
			write := func() {
				started = true
				close(start)
				if err := <-wrote; err != nil {
					t.Error(err)
				}
			}
			res, err := Copy(ctx, dst, src, CopyOptions{Batch: 4, Progress: func(p CopyProgress) {
				if p.Stage != CopyCopying {
					return
				}
				switch {
				case tc.when == "first pass" && !started:
					// The first batch copied: the writer runs while the
					// copy waits for it.
					write()
				case p.Done == n && !started:
					// The end of a pass that copied nothing new.
					if ends++; tc.when == "last pass" && ends == 2 {
						write()
					}
				}
			}})
			if err != nil {
				t.Fatalf("Copy with a writer = %+v, %v", res, err)
			}
			if res.PartsCopied != n+writes || res.Parts != n+writes || res.PartsVerified != n+writes {
				t.Errorf("Copy = %+v, want %d parts copied and verified", res, n+writes)
			}
			if res.Passes != tc.passes {
				t.Errorf("%d copying passes, want %d", res.Passes, tc.passes)
			}
			checkCopied(t, dst, src)
		})
	}
}

// On a destination on S3, an object lost, and one damaged to bytes of the
// same size (which a put trusts as the blob), are copied again: the
// damaged one is rewritten over.
func TestCopyRepairsS3(t *testing.T) {
	ctx := context.Background()
	src := newStore(t, false)
	st := mustWrite(t, src, item("r", 1, "first object"), item("r", 2, "second object"), item("r", 3, "third object"))
	e := startRemote(t)
	remote := mustOpenRemote(t, e)
	if _, err := Copy(ctx, remote, src, CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(e.objectFile(cas.Blob{Digest: st[0].Digest, Ext: ".txt"})); err != nil {
		t.Fatal(err)
	}
	overwriteObject(t, e, cas.Blob{Digest: st[1].Digest, Ext: ".txt"}, "SECOND OBJECT")
	if v, err := remote.Verify(ctx, VerifyOptions{}); err != nil || v.OK {
		t.Fatalf("verify of the damaged destination = %+v, %v; want damage", v, err)
	}
	res, err := Copy(ctx, remote, src, CopyOptions{})
	if err != nil || res.BlobsRepaired != 2 {
		t.Fatalf("Copy onto lost objects = %+v, %v; want 2 repaired", res, err)
	}
	checkCopied(t, remote, src)
}
