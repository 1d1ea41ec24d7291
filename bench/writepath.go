package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/internal/quiesce"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
)

// uniqueText returns size bytes of text that differ from every other
// call's: i in hex, then filler.
func uniqueText(size, i int) string {
	head := fmt.Sprintf("%016x\n", i)
	return head + strings.Repeat("x", size-len(head))
}

// turnRatios runs a and b n times a round, taking turns, for rounds
// rounds, and returns each round's ratio of a's time to b's and the mean
// time of each call of a and of b over all rounds. settle, when set, runs
// untimed after each call, so that work one call leaves behind it (a
// store's temp pool filling again) does not run while the other is timed.
func turnRatios(rounds, n int, a, b func(i int) error, settle func()) (ratios []float64, meanA, meanB time.Duration, err error) {
	var allA, allB time.Duration
	for r := range rounds {
		var ta, tb time.Duration
		for j := range n {
			i := r*n + j
			timed := func(f func(int) error, into *time.Duration) func() error {
				return func() error {
					t0 := time.Now()
					err := f(i)
					*into += time.Since(t0)
					if settle != nil {
						settle()
					}
					return err
				}
			}
			if err := inTurn(i, timed(a, &ta), timed(b, &tb)); err != nil {
				return nil, 0, 0, err
			}
		}
		ratios = append(ratios, float64(ta)/float64(tb))
		allA += ta
		allB += tb
	}
	total := time.Duration(rounds * n)
	return ratios, allA / total, allB / total, nil
}

// createCosts returns the median over rounds of the mean time to write a
// new file of size bytes in a and in b, without a sync, n files a round in
// each, taking turns. The files stay, as everything the write-path
// targets make does (see writePathTargets).
func createCosts(rounds, n, size int, a, b string) (time.Duration, time.Duration, error) {
	data := make([]byte, size)
	create := func(dir string, r int) (time.Duration, error) {
		t0 := time.Now()
		for i := range n {
			name := filepath.Join(dir, fmt.Sprintf(".create-cost-%d-%d", r, i))
			if err := os.WriteFile(name, data, 0o644); err != nil {
				return 0, err
			}
		}
		return time.Since(t0) / time.Duration(n), nil
	}
	var as, bs []float64
	for r := range rounds {
		ta, err := create(a, r)
		if err != nil {
			return 0, 0, err
		}
		tb, err := create(b, r)
		if err != nil {
			return 0, 0, err
		}
		as, bs = append(as, float64(ta)), append(bs, float64(tb))
	}
	_, ma := minMedian(as)
	_, mb := minMedian(bs)
	return time.Duration(ma), time.Duration(mb), nil
}

// freshDir empties, or makes, the directory name under dir and returns
// its path.
func freshDir(dir, name string) string {
	d := filepath.Join(dir, name)
	os.RemoveAll(d)
	os.MkdirAll(d, 0o755)
	return d
}

// warmDirs makes n new files of size bytes in each of dirs, in turns, then
// flushes the file systems (sync(2)), so that the writes measured next
// neither wait for these bytes nor find the machine's unwritten bytes
// grown by them. The files stay (see writePathTargets).
func warmDirs(n, size int, dirs ...string) error {
	data := make([]byte, size)
	for i := range n {
		for _, dir := range dirs {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf(".warm-%d", i)), data, 0o644); err != nil {
				return err
			}
		}
	}
	syncAll()
	return nil
}

// warmStore warms, with warmDirs, the blobs directory of the store at dir
// with n files and its shard directories with n between them.
func warmStore(dir string, n int) error {
	blobs := filepath.Join(dir, cas.BlobsDir)
	if err := warmDirs(n, 4<<10, blobs); err != nil {
		return err
	}
	shards := make([]string, 256)
	for i := range shards {
		shards[i] = filepath.Join(blobs, fmt.Sprintf("%02x", i))
	}
	return warmDirs(max(1, n/256), 4<<10, shards...)
}

// warmedBare returns the bare two-barrier write into the shard directories
// of s (bareInShard), having warmed s with warmStore and n files. Both the
// store and the bare write then write where thousands of files were made
// before, as in a store in use (see warmDirs and syncNoneRounds): the
// store's temp pool in blobs/, the bare write in the shard directories.
func warmedBare(s *store.Store, n int) (bare func(int) error, err error) {
	return func(i int) error { return bareInShard(s.Dir(), i, nil) }, warmStore(s.Dir(), n)
}

// settled returns f followed by a wait for the work it left s to do in the
// background (its temp pool filling again), so that the work is timed with
// f rather than running while the other side of a turn is timed.
func settled(s *store.Store, f func(int) error) func(int) error {
	return func(i int) error {
		err := f(i)
		quiesce.Wait(s)
		return err
	}
}

// minMedian returns the least and the median of xs.
func minMedian(xs []float64) (float64, float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[0], s[len(s)/2]
}

// maxMedian returns the greatest and the median of xs.
func maxMedian(xs []float64) (float64, float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)-1], s[len(s)/2]
}

// inverses returns 1/x for each x of xs: the speed-ups that ratios of
// times are the inverses of.
func inverses(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = 1 / x
	}
	return out
}

// ratioList shows each round's ratio.
func ratioList(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ")
}

// writePathTargets measures the write path's goals (docs/design.md), each
// beside its baseline in the same run, taking turns call by call, in
// rounds; every ratio is given per round, then its worst and median.
//
// Nothing it makes in dir is removed (the stores, the files that warm
// them, the probes), as the real trace's replays keep their stores: on an
// ext4 without a journal, making a file costs many times more for minutes
// after files near it were removed (the allocator passes over each inode
// freed lately), and a store's directories lie where the one measured
// before it had its own, so that one target's removals would be charged
// to the next. dir goes with the run's work directory.
func writePathTargets(ctx context.Context, dir string, quick bool) ([]target, error) {
	rounds, n := 3, 200
	if quick {
		rounds, n = 1, 30
	}
	var out []target
	sub := func(name string) string { return freshDir(dir, name) }
	always := policy.MustStrategies(policy.Default(policy.Always))
	step := func(h *hook.Hook, run string, i, size int) error {
		_, err := h.Offload(ctx, hook.Step{Run: run, Number: i},
			[]hook.Result{{Tool: "read_file", CallID: "c", Parts: []hook.Part{hook.Text(uniqueText(size, i))}}})
		return err
	}

	// A durable hook step of one 16 KiB part against the bare two-barrier
	// write (temp, write, fsync, rename, directory fsync) into the same
	// shard directories, for the default and for the mode that commits
	// the index row without a sync.
	for _, mode := range []string{"full", store.DurabilityRecentKeysMayBeLost} {
		opts, err := store.DurabilityOptions(mode)
		if err != nil {
			return nil, err
		}
		s, err := store.Open(ctx, sub("step-"+mode), append(opts, store.WithCreate())...)
		if err != nil {
			return nil, err
		}
		h, err := hook.New(s, always)
		if err != nil {
			return nil, err
		}
		bare, err := warmedBare(s, 15*n)
		if err != nil {
			s.Close()
			return nil, err
		}
		// The store's temp pool fills again behind each step: that work is
		// timed with the step, so that none of it runs while the bare write
		// is timed, and the step pays for the file the bare write makes.
		paid := settled(s, func(i int) error { return step(h, "r", i, 16<<10) })
		b0 := s.Barriers()
		ratios, stepT, bareT, err := turnRatios(rounds, n, paid, bare, nil)
		barriers := float64(s.Barriers()-b0) / float64(rounds*n)
		if err != nil {
			s.Close()
			return nil, err
		}
		worst, med := maxMedian(ratios)
		what := "durable hook step, one 16 KiB part"
		if mode != "full" {
			what += ", durability " + mode
		}
		measured := fmt.Sprintf("%.2f × worst round, %.2f × median (rounds %s; %v against %v; %.2f barriers a step; the store's temp pool filled again within the step's time)",
			worst, med, ratioList(ratios), stepT.Round(time.Microsecond), bareT.Round(time.Microsecond), barriers)
		if mode == "full" {
			// What a writer waits: the pool's filling runs after the step
			// returns (between an agent's steps), untimed.
			off := rounds * n
			lat, latT, latBare, err := turnRatios(rounds, n, func(i int) error { return step(h, "r", off+i, 16<<10) },
				func(i int) error { return bare(off + i) }, func() { quiesce.Wait(s) })
			if err != nil {
				s.Close()
				return nil, err
			}
			latWorst, latMed := maxMedian(lat)
			measured += fmt.Sprintf("; the step's own wait, the filling untimed after it: %.2f × worst round, %.2f × median (%v against %v)",
				latWorst, latMed, latT.Round(time.Microsecond), latBare.Round(time.Microsecond))
			// The floor of any store that syncs a log of its own beside
			// the blob's directory.
			floor, err := logFloor(s.Dir(), rounds, n, 2*off, bare)
			if err != nil {
				s.Close()
				return nil, err
			}
			measured += "; " + floor
		}
		measured += fmt.Sprintf("; in directories where %d files had been made", 15*n)
		out = append(out, target{what, "≤ 1.15 × the bare two-barrier write in the same directories", measured, med, med <= 1.15})
		s.Close()
	}

	// sync=none: a hook step of unique 4 KiB text into the CAS store
	// against the same through a plain directory store that writes each
	// file with WriteFile, as Haystack's does: in the stores' directory,
	// then on a tmpfs, where neither a disk nor a directory's history sets
	// the pace. The target is met only where both are.
	{
		measured, med, err := syncNoneRounds(ctx, sub("none"), rounds, n, step)
		if err != nil {
			return nil, err
		}
		met := med >= 0.8
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			shm, err := os.MkdirTemp("/dev/shm", "toolcas-bench-")
			if err != nil {
				return nil, err
			}
			onShm, shmMed, err := syncNoneRounds(ctx, shm, rounds, n, step)
			os.RemoveAll(shm)
			if err != nil {
				return nil, err
			}
			measured += "; on tmpfs (/dev/shm): " + onShm
			met = met && shmMed >= 0.8
			med = min(med, shmMed)
		}
		out = append(out, target{"hook step with sync=none, unique 4 KiB text", "≥ 0.8 × a plain WriteFile directory store's speed",
			measured, med, met})
	}

	// Four runs writing at once in one process, durable, one 16 KiB part a
	// step, against one run writing alone: the barriers each step costs
	// and the steps a second.
	{
		s, err := store.Open(ctx, sub("concurrent"), store.WithCreate())
		if err != nil {
			return nil, err
		}
		// The last block: its store closes as writePathTargets returns, on
		// every path.
		defer s.Close()
		h, err := hook.New(s, always)
		if err != nil {
			return nil, err
		}
		var aloneB, fourB int64
		next := 0
		alone := func(int) error {
			b0 := s.Barriers()
			for range 4 {
				next++
				if err := step(h, "alone", next, 16<<10); err != nil {
					return err
				}
			}
			aloneB += s.Barriers() - b0
			return nil
		}
		four := func(int) error {
			b0 := s.Barriers()
			var wg sync.WaitGroup
			errs := make([]error, 4)
			base := next
			next += 4
			for w := range 4 {
				wg.Go(func() { errs[w] = step(h, fmt.Sprint("run", w), base+w+1, 16<<10) })
			}
			wg.Wait()
			fourB += s.Barriers() - b0
			return errorsJoin(errs)
		}
		// Writes share a barrier only while the machine holds little
		// unwritten (the barrier would wait for all of it; see
		// cas.BarrierUnwrittenMax), and the targets before this one leave
		// tens of MiB: flushed first, so that the rounds start alike.
		unwrittenBefore, _ := cas.UnwrittenBytes()
		syncAll()
		// The temp pool fills again within each side's time.
		ratios, fourT, aloneT, err := turnRatios(rounds, n/2, settled(s, four), settled(s, alone), nil)
		if err != nil {
			return nil, err
		}
		// The file system's own gain from writing at once: four bare
		// two-barrier writes at once against four one after another, into
		// the same shard directories.
		bare, err := warmedBare(s, 15*n)
		if err != nil {
			return nil, err
		}
		bareFour := func(i int) error {
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for w := range 4 {
				wg.Go(func() { errs[w] = bare(8*i + w) })
			}
			wg.Wait()
			return errorsJoin(errs)
		}
		bareAlone := func(i int) error {
			for w := range 4 {
				if err := bare(8*i + 4 + w); err != nil {
					return err
				}
			}
			return nil
		}
		bareRatios, _, _, err := turnRatios(rounds, n/2, bareFour, bareAlone, nil)
		if err != nil {
			return nil, err
		}
		bareWorst, bareMed := minMedian(inverses(bareRatios))
		steps := float64(rounds * n / 2 * 4)
		speedups := inverses(ratios)
		worst, med := minMedian(speedups)
		perStep := float64(fourB) / steps
		out = append(out, target{"4 runs at once in one process, durable, 16 KiB: barriers a step", "≤ 0.5",
			fmt.Sprintf("%.2f (one run alone: %.2f; the machine held %.1f MiB unwritten before the rounds, flushed first)",
				perStep, float64(aloneB)/steps, float64(unwrittenBefore)/(1<<20)), perStep, perStep <= 0.5})
		out = append(out, target{"4 runs at once in one process, durable, 16 KiB: throughput", "≥ 2 × one run writing alone",
			fmt.Sprintf("%.2f × worst round, %.2f × median (rounds %s; 4 steps in %v against %v); the file system's own gain, four bare two-barrier writes at once against one after another: %.2f × worst round, %.2f × median",
				worst, med, ratioList(speedups), fourT.Round(time.Microsecond), aloneT.Round(time.Microsecond), bareWorst, bareMed),
			med, med >= 2})
	}
	return out, nil
}

// stepLogBytes is about what a durable one-part step appends to the
// index's log.
const stepLogBytes = 6656

// logFloor measures, in turns, the bare write with a log write of about
// what a step logs and its fsync issued beside the directory's sync,
// against the bare write alone, and says it. The log is grown once first,
// as SQLite's write-ahead log is after its first checkpoint, so that its
// writes overwrite.
func logFloor(dir string, rounds, n, off int, bare func(int) error) (string, error) {
	log, err := os.OpenFile(filepath.Join(dir, "floor-log"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", err
	}
	defer func() {
		log.Close()
		os.Remove(log.Name())
	}()
	const slots = 128
	if _, err := log.WriteAt(make([]byte, slots*stepLogBytes), 0); err != nil {
		return "", err
	}
	if err := log.Sync(); err != nil {
		return "", err
	}
	page := []byte(uniqueText(stepLogBytes, 0))
	logged := func(i int) error {
		return bareInShard(dir, off+i, func() error {
			if _, err := log.WriteAt(page, int64(i%slots)*stepLogBytes); err != nil {
				return err
			}
			return log.Sync()
		})
	}
	ratios, loggedT, bareT, err := turnRatios(rounds, n, logged, func(i int) error { return bare(off + rounds*n + i) }, nil)
	if err != nil {
		return "", err
	}
	worst, med := maxMedian(ratios)
	return fmt.Sprintf("the floor of a store with a log of its own, the bare write with %d bytes written to a log and synced beside the directory's sync: %.2f × worst round, %.2f × median (%v against %v)",
		stepLogBytes, worst, med, loggedT.Round(time.Microsecond), bareT.Round(time.Microsecond)), nil
}

// syncNoneRounds measures, under dir, a hook step of unique 4 KiB text into
// a CAS store without fsync against the same into a plain directory store
// that writes each file with WriteFile, in turns, in rounds of 5n, with
// the floor of any store writing the CAS store's index (indexFloor); it
// says what it measured and returns the median of the CAS store's speed
// as a share of the directory store's.
func syncNoneRounds(ctx context.Context, dir string, rounds, n int, step func(*hook.Hook, string, int, int) error) (string, float64, error) {
	sub := func(name string) string { return freshDir(dir, name) }
	always := policy.MustStrategies(policy.Default(policy.Always))
	s, err := store.Open(ctx, sub("cas"), store.WithCreate(), store.WithDurability(cas.SyncNone))
	if err != nil {
		return "", 0, err
	}
	defer s.Close()
	d, err := hook.NewDirStore(sub("dir"))
	if err != nil {
		return "", 0, err
	}
	hc, err := hook.New(s, always)
	if err != nil {
		return "", 0, err
	}
	hd, err := hook.New(d, always)
	if err != nil {
		return "", 0, err
	}
	// What writing a new file costs where each store makes its files
	// (the CAS store, without syncs, in its shard directories, a blob
	// under its own name; the directory store in the run's directory),
	// fresh, warmed and after the rounds: on one file system it can
	// differ tenfold between directories and over time, and it weighs on
	// both sides of the ratio. One shard directory stands for them all.
	casShard, dirRun := filepath.Join(s.Dir(), cas.BlobsDir, "00"), filepath.Join(d.Root(), "r")
	if err := os.MkdirAll(dirRun, 0o755); err != nil {
		return "", 0, err
	}
	casBefore, dirBefore, err := createCosts(rounds, n/2, 4<<10, casShard, dirRun)
	if err != nil {
		return "", 0, err
	}
	// A store in use writes where thousands of files were made before:
	// both stores' directories are warmed so (the CAS store's shard
	// directories with as many files between them, and its blobs
	// directory), and the rounds measure that state rather than a fresh
	// directory's, where making a file can cost ten times a step of
	// either store.
	if err := warmStore(s.Dir(), 15*n); err != nil {
		return "", 0, err
	}
	if err := warmDirs(15*n, 4<<10, dirRun); err != nil {
		return "", 0, err
	}
	casWarm, dirWarm, err := createCosts(rounds, n/2, 4<<10, casShard, dirRun)
	if err != nil {
		return "", 0, err
	}
	// Whatever the CAS store does in the background after a step (rows
	// committed together) falls within its steps' time. The rounds follow
	// a first one, reported apart: a new store's first thousand writes
	// also grow its index's log, once, where a store in use reuses it.
	dirStep := func(i int) error { return step(hd, "r", i, 4<<10) }
	casStep := settled(s, func(i int) error { return step(hc, "r", i, 4<<10) })
	first, _, _, err := turnRatios(1, 5*n, dirStep, casStep, nil)
	if err != nil {
		return "", 0, err
	}
	ratios, dirT, casT, err := turnRatios(rounds, 5*n,
		func(i int) error { return dirStep(5*n + i) }, func(i int) error { return casStep(5*n + i) }, nil)
	if err != nil {
		return "", 0, err
	}
	casAfter, dirAfter, err := createCosts(rounds, n/2, 4<<10, casShard, dirRun)
	if err != nil {
		return "", 0, err
	}
	// The floor of any store that records its parts in this index, in
	// the directory the rounds wrote in, still warmed.
	floor, err := indexFloor(ctx, sub("index"), rounds, 5*n, func(i int) error { return step(hd, "r", 5*(rounds+1)*n+i, 4<<10) })
	if err != nil {
		return "", 0, err
	}
	// ratios are directory time over CAS time: the CAS store's speed as a
	// share of the directory store's.
	worst, med := minMedian(ratios)
	lag, err := visibilityLag(ctx, sub("seen"), 5*n)
	if err != nil {
		return "", 0, err
	}
	return fmt.Sprintf("%.2f × worst round, %.2f × median (rounds %s, after a first round of %d steps each, %.2f ×; %v a step against %v; the CAS store's rows committed together in the background, %s; the rounds ran once %d files had been made in each store's directory: writing a new 4 KiB file with WriteFile took %v in the fresh directory, %v once warmed and %v after the rounds in a shard directory of the CAS store, %v, %v and %v in the directory store's); %s",
		worst, med, ratioList(ratios), 5*n, first[0], casT.Round(time.Microsecond), dirT.Round(time.Microsecond), lag, 15*n,
		casBefore.Round(100*time.Nanosecond), casWarm.Round(100*time.Nanosecond), casAfter.Round(100*time.Nanosecond),
		dirBefore.Round(100*time.Nanosecond), dirWarm.Round(100*time.Nanosecond), dirAfter.Round(100*time.Nanosecond), floor), med, nil
}

// visibilityLag measures how long after a sync=none write returns another
// store on the same directory (another process, to SQLite: connections
// of their own) first finds its key, over n writes a few milliseconds
// apart, and says it: for a store that may write, whose read folds the
// steps staged, then for one opened read-only, which sees them once the
// writer folds them.
func visibilityLag(ctx context.Context, dir string, n int) (string, error) {
	w, err := store.Open(ctx, dir, store.WithCreate(), store.WithDurability(cas.SyncNone))
	if err != nil {
		return "", err
	}
	defer w.Close()
	h, err := hook.New(w, policy.MustStrategies(policy.Default(policy.Always)))
	if err != nil {
		return "", err
	}
	var said []string
	for _, readOnly := range []bool{false, true} {
		var opts []store.Option
		if readOnly {
			opts = append(opts, store.ReadOnly())
		}
		r, err := store.Open(ctx, dir, opts...)
		if err != nil {
			return "", err
		}
		lags, err := lagsSeen(ctx, h, r, len(said)*n, n)
		r.Close()
		if err != nil {
			return "", err
		}
		who := "another store"
		if readOnly {
			who = "one opened read-only"
		}
		said = append(said, fmt.Sprintf("%s saw each write %.1f ms after it returned at the median, %.1f ms at p99, %.1f ms at most",
			who, percentile(lags, 50), percentile(lags, 99), slices.Max(lags)))
	}
	return fmt.Sprintf("%s (%d writes each)", strings.Join(said, "; "), n), nil
}

// lagsSeen writes n steps through h, numbered from first, each once r
// finds the one before, and returns how long after each returned r found
// it, in milliseconds.
func lagsSeen(ctx context.Context, h *hook.Hook, r *store.Store, first, n int) ([]float64, error) {
	lags := make([]float64, 0, n)
	for i := first; i < first+n; i++ {
		out, err := h.Offload(ctx, hook.Step{Run: "seen", Number: i},
			[]hook.Result{{Tool: "t", CallID: "c", Parts: []hook.Part{hook.Text(fmt.Sprintf("%d %s", i, strings.Repeat("x", 4<<10)))}}})
		if err != nil {
			return nil, err
		}
		returned := time.Now()
		key := hook.References(out[0])[0].Key
		for {
			if _, err := r.Resolve(ctx, "", key); err == nil {
				break
			} else if !errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
			if time.Since(returned) > 10*time.Second {
				return nil, fmt.Errorf("another store did not see %s within 10 s", key)
			}
			time.Sleep(200 * time.Microsecond)
		}
		lags = append(lags, float64(time.Since(returned).Microseconds())/1000)
		time.Sleep(time.Duration(i%7) * time.Millisecond)
	}
	return lags, nil
}

// floorBatch is how many parts share one transaction in indexFloor's
// second measure: what one run's steps could share if a pointer's key
// did not have to resolve before the next step.
const floorBatch = 25

// indexFloor measures, in turns, the directory store's step alone against
// it with the step's part recorded beside it, in a goroutine of its own,
// in an index like the store's (without fsync, empty at first): the least
// any store writing WriteFile's file and this index's row pays, since its
// blob costs at least the file. It does so with each part in a transaction
// of its own, then with floorBatch parts to a transaction (the step that
// completes a batch records it). It says both as the directory store's
// speed share, as the sync=none target reads.
func indexFloor(ctx context.Context, dir string, rounds, n int, dirStep func(int) error) (string, error) {
	x, err := index.Open(ctx, filepath.Join(dir, "index.db"), index.WithDurability(cas.SyncNone))
	if err != nil {
		return "", err
	}
	defer x.Close()
	part := func(i int) index.NewPart {
		text := uniqueText(4<<10, i)
		return index.NewPart{Key: fmt.Sprintf("r/%d_read_file_c.txt", i), Run: "r", Step: i, Tool: "read_file", CallID: "c",
			Part: -1, Kind: catalog.KindText, MIME: "text/plain", Chars: int64(len(text)), Bytes: int64(len(text)),
			Blob: cas.Blob{Digest: cas.Sum([]byte(text)), Ext: ".txt"}}
	}
	var pending []index.NewPart
	// recorded runs the directory store's step with, beside it, the
	// record of the parts due: batch parts once batch are pending. The
	// parts are made, and their text hashed, before the rounds, untimed.
	recorded := func(batch, off int) func(int) error {
		parts := make([]index.NewPart, rounds*n)
		for i := range parts {
			parts[i] = part(off + i)
		}
		return func(i int) error {
			pending = append(pending, parts[i])
			if len(pending) < batch {
				return dirStep(off + i)
			}
			ps := pending
			pending = nil
			done := make(chan error, 1)
			go func() {
				_, err := x.Record(ctx, ps)
				done <- err
			}()
			return errors.Join(dirStep(off+i), <-done)
		}
	}
	alone := func(off int) func(int) error { return func(i int) error { return dirStep(off + i) } }
	var out []string
	for k, batch := range []int{1, floorBatch} {
		off := 2 * k * rounds * n
		ratios, dirT, floorT, err := turnRatios(rounds, n, alone(off+rounds*n), recorded(batch, off), nil)
		if err != nil {
			return "", err
		}
		if len(pending) > 0 {
			if _, err := x.Record(ctx, pending); err != nil {
				return "", err
			}
			pending = nil
		}
		worst, med := minMedian(ratios)
		what := "each part in a transaction of its own"
		if batch > 1 {
			what = fmt.Sprintf("%d parts to a transaction", batch)
		}
		out = append(out, fmt.Sprintf("%s, %.2f × worst round, %.2f × median (%v against %v)", what, worst, med,
			dirT.Round(time.Microsecond), floorT.Round(time.Microsecond)))
	}
	return "the floor of a store that records each part in an index like this one, the directory store's step with the part recorded beside it: " +
		strings.Join(out, "; "), nil
}

// bareInShard makes the i-th bare durable write of unique 16 KiB text into
// a shard directory of the store at dir, with beside (see bareWriteBeside).
func bareInShard(dir string, i int, beside func() error) error {
	shard := filepath.Join(dir, cas.BlobsDir, fmt.Sprintf("%02x", i%256))
	return bareWriteBeside(shard, filepath.Join(shard, fmt.Sprint("bare-", i, ".txt")), []byte(uniqueText(16<<10, -1-i)), true, beside)
}

// errorsJoin returns the first error of errs.
func errorsJoin(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// runWritePath measures only the write path's targets, in a child process
// as the others are, and prints them with the machine's load.
func runWritePath(ctx context.Context, o options, stdout io.Writer) error {
	work, removeWork, err := workDir(o.dir, "toolcas-bench-")
	if err != nil {
		return err
	}
	defer removeWork()
	load := loadAverage()
	var ts []target
	if err := runChild(ctx, "writepath", targetsConfig{Dir: filepath.Join(work, "write-path"), Quick: o.quick}, &ts); err != nil {
		return fmt.Errorf("write path: %w", err)
	}
	after := loadAverage()
	m := describeMachine(work)
	fmt.Fprintf(stdout, "# %s\n\nMachine: %s, %d cores, Linux %s, stores on %s; load average before %s, after %s\n\n| what | target | measured | met |\n| --- | --- | --- | --- |\n",
		o.command, m.CPU, m.Cores, m.Kernel, m.FileSystem, load, after)
	for _, t := range ts {
		met := "yes"
		if !t.Met {
			met = "**no**"
		}
		fmt.Fprintf(stdout, "| %s | %s | %s | %s |\n", t.What, t.Target, t.Measured, met)
	}
	return nil
}

// loadAverage returns the machine's load averages over 1, 5 and 15
// minutes, "" where they cannot be read.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], ", ")
	}
	return ""
}
