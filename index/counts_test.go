package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// checkCounts fails the test when the kept counters differ from a recount
// of the rows, or when Stats read from them differs from Stats computed by
// reading every part.
func checkCounts(t *testing.T, x *Index, when string) {
	t.Helper()
	ctx := context.Background()
	drift, err := x.CountDrift(ctx)
	if err != nil {
		t.Fatalf("%s: CountDrift: %v", when, err)
	}
	if len(drift) > 0 {
		t.Fatalf("%s: counters drifted:\n%s", when, strings.Join(drift, "\n"))
	}
	got, err := x.Stats(ctx, "")
	if err != nil {
		t.Fatalf("%s: Stats: %v", when, err)
	}
	want, err := x.scanStats(ctx, "")
	if err != nil {
		t.Fatalf("%s: scanStats: %v", when, err)
	}
	type totals struct {
		Runs, Parts, Blobs, Logical, Stored, Unref, UnrefBytes, Packed, PackedBytes, Packs, PackRaw int64
	}
	tot := func(s Stats) totals {
		return totals{s.Runs, s.Parts, s.Blobs, s.LogicalBytes, s.StoredBytes, s.UnreferencedBlobs, s.UnreferencedBytes,
			s.PackedBlobs, s.PackedBytes, s.Packs, s.PackRawBytes}
	}
	if tot(got) != tot(want) {
		t.Fatalf("%s: counted stats %+v, scanned %+v", when, tot(got), tot(want))
	}
	// Groups: the same parts, bytes and dates; the stored bytes of the
	// groups add up to the total.
	for _, pair := range [][2][]GroupStats{{got.ByTool, want.ByTool}, {got.ByRun, want.ByRun}} {
		g, w := pair[0], pair[1]
		if len(g) != len(w) {
			t.Fatalf("%s: %d groups counted, %d scanned: %+v, %+v", when, len(g), len(w), g, w)
		}
		var stored int64
		for i := range g {
			stored += g[i].StoredBytes
			if g[i].Name != w[i].Name || g[i].Parts != w[i].Parts || g[i].LogicalBytes != w[i].LogicalBytes ||
				!g[i].First.Equal(w[i].First) || !g[i].Last.Equal(w[i].Last) {
				t.Fatalf("%s: group counted %+v, scanned %+v", when, g[i], w[i])
			}
		}
		if stored != got.StoredBytes {
			t.Fatalf("%s: groups store %d bytes, the total is %d", when, stored, got.StoredBytes)
		}
	}
}

// TestCountsStayExact drives the index through random writes, version
// bumps, deletes, prunes of every kind, gc's row deletes, packs recorded
// and replaced, and repair's drop of lost blobs, and recounts after each.
func TestCountsStayExact(t *testing.T) { forEachBackend(t, testCountsStayExact) }

func testCountsStayExact(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1_000_000, 0)}
	x := MustOpen(t, WithClock(c.now))
	rng := rand.New(rand.NewPCG(13, 6))
	runs := []string{"alpha", "beta", "gamma", "delta"}
	tools := []string{"read_file", "grep", "bash"}
	content := func() string {
		// Few distinct contents, so that blobs are shared across runs and
		// tools, and sizes vary.
		n := rng.IntN(40)
		return strings.Repeat(fmt.Sprint("content ", n, " "), 1+n)
	}
	var packs []string
	steps := 300
	if testing.Short() {
		steps = 120
	}
	for i := range steps {
		c.t = c.t.Add(time.Minute)
		op := rng.IntN(20)
		what := ""
		switch {
		case op < 10:
			what = "record"
			var ps []NewPart
			for j := range 1 + rng.IntN(4) {
				run := runs[rng.IntN(len(runs))]
				// Steps repeat, so keys get versions and suffixes.
				ps = append(ps, newPart(run, rng.IntN(30), tools[rng.IntN(len(tools))], fmt.Sprint("c", j), content()))
			}
			mustRecord(t, x, ps...)
		case op == 10:
			what = "prune run"
			if _, err := x.Prune(ctx, PruneOptions{Run: runs[rng.IntN(len(runs))]}); err != nil {
				t.Fatal(err)
			}
		case op == 11:
			what = "prune before"
			if _, err := x.Prune(ctx, PruneOptions{Before: c.t.Add(-time.Duration(rng.IntN(100)) * time.Minute)}); err != nil {
				t.Fatal(err)
			}
		case op == 12:
			what = "prune keep runs"
			if _, err := x.Prune(ctx, PruneOptions{KeepRuns: 1 + rng.IntN(3)}); err != nil {
				t.Fatal(err)
			}
		case op == 13:
			what = "delete key"
			ps, err := x.List(ctx, ListOptions{Limit: 5})
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) > 0 {
				p := ps[rng.IntN(len(ps))]
				if _, err := x.DeleteKey(ctx, p.Key, rng.IntN(2)*p.Version); err != nil {
					t.Fatal(err)
				}
			}
		case op == 14 || op == 15:
			what = "gc rows"
			unref, err := x.UnreferencedBlobs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var bs []cas.Blob
			for _, r := range unref {
				bs = append(bs, r.Blob)
			}
			if op == 14 {
				_, err = x.DeleteUnreferenced(ctx, bs, c.t)
			} else {
				_, err = x.DeleteBlobRows(ctx, bs)
			}
			if err != nil {
				t.Fatal(err)
			}
		case op == 16 || op == 17:
			what = "pack"
			refs, err := x.ReferencedBlobs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var bs []cas.Blob
			var raw int64
			for _, r := range refs {
				if rng.IntN(3) == 0 {
					bs = append(bs, r.Blob)
					raw += r.Size
				}
			}
			name := fmt.Sprintf("pack-%d.zst", i)
			if err := x.RecordPack(ctx, PackRecord{Name: name, Size: raw / 3, Raw: raw, Blobs: bs}); err != nil {
				t.Fatal(err)
			}
			packs = append(packs, name)
		case op == 18 && len(packs) > 0:
			what = "replace pack"
			k := rng.IntN(len(packs))
			old := packs[k]
			live, err := x.PackedBlobs(ctx, old)
			if err != nil {
				t.Fatal(err)
			}
			rec := PackRecord{}
			if len(live) > 1 {
				live = live[:len(live)/2]
				rec = PackRecord{Name: fmt.Sprintf("pack-%d.zst", i), Size: 10, Raw: 30, Blobs: live}
				packs = append(packs, rec.Name)
			}
			if err := x.ReplacePack(ctx, old, rec); err != nil {
				t.Fatal(err)
			}
			packs = append(packs[:k], packs[k+1:]...)
		case op == 19:
			what = "drop lost blob"
			refs, err := x.ReferencedBlobs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(refs) > 0 {
				if _, err := x.DeletePartsOf(ctx, []cas.Blob{refs[rng.IntN(len(refs))].Blob}); err != nil {
					t.Fatal(err)
				}
			}
		default:
			continue
		}
		checkCounts(t, x, fmt.Sprintf("step %d (%s)", i, what))
	}
	s, _ := x.Stats(ctx, "")
	if s.Parts == 0 || s.UnreferencedBlobs+s.Blobs == 0 {
		t.Errorf("the random walk ended empty (%+v): it tests too little", s)
	}
}

// TestFixCounts damages every kind of counter and has FixCounts set them
// right again.
func TestFixCounts(t *testing.T) { forEachBackend(t, testFixCounts) }

func testFixCounts(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	mustRecord(t, x, newPart("r1", 1, "read_file", "a", "one"), newPart("r1", 2, "grep", "b", "two"),
		newPart("r2", 1, "read_file", "a", "one"))
	mustRecord(t, x, newPart("r3", 1, "bash", "a", "three"))
	if _, err := x.Prune(ctx, PruneOptions{Run: "r3"}); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, x, "before the damage")
	for _, tc := range []struct{ name, damage, want string }{
		{"parts", `UPDATE counts SET parts = parts + 2 WHERE tool = 'grep'`, `tool "grep": counted 3 parts`},
		{"not counted", `UPDATE blobs SET counted_in = NULL WHERE size = 3`, "counted nowhere"},
		{"unused counted", `UPDATE blobs SET counted_in = 1 WHERE size = 5`, "do not use it"},
		{"missing row", `UPDATE blobs SET counted_in = 999 WHERE size = 3`, "do not use it"},
		{"blob sums", `UPDATE counts SET stored = stored + 7`, "recounted"},
		{"unused sums", `UPDATE unused_blobs SET bytes = bytes + 1`, "unused blobs: counted"},
		{"unused", `DELETE FROM unused_blobs`, "unused blobs: no counter"},
		{"first date", `UPDATE counts SET first_at = first_at - 5 WHERE tool = 'grep'`, `tool "grep": counted first and last`},
		{"last date", `UPDATE counts SET last_at = NULL WHERE tool = 'read_file'`, `tool "read_file": counted first and last`},
		{"a blob's parts", `UPDATE blobs SET part_count = part_count + 3 WHERE size = 3`, "counted 5 parts using it, recounted 2"},
		{"an unused blob's parts", `UPDATE blobs SET part_count = 1 WHERE size = 5`, "counted 1 parts using it, recounted 0"},
		{"dates of no parts", `UPDATE counts SET first_at = 1, last_at = 2 WHERE tool = 'bash'`, `tool "bash": counted first and last part at 1 and 2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := x.db.ExecContext(ctx, tc.damage); err != nil {
				t.Fatal(err)
			}
			drift, err := x.CountDrift(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(drift, "\n"), tc.want) {
				t.Errorf("CountDrift after %q = %q, want a line with %q", tc.damage, drift, tc.want)
			}
			n, err := x.FixCounts(ctx)
			if err != nil || n == 0 {
				t.Errorf("FixCounts = %d, %v; want some fixed", n, err)
			}
			checkCounts(t, x, "after FixCounts")
			if n, err := x.FixCounts(ctx); n != 0 || err != nil {
				t.Errorf("FixCounts of sound counters = %d, %v; want 0", n, err)
			}
		})
	}
}

const countsChildEnv = "TOOLCAS_TEST_COUNTS_WRITER"

// TestCountsAfterKill kills writer processes with SIGKILL while they
// record, prune and delete, again and again, and recounts: the counters
// change in the transactions that change the rows, so no kill can part
// them.
func TestCountsAfterKill(t *testing.T) {
	if spec := os.Getenv(countsChildEnv); spec != "" {
		countsChild(spec)
		return
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "index.db")
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		var cmds []*exec.Cmd
		for p := range 2 {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCountsAfterKill$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d", countsChildEnv, path, round*2+p))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait until the child has committed a few transactions, so
			// that the kill lands among writes, not before them.
			buf := make([]byte, 64)
			seen := ""
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(seen, "WRITING") && time.Now().Before(deadline) {
				n, err := out.Read(buf)
				seen += string(buf[:n])
				if err != nil {
					break
				}
			}
			if !strings.Contains(seen, "WRITING") {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child %d never started writing: %q", p, seen)
			}
			cmds = append(cmds, cmd)
		}
		for _, cmd := range cmds {
			cmd.Process.Kill()
			cmd.Wait()
		}
		x, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		checkCounts(t, x, fmt.Sprintf("after kill %d", round))
		x.Close()
	}
}

// countsChild records, prunes and deletes until killed.
func countsChild(spec string) {
	path, seedText, _ := strings.Cut(spec, "|")
	seed, _ := strconv.Atoi(seedText)
	ctx := context.Background()
	x, err := Open(ctx, path)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	for n := 0; ; n++ {
		run := fmt.Sprint("run", rng.IntN(5))
		var ps []NewPart
		for j := range 1 + rng.IntN(20) {
			ps = append(ps, newPart(run, n, []string{"a", "b"}[j%2], fmt.Sprint("c", j), fmt.Sprint("content ", rng.IntN(50))))
		}
		if _, err := x.Record(ctx, ps); err != nil {
			fmt.Println("record:", err)
			os.Exit(1)
		}
		switch rng.IntN(10) {
		case 0:
			x.Prune(ctx, PruneOptions{Run: fmt.Sprint("run", rng.IntN(5))})
		case 1:
			unref, _ := x.UnreferencedBlobs(ctx)
			var bs []cas.Blob
			for _, r := range unref {
				bs = append(bs, r.Blob)
			}
			x.DeleteBlobRows(ctx, bs)
		}
		if n == 3 {
			fmt.Println("WRITING")
		}
	}
}

// TestCountsDates checks the dates each counts row keeps of its group's
// oldest and newest parts as parts at the bounds, inside them and tied
// with them come and go, through every statement that removes or moves
// parts: a delete by key, each kind of prune, a drop of a lost blob's
// parts, and updates of a part's tool, run and time.
func TestCountsDates(t *testing.T) { forEachBackend(t, testCountsDates) }

func testCountsDates(t *testing.T) {
	ctx := context.Background()
	base := time.Unix(2_000_000, 0)
	c := &clock{base}
	x := MustOpen(t, WithClock(c.now))
	at := func(m int) time.Time { return base.Add(time.Duration(m) * time.Minute) }
	// record records one part of run r and tool tool at minute m, with
	// its own content.
	record := func(m int, r, tool, call string) {
		t.Helper()
		c.t = at(m)
		mustRecord(t, x, newPart(r, m, tool, call, fmt.Sprint("dates ", r, tool, call, m)))
	}
	// want checks the dates of the group of tool in the whole index's
	// stats, and the counters; zero minutes mean no such group.
	want := func(when, tool string, first, last int) {
		t.Helper()
		checkCounts(t, x, when)
		s, err := x.Stats(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range s.ByTool {
			if g.Name != tool {
				continue
			}
			if first == 0 {
				t.Fatalf("%s: tool %s has parts %+v, want none", when, tool, g)
			}
			if !g.First.Equal(at(first)) || !g.Last.Equal(at(last)) {
				t.Fatalf("%s: tool %s from %v to %v, want minutes %d to %d (%v to %v)",
					when, tool, g.First, g.Last, first, last, at(first), at(last))
			}
			return
		}
		if first != 0 {
			t.Fatalf("%s: no tool %s in %+v", when, tool, s.ByTool)
		}
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := x.db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	record(10, "r", "grep", "a")
	want("one part", "grep", 10, 10)
	record(20, "r", "grep", "b")
	record(30, "r", "grep", "c")
	record(20, "r", "grep", "tie")
	record(25, "r", "bash", "a")
	want("three times, one tied", "grep", 10, 30)
	want("another tool", "bash", 25, 25)

	del := func(key string) {
		t.Helper()
		if n, err := x.DeleteKey(ctx, key, 0); err != nil || n != 1 {
			t.Fatalf("DeleteKey %s = %d, %v", key, n, err)
		}
	}
	del("r/20_grep_b.txt")
	want("a part inside the bounds deleted, its tie stays", "grep", 10, 30)
	del("r/10_grep_a.txt")
	want("the oldest deleted", "grep", 20, 30)
	del("r/30_grep_c.txt")
	want("the newest deleted", "grep", 20, 20)
	del("r/20_grep_tie.txt")
	want("the last part deleted", "grep", 0, 0)
	record(40, "r", "grep", "d")
	want("a part again in a group that had none", "grep", 40, 40)
	want("the other tool unmoved", "bash", 25, 25)

	record(50, "r", "grep", "e")
	record(60, "r2", "grep", "a")
	record(5, "r2", "grep", "old") // a clock set back
	want("two runs", "grep", 5, 60)
	if _, err := x.Prune(ctx, PruneOptions{Before: at(41)}); err != nil {
		t.Fatal(err)
	}
	want("pruned by age", "grep", 50, 60)
	if _, err := x.Prune(ctx, PruneOptions{Run: "r2"}); err != nil {
		t.Fatal(err)
	}
	want("a run pruned", "grep", 50, 50)
	record(70, "r3", "grep", "a")
	record(80, "r4", "grep", "a")
	if _, err := x.Prune(ctx, PruneOptions{KeepRuns: 1}); err != nil {
		t.Fatal(err)
	}
	want("all runs but the newest pruned", "grep", 80, 80)

	record(90, "r4", "grep", "shared")
	record(95, "r4", "bash", "b")
	ps, err := x.List(ctx, ListOptions{Run: "r4", Tool: "grep", Limit: 1})
	if err != nil || len(ps) != 1 {
		t.Fatalf("List = %v, %v", ps, err)
	}
	if _, err := x.DeletePartsOf(ctx, []cas.Blob{ps[0].Blob}); err != nil {
		t.Fatal(err)
	}
	want("the newest part's blob lost", "grep", 80, 80)

	// Updates: no statement of the index moves a part, but whichever
	// does keeps the dates.
	exec(`UPDATE parts SET tool = 'grep' WHERE tool = 'bash' AND created_at = ?`, at(95).UnixNano())
	want("a part moved to another tool", "grep", 80, 95)
	want("the tool it left", "bash", 0, 0)
	exec(`UPDATE parts SET created_at = ? WHERE tool = 'grep' AND created_at = ?`, at(1).UnixNano(), at(95).UnixNano())
	want("the newest part's time set back", "grep", 1, 80)
	exec(`UPDATE parts SET created_at = ? WHERE tool = 'grep' AND created_at = ?`, at(99).UnixNano(), at(1).UnixNano())
	want("the oldest part's time set ahead", "grep", 80, 99)
	exec(`UPDATE parts SET bytes = bytes + 1 WHERE tool = 'grep'`)
	want("every part's size changed", "grep", 80, 99)
	exec(`UPDATE parts SET tool = 'bash' WHERE tool = 'grep'`)
	want("every part moved away", "grep", 0, 0)
	want("every part moved in", "bash", 80, 99)
}

// TestCountDriftPartsAndDates: a (run, tool) whose parts and dates are
// both off, recounted in one pass over the parts, gets a line for each.
func TestCountDriftPartsAndDates(t *testing.T) { forEachBackend(t, testCountDriftPartsAndDates) }

func testCountDriftPartsAndDates(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	mustRecord(t, x, newPart("r1", 1, "read_file", "a", "one"), newPart("r1", 2, "grep", "b", "two"))
	checkCounts(t, x, "before the damage")
	if _, err := x.db.ExecContext(ctx, `UPDATE counts SET parts = parts + 2, first_at = first_at - 5 WHERE tool = 'grep'`); err != nil {
		t.Fatal(err)
	}
	drift, err := x.CountDrift(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(drift) != 2 || !strings.Contains(drift[0], `tool "grep": counted 3 parts`) ||
		!strings.Contains(drift[1], `tool "grep": counted first and last part`) {
		t.Errorf("CountDrift = %q, want a line for the parts and one for the dates of grep", drift)
	}
}
