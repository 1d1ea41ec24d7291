package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// Problem is one thing verify found wrong.
type Problem struct {
	// Path is the file's absolute path.
	Path string
	// Blob is set when the problem concerns a blob name.
	Blob cas.Blob
	// Keys are the keys whose parts use the blob, when any do.
	Keys []string
	// Reason says what is wrong: "content hashes to blake3:…", "truncated:
	// 10 of 4096 bytes", "missing", "a directory where a blob should be".
	Reason string
}

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Progress, when set, is called as blobs are checked, with bytes done
	// and bytes in all.
	Progress func(done, total int64)
	// Grace is gc's grace period, DefaultGrace when zero: orphans younger
	// than it are counted in RecentOrphans.
	Grace time.Duration
	// QuickIndexCheck runs SQLite's quick check of the index instead of its
	// full integrity check. The quick check reads every page and checks its
	// structure, the order of its keys and the tables' constraints, but not
	// that every index holds exactly its table's rows, and gc trusts those
	// indexes (that no part uses a blob, the rows of a shard, the last look
	// for a blob's row): a damaged index that only the full check finds
	// could let gc delete a blob still referenced. It is a few times faster
	// on a large index, for a frequent check between full ones. Repair
	// always runs the full check.
	QuickIndexCheck bool
}

// VerifyResult is what Verify found.
type VerifyResult struct {
	// OK is false when anything is corrupt or missing, or the index is
	// damaged. Orphans and temp files are reported, not failures.
	OK bool
	// Checked counts the blob files re-hashed.
	Checked int
	// CheckedBytes counts their bytes.
	CheckedBytes int64
	// Corrupt lists blob files whose bytes do not match their names, and
	// things standing where a referenced blob should be.
	Corrupt []Problem
	// Missing lists blobs that rows use and that are not on disk.
	Missing []Problem
	// Orphans lists blob files no row uses (gc removes them) and names under
	// blobs/ that are not blobs.
	Orphans []Problem
	// Temp lists temp files (gc removes them once past the grace period).
	Temp []Problem
	// Quarantined lists blobs that rows use and that Repair moved aside as
	// corrupt: their keys read nothing until the same content is written
	// again. They are known damage, already handled, and not a failure.
	Quarantined []Problem
	// IndexProblems lists what SQLite's integrity check reported.
	IndexProblems []string
	// CountDrift lists the counters behind stats that differ from a
	// recount of the rows, one line each; Repair sets them right.
	CountDrift []string
	// RecentOrphans counts the orphans younger than the grace period. They
	// are suspicious: rows lost (the index's -wal file deleted after a
	// crash, say) leave exactly such blobs, and gc deletes them once the
	// grace period is over. Writes under way make a few, briefly.
	RecentOrphans int
}

// Verify re-hashes every blob file and checks it against its name and the
// index: corrupt, truncated or misnamed blobs, blobs missing from disk,
// orphans, stray temp files, and the index's own integrity. Blobs found
// whole are marked verified in the index, unless the store is read-only.
func (s *Store) Verify(ctx context.Context, o VerifyOptions) (VerifyResult, error) {
	if s.remote != nil {
		return s.verifyRemote(ctx, o)
	}
	return s.verify(ctx, o, false)
}

// verify is Verify; held says the caller holds gc.lock exclusively, so
// that a second look needs no lock of its own. It goes a shard at a time:
// the walk's entries of one shard against the index's rows of that shard,
// so that it holds one shard's rows, the names of the packed blobs, and
// what it found wrong, never a list of every blob.
func (s *Store) verify(ctx context.Context, o VerifyOptions, held bool) (VerifyResult, error) {
	var res VerifyResult
	// The checks below stop when verify returns.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// SQLite's integrity check and the recount of the counters behind
	// stats each read the whole database: they run beside the re-hashing,
	// and beside each other, each reading from the start, before any mark
	// grows the index's log.
	type check struct {
		problems []string
		err      error
	}
	checked := make(chan check, 1)
	recounted := make(chan check, 1)
	go func() {
		var p []string
		var err error
		if o.QuickIndexCheck {
			p, err = s.index.QuickCheck(ctx)
		} else {
			p, err = s.index.IntegrityCheck(ctx)
		}
		checked <- check{p, err}
	}()
	go func() {
		var c check
		c.problems, c.err = s.index.CountDrift(ctx)
		recounted <- c
	}()
	integrity := func() ([]string, error) {
		c := <-checked
		checked <- c
		return c.problems, c.err
	}
	// damaged reports an index too damaged to read: verify reports what
	// the integrity check found rather than the first query that failed.
	damaged := func() bool {
		p, err := integrity()
		res.IndexProblems = p
		return err == nil && len(p) > 0
	}
	var total int64
	if o.Progress == nil {
		// The total is only for progress.
	} else if st, err := s.index.Stats(ctx, ""); err == nil {
		total = st.StoredBytes + st.UnreferencedBytes
	} else if damaged() {
		return res, nil
	} else {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	// The blobs packs hold: a row using one is not missing when its loose
	// file is not there, and a loose copy found whole spares the packed one.
	packs, _, _, err := s.blobs.Packs(ctx)
	if err != nil {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	inPacks := map[cas.Blob]bool{}
	for _, p := range packs {
		for _, e := range p.Entries {
			inPacks[e.Blob] = true
		}
	}
	ahead, err := newShardRows(ctx, s.index)
	if err != nil && damaged() {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	v := &verifier{s: s, o: o, res: &res, total: total, inPacks: inPacks, seen: map[cas.Blob]bool{},
		mtimes: map[cas.Blob]time.Time{}, used: map[cas.Blob]index.ShardBlob{}, ahead: ahead, whole: newWholeRows(), start: s.now()}
	// The walk lists names only: re-hashing a file looks at it anyway.
	err = v.run(ctx, s.blobs.WalkNames)
	if err == nil {
		err = v.markWhole(ctx)
	}
	if err != nil && damaged() {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	problems, err := integrity()
	if err != nil {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	res.IndexProblems = problems
	var whole []cas.Blob
	isUsed := func(b cas.Blob) bool {
		r, err := s.index.Blob(ctx, b)
		return err == nil && r.Parts > 0
	}
	if err := s.verifyPacks(ctx, &res, isUsed, v.seen, &whole); err != nil {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	if len(whole) > 0 && !s.readOnly {
		if err := s.index.MarkVerified(ctx, whole, s.now()); err != nil {
			return res, fmt.Errorf("store: verify: %w", err)
		}
	}
	missing := slices.DeleteFunc(v.missing, func(b cas.Blob) bool { return v.seen[b] })
	if len(missing) > 0 || len(res.Orphans) > 0 {
		// gc may have collected, and writers stored, blobs since the walk:
		// look again while gc cannot sweep.
		if missing, err = s.recheck(ctx, missing, &res, held); err != nil {
			return res, fmt.Errorf("store: verify: %w", err)
		}
	}
	var lost []index.Part
	for _, b := range missing {
		ps, err := s.index.Sharing(ctx, b)
		if err != nil {
			return res, fmt.Errorf("store: verify: %w", err)
		}
		lost = append(lost, ps...)
	}
	quarantined := map[cas.Blob]bool{}
	if len(lost) > 0 {
		if quarantined, err = s.Quarantined(ctx); err != nil {
			return res, fmt.Errorf("store: verify: %w", err)
		}
	}
	byBlob := map[cas.Blob]*Problem{}
	for _, p := range lost {
		pr, ok := byBlob[p.Blob]
		if !ok {
			pr = &Problem{Path: s.blobs.Path(p.Blob), Blob: p.Blob, Reason: "missing"}
			if quarantined[p.Blob] {
				pr.Reason = "quarantined as corrupt; writing the same content again heals it"
			}
			byBlob[p.Blob] = pr
		}
		pr.Keys = append(pr.Keys, p.Key)
	}
	for b, pr := range byBlob {
		if quarantined[b] {
			res.Quarantined = append(res.Quarantined, *pr)
		} else {
			res.Missing = append(res.Missing, *pr)
		}
	}
	sort.Slice(res.Missing, func(i, j int) bool { return res.Missing[i].Path < res.Missing[j].Path })
	sort.Slice(res.Quarantined, func(i, j int) bool { return res.Quarantined[i].Path < res.Quarantined[j].Path })
	grace := o.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	cutoff := s.now().Add(-grace)
	for _, o := range res.Orphans {
		if t, ok := v.mtimes[o.Blob]; ok && t.After(cutoff) {
			res.RecentOrphans++
		}
	}
	c := <-recounted
	if len(res.IndexProblems) > 0 {
		// A damaged index has nothing worth recounting.
		c = check{}
	}
	if c.err != nil {
		return res, fmt.Errorf("store: verify: %w", c.err)
	}
	res.CountDrift = c.problems
	res.OK = len(res.Corrupt) == 0 && len(res.Missing) == 0 && len(res.IndexProblems) == 0 && len(res.CountDrift) == 0
	return res, nil
}

// verifier holds what verify keeps between shards.
type verifier struct {
	s       *Store
	o       VerifyOptions
	res     *VerifyResult
	total   int64
	inPacks map[cas.Blob]bool
	// seen holds the packed blobs found as loose files, and the blobs
	// found corrupt (not also missing).
	seen map[cas.Blob]bool
	// used holds the current shard's rows that parts use.
	used map[cas.Blob]index.ShardBlob
	// missing lists blobs rows use that the walk did not find.
	missing []cas.Blob
	// whole holds the rows of blobs found whole, marked verified once
	// the walk is done.
	whole  *wholeRows
	mtimes map[cas.Blob]time.Time
	ahead  *shardRows
	// start is when verify began: rows first stored since are not the
	// rows it read.
	start time.Time
}

// verifyJob is what the walk found in one shard (or, with shard -1,
// outside the shards), each entry with what re-hashing it said once done
// is done.
type verifyJob struct {
	shard   int
	entries []*verifyEntry
	done    sync.WaitGroup
}

type verifyEntry struct {
	job *verifyJob
	e   cas.Entry
	err error
}

// submit hands the entry to a worker, or, once ctx is done, sets its error
// to ctx's, since no worker will hash it, and marks it done.
func (it *verifyEntry) submit(ctx context.Context, work chan<- *verifyEntry) error {
	select {
	case work <- it:
		return nil
	case <-ctx.Done():
		it.err = ctx.Err()
		it.job.done.Done()
		return it.err
	}
}

// errWalkOrder says a walk did not give each shard's files in one run.
var errWalkOrder = errors.New("blob walk out of order")

// run walks the blob files and checks them in three stages that overlap:
// the walk lists a shard's files and hands each to a worker per core that
// re-hashes it, while a judge takes the shards in the walk's order, each
// once all its files are re-hashed, against the shard's rows (read ahead
// of it) and marks the blobs found whole. Only a few shards' entries are
// in flight at once.
func (v *verifier) run(ctx context.Context, walk func(context.Context, func(cas.Entry) error) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan *verifyEntry, 256)
	jobs := make(chan *verifyJob, 2)
	var workers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for it := range work {
				it.e, it.err = v.hash(ctx, it.e)
				it.job.done.Done()
			}
		}()
	}
	judged := make(chan error, 1)
	go func() {
		var err error
		var marked [256]bool
		for job := range jobs {
			job.done.Wait()
			if err != nil {
				continue // drain
			}
			if job.shard < 0 {
				for _, it := range job.entries {
					if err = v.entry(ctx, it.e, it.err); err != nil {
						break
					}
				}
			} else if marked[job.shard] {
				// Its rows were judged with the first run's files only:
				// the files of this run would be called orphans, or their
				// blobs missing.
				err = fmt.Errorf("%w: the walk gave shard %02x's files in two separate runs", errWalkOrder, job.shard)
			} else {
				marked[job.shard] = true
				err = v.shard(ctx, byte(job.shard), job.entries)
			}
			if err != nil {
				cancel()
			}
		}
		// The shards the walk did not find (empty ones packing removed).
		for sh := 0; sh < 256 && err == nil; sh++ {
			if !marked[sh] {
				err = v.shard(ctx, byte(sh), nil)
			}
		}
		judged <- err
	}()
	var job *verifyJob
	send := func() {
		if job != nil {
			jobs <- job
			job = nil
		}
	}
	walkErr := walk(ctx, func(e cas.Entry) error {
		sh, ok := shardOf(e.RelPath)
		if !ok {
			// Names outside the shards: no row can name them.
			sh = -1
		}
		if job == nil || job.shard != sh {
			send()
			job = &verifyJob{shard: sh}
			if sh >= 0 {
				v.ahead.start(ctx, sh)
			}
		}
		it := &verifyEntry{job: job, e: e}
		job.entries = append(job.entries, it)
		job.done.Add(1)
		return it.submit(ctx, work)
	})
	send()
	close(work)
	workers.Wait()
	close(jobs)
	err := <-judged
	if err == nil || (walkErr != nil && errors.Is(err, context.Canceled)) {
		err = walkErr
	}
	return err
}

// shard checks one shard's entries, re-hashed, against its rows.
func (v *verifier) shard(ctx context.Context, sh byte, entries []*verifyEntry) error {
	rows, err := v.ahead.get(ctx, sh)
	if err != nil {
		return err
	}
	clear(v.used)
	for _, id := range rows {
		if r := v.ahead.row(id); r.Used {
			v.used[r.Blob] = r
		}
	}
	for _, it := range entries {
		if err := v.entry(ctx, it.e, it.err); err != nil {
			return err
		}
	}
	for b := range v.used {
		if !v.inPacks[b] {
			v.missing = append(v.missing, b)
		}
	}
	return nil
}

// markWhole marks the blobs found whole as verified, unless the store is
// read-only.
func (v *verifier) markWhole(ctx context.Context) error {
	if v.s.readOnly || v.whole.len() == 0 {
		return nil
	}
	return v.whole.mark(ctx, v.s.index, v.start, v.s.now())
}

// hash re-hashes a blob entry: nil when it matches its name. It returns
// the entry with its size and time read, when the walk gave it without
// them and the file could be opened.
func (v *verifier) hash(ctx context.Context, e cas.Entry) (cas.Entry, error) {
	if e.Kind != cas.EntryBlob {
		return e, nil
	}
	if v.s.remote != nil {
		return e, v.s.verifyObject(ctx, e.Blob)
	}
	if !e.Lazy {
		return e, v.s.blobs.Verify(ctx, e.Blob)
	}
	fi, err := v.s.blobs.VerifyInfo(ctx, e.Blob)
	if fi != nil {
		e.Size, e.ModTime, e.Lazy = fi.Size(), fi.ModTime(), false
	}
	return e, err
}

// entry checks one name the walk found, given what hash said of it; a
// blob the current shard's rows use is taken off v.used once found.
func (v *verifier) entry(ctx context.Context, e cas.Entry, err error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s, res := v.s, v.res
	path := s.abs(e.RelPath)
	switch e.Kind {
	case cas.EntryTemp:
		// One a live writer holds is being written or waits in its pool.
		if s.blobs == nil || !s.blobs.TempInUse(e.RelPath) {
			res.Temp = append(res.Temp, Problem{Path: path, Reason: "temp file"})
		}
		return nil
	case cas.EntryStray:
		if e.Vanished {
			// gc or a writer's rename took it since the listing.
			return nil
		}
		if e.BadShard {
			res.Corrupt = append(res.Corrupt, Problem{Path: path, Reason: e.Problem})
			return nil
		}
		p := Problem{Path: path, Blob: e.Blob, Reason: e.Problem}
		if _, ok := v.used[e.Blob]; ok && !e.Blob.Digest.IsZero() && e.RelPath == e.Blob.RelPath() {
			delete(v.used, e.Blob)
			v.seen[e.Blob] = true
			p.Keys = s.keys(ctx, e.Blob)
			res.Corrupt = append(res.Corrupt, p)
		} else {
			res.Orphans = append(res.Orphans, p)
		}
		return nil
	}
	if errors.Is(err, cas.ErrNotFound) {
		// Removed since the walk listed it: if a row still uses it,
		// the re-check under the lock says so.
		return nil
	}
	r, isUsed := v.used[e.Blob]
	delete(v.used, e.Blob)
	if v.inPacks[e.Blob] {
		v.seen[e.Blob] = true
	}
	res.Checked++
	res.CheckedBytes += e.Size
	if v.o.Progress != nil {
		v.o.Progress(res.CheckedBytes, max(v.total, res.CheckedBytes))
	}
	switch {
	case err == nil && isUsed:
		v.whole.add(r.ID, e.Blob)
	case err == nil:
		res.Orphans = append(res.Orphans, Problem{Path: path, Blob: e.Blob, Reason: "no index row uses it"})
		v.mtimes[e.Blob] = e.ModTime
	default:
		reason := err.Error()
		var ce *cas.CorruptError
		if errors.As(err, &ce) {
			reason = ce.Reason
			switch {
			case !ce.Got.IsZero() && v.usedAnywhere(ctx, cas.Blob{Digest: ce.Got, Ext: e.Blob.Ext}):
				reason = "misnamed: holds the content of " + ce.Got.String()
			case isUsed && !e.Lazy:
				if row, err := s.index.Blob(ctx, e.Blob); err == nil && e.Size < row.Size {
					reason = fmt.Sprintf("truncated: %d of %d bytes", e.Size, row.Size)
				}
			}
		}
		p := Problem{Path: path, Blob: e.Blob, Reason: reason}
		if isUsed {
			p.Keys = s.keys(ctx, e.Blob)
			v.seen[e.Blob] = true
		}
		res.Corrupt = append(res.Corrupt, p)
	}
	return nil
}

// usedAnywhere reports whether a part uses a blob of any shard.
func (v *verifier) usedAnywhere(ctx context.Context, b cas.Blob) bool {
	r, err := v.s.index.Blob(ctx, b)
	return err == nil && r.Parts > 0
}

// recheck looks again, under gc.lock shared, at what verify's first look
// found missing or unused. While the lock is held gc cannot be between its
// row deletions and its unlinks, and a writer commits a row only once its
// blob is durable: a row whose blob is missing now is damage, whereas one
// the walk missed may have been written, or collected, meanwhile. It
// returns the blobs still missing that rows still use, and drops from
// res.Orphans the blobs a row uses now. On a store this process cannot
// lock (read-only), it reads the rows again without the lock.
func (s *Store) recheck(ctx context.Context, missing []cas.Blob, res *VerifyResult, held bool) ([]cas.Blob, error) {
	unlock, err := func() {}, error(nil)
	if !held {
		unlock, err = s.sharedLock(ctx)
	}
	switch {
	case errors.Is(err, ErrLocked):
		return nil, fmt.Errorf("could not look again at blobs that seemed missing or unused: %w", err)
	case err != nil:
		unlock = func() {}
	}
	defer unlock()
	var still []cas.Blob
	for _, b := range missing {
		row, err := s.index.Blob(ctx, b)
		if errors.Is(err, index.ErrNotFound) || (err == nil && row.Parts == 0) {
			continue // no row uses it any more
		}
		if err != nil {
			return nil, err
		}
		if _, err := s.blobs.Stat(ctx, b); err == nil || errors.Is(err, cas.ErrCorrupt) {
			continue
		}
		still = append(still, b)
	}
	kept := res.Orphans[:0]
	for _, o := range res.Orphans {
		if o.Blob.Digest.IsZero() {
			kept = append(kept, o)
			continue
		}
		row, err := s.index.Blob(ctx, o.Blob)
		if err != nil && !errors.Is(err, index.ErrNotFound) {
			return nil, err
		}
		if err != nil || row.Parts == 0 {
			kept = append(kept, o)
		}
	}
	res.Orphans = kept
	return still, nil
}

// keys lists the keys using a blob, for reports; an error listing them
// leaves the list empty rather than hiding the problem being reported.
func (s *Store) keys(ctx context.Context, b cas.Blob) []string {
	ps, err := s.index.Sharing(ctx, b)
	if err != nil {
		return nil
	}
	return keysOf(ps)
}

func (s *Store) abs(rel string) string {
	if s.remote != nil {
		return s.objectName(rel)
	}
	return filepath.Join(s.dir, filepath.FromSlash(rel))
}
