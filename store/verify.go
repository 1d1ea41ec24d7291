package store

import (
	"context"
	"errors"
	"fmt"
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
	// NotRecorded, when set, says why verify could not record in the index
	// which blobs it found whole (a full disk, say). The report stands;
	// the next verify checks them again.
	NotRecorded string
	// RecentOrphans counts the orphans younger than the grace period. They
	// are suspicious: rows lost (the index's -wal file deleted after a
	// crash, say) leave exactly such blobs, and gc deletes them once the
	// grace period is over. Writes under way make a few, briefly.
	RecentOrphans int
}

// Verify re-hashes every blob and checks it against its name and the
// index: corrupt, truncated or misnamed blobs, blobs missing, orphans,
// stray temp files, and the index's own integrity. Blobs found whole are
// marked verified in the index, unless the store is read-only. On a store
// in an object store every object is read from the store itself, past the
// cache.
func (s *Store) Verify(ctx context.Context, o VerifyOptions) (VerifyResult, error) {
	return s.verify(ctx, o, false)
}

// verify is Verify; held says the caller holds gc's side of the store's
// lock, so that a second look needs no lock of its own. It goes a shard at
// a time: the walk's entries of one shard against the index's rows of
// that shard, so that it holds one shard's rows, the names of the packed
// blobs, and what it found wrong, never a list of every blob.
func (s *Store) verify(ctx context.Context, o VerifyOptions, held bool) (VerifyResult, error) {
	var res VerifyResult
	// The checks below stop when verify returns.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	checks := s.startIndexChecks(ctx, o.QuickIndexCheck)
	// damaged reports an index too damaged to read: verify reports what
	// the integrity check found rather than the first query that failed.
	damaged := func() bool {
		p, err := checks.integrity()
		res.IndexProblems = p
		return err == nil && len(p) > 0
	}
	v, err := s.newVerifier(ctx, o, &res)
	if err == nil {
		// The walk lists names only: re-hashing a file looks at it anyway.
		err = v.run(ctx, s.eng.walk)
	}
	if err == nil {
		res.notRecorded(v.markWhole(ctx))
	}
	if err != nil && damaged() {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	if res.IndexProblems, err = checks.integrity(); err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	if err := s.verifyPacks(ctx, &res, v.seen); err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
	missing := slices.DeleteFunc(v.missing, func(b cas.Blob) bool { return v.seen[b] })
	if len(missing) > 0 || len(res.Orphans) > 0 {
		// gc may have collected, and writers stored, blobs since the walk:
		// look again while gc cannot sweep.
		if missing, err = s.recheck(ctx, missing, &res, held); err != nil {
			return res, fmt.Errorf("verify: %w", err)
		}
	}
	if err := s.reportMissing(ctx, &res, missing); err != nil {
		return res, fmt.Errorf("verify: %w", err)
	}
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
	if len(res.IndexProblems) == 0 {
		// A damaged index has nothing worth recounting.
		if res.CountDrift, err = checks.recount(); err != nil {
			return res, fmt.Errorf("verify: %w", err)
		}
	}
	res.OK = len(res.Corrupt) == 0 && len(res.Missing) == 0 && len(res.IndexProblems) == 0 && len(res.CountDrift) == 0
	return res, nil
}

// indexChecks are SQLite's integrity check and the recount of the counters
// behind stats, which each read the whole database: they run beside the
// re-hashing, and beside each other, each reading from the start, before
// any mark grows the index's log.
type indexChecks struct {
	checked, recounted chan indexCheck
}

type indexCheck struct {
	problems []string
	err      error
}

func (s *Store) startIndexChecks(ctx context.Context, quick bool) *indexChecks {
	c := &indexChecks{checked: make(chan indexCheck, 1), recounted: make(chan indexCheck, 1)}
	go func() {
		var r indexCheck
		if quick {
			r.problems, r.err = s.ix.QuickCheck(ctx)
		} else {
			r.problems, r.err = s.ix.IntegrityCheck(ctx)
		}
		c.checked <- r
	}()
	go func() {
		var r indexCheck
		r.problems, r.err = s.ix.CountDrift(ctx)
		c.recounted <- r
	}()
	return c
}

// integrity waits for the integrity check, which it may be asked for
// again.
func (c *indexChecks) integrity() ([]string, error) {
	r := <-c.checked
	c.checked <- r
	return r.problems, r.err
}

// recount waits for the recount.
func (c *indexChecks) recount() ([]string, error) {
	r := <-c.recounted
	c.recounted <- r
	return r.problems, r.err
}

// newVerifier reads what verify needs before its walk: the total to show
// progress against, the blobs packs hold (a row using one is not missing
// when its loose file is not there, and a loose copy found whole spares
// the packed one), and the rows no part uses or that name a pack.
func (s *Store) newVerifier(ctx context.Context, o VerifyOptions, res *VerifyResult) (*verifier, error) {
	var total int64
	if o.Progress != nil {
		st, err := s.ix.Stats(ctx, "")
		if err != nil {
			return nil, err
		}
		total = st.StoredBytes + st.UnreferencedBytes
	}
	inPacks := map[cas.Blob]bool{}
	if pv, ok := s.eng.(packVerifier); ok {
		var err error
		if inPacks, err = pv.packedBlobs(ctx); err != nil {
			return nil, err
		}
	}
	ahead, err := newShardRows(ctx, s.ix)
	if err != nil {
		return nil, err
	}
	ahead.fault = func(sh byte) error { return fault(s.eng, fmt.Sprintf("verify:rows/%02x", sh)) }
	return &verifier{s: s, o: o, res: res, total: total, inPacks: inPacks, seen: map[cas.Blob]bool{},
		mtimes: map[cas.Blob]time.Time{}, used: map[cas.Blob]index.ShardBlob{}, ahead: ahead, whole: newWholeRows(),
		start: s.now()}, nil
}

// verifyPacks re-hashes the packs of a store that has them, and marks the
// used blobs found whole in them verified, unless the store is read-only.
func (s *Store) verifyPacks(ctx context.Context, res *VerifyResult, seen map[cas.Blob]bool) error {
	pv, ok := s.eng.(packVerifier)
	if !ok {
		return nil
	}
	var whole []cas.Blob
	isUsed := func(b cas.Blob) bool {
		r, err := s.ix.Blob(ctx, b)
		return err == nil && r.Parts > 0
	}
	if err := pv.verifyPacks(ctx, res, isUsed, seen, &whole); err != nil {
		return err
	}
	if len(whole) > 0 && !s.readOnly {
		res.notRecorded(s.ix.MarkVerified(ctx, whole, s.now()))
	}
	return nil
}

// notRecorded notes that what verify found could not be recorded (on a
// full disk, say): the report stands, and says so.
func (r *VerifyResult) notRecorded(err error) {
	if err != nil && r.NotRecorded == "" {
		r.NotRecorded = err.Error()
	}
}

// reportMissing reports the blobs still missing with the keys that use
// them: quarantined ones apart, as known damage.
func (s *Store) reportMissing(ctx context.Context, res *VerifyResult, missing []cas.Blob) error {
	if len(missing) == 0 {
		return nil
	}
	quarantined, err := s.Quarantined(ctx)
	if err != nil {
		return err
	}
	for _, b := range missing {
		keys, err := s.ix.Sharing(ctx, b)
		if err != nil {
			return err
		}
		pr := Problem{Path: s.eng.name(b.RelPath()), Blob: b, Keys: keysOf(keys), Reason: "missing"}
		if quarantined[b] {
			pr.Reason = "quarantined as corrupt; writing the same content again heals it"
			res.Quarantined = append(res.Quarantined, pr)
		} else {
			res.Missing = append(res.Missing, pr)
		}
	}
	sort.Slice(res.Missing, func(i, j int) bool { return res.Missing[i].Path < res.Missing[j].Path })
	sort.Slice(res.Quarantined, func(i, j int) bool { return res.Quarantined[i].Path < res.Quarantined[j].Path })
	return nil
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
	return v.whole.mark(ctx, v.s.ix, v.start, v.s.now())
}

// hash re-hashes a blob entry: nil when it matches its name. It returns
// the entry with its size and time read, when the walk gave it without
// them and the file could be opened.
func (v *verifier) hash(ctx context.Context, e cas.Entry) (cas.Entry, error) {
	if e.Kind != cas.EntryBlob {
		return e, nil
	}
	return v.s.eng.rehash(ctx, e)
}

// entry checks one name the walk found, given what hash said of it; a
// blob the current shard's rows use is taken off v.used once found.
func (v *verifier) entry(ctx context.Context, e cas.Entry, err error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s, res := v.s, v.res
	path := s.eng.name(e.RelPath)
	switch e.Kind {
	case cas.EntryTemp:
		// One a live writer holds is being written or waits in its pool;
		// one gone since the walk was renamed to its blob, or was a blob
		// that a gc set aside and has unlinked.
		if s.eng.strayTemp(e.RelPath) {
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
			p.Keys = keysUsing(ctx, s.ix, e.Blob)
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
		if errors.As(err, &ce) && s.eng.beingWritten(e.Blob) {
			// Written in place this moment (a store without syncs: see
			// cas.Store.BeingWritten), not torn.
			res.Checked--
			res.CheckedBytes -= e.Size
			if isUsed {
				v.seen[e.Blob] = true
			}
			return nil
		}
		if errors.As(err, &ce) {
			reason = ce.Reason
			switch {
			case !ce.Got.IsZero() && v.usedAnywhere(ctx, cas.Blob{Digest: ce.Got, Ext: e.Blob.Ext}):
				reason = "misnamed: holds the content of " + ce.Got.String()
			case isUsed && !e.Lazy:
				if row, err := s.ix.Blob(ctx, e.Blob); err == nil && e.Size < row.Size {
					reason = fmt.Sprintf("truncated: %d of %d bytes", e.Size, row.Size)
				}
			}
		}
		p := Problem{Path: path, Blob: e.Blob, Reason: reason}
		if isUsed {
			p.Keys = keysUsing(ctx, s.ix, e.Blob)
			v.seen[e.Blob] = true
		}
		res.Corrupt = append(res.Corrupt, p)
	}
	return nil
}

// usedAnywhere reports whether a part uses a blob of any shard.
func (v *verifier) usedAnywhere(ctx context.Context, b cas.Blob) bool {
	r, err := v.s.ix.Blob(ctx, b)
	return err == nil && r.Parts > 0
}

// recheck looks again, keeping gc from sweeping, at what verify's first
// look found missing or unused. While gc cannot sweep it cannot be between
// its row deletions and its blobs' removal, and a writer records a row
// only once its blob is durable: a row whose blob is missing now is
// damage, whereas one the walk missed may have been written, or
// collected, meanwhile. It returns the blobs still missing that rows still
// use, and drops from res.Orphans the blobs a row uses now.
func (s *Store) recheck(ctx context.Context, missing []cas.Blob, res *VerifyResult, held bool) ([]cas.Blob, error) {
	unlock, err := s.eng.lockForRecheck(ctx, held)
	if err != nil {
		return nil, fmt.Errorf("could not look again at blobs that seemed missing or unused: %w", err)
	}
	defer unlock()
	var still []cas.Blob
	for _, b := range missing {
		row, err := s.ix.Blob(ctx, b)
		if errors.Is(err, ErrNotFound) || (err == nil && row.Parts == 0) {
			continue // no row uses it any more
		}
		if err != nil {
			return nil, err
		}
		if there, err := s.eng.present(ctx, b); err != nil {
			return nil, err
		} else if !there {
			still = append(still, b)
		}
	}
	kept := res.Orphans[:0]
	for _, o := range res.Orphans {
		if o.Blob.Digest.IsZero() {
			kept = append(kept, o)
			continue
		}
		row, err := s.ix.Blob(ctx, o.Blob)
		if err != nil && !errors.Is(err, ErrNotFound) {
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
func keysUsing(ctx context.Context, ix *index.Index, b cas.Blob) []string {
	ps, err := ix.Sharing(ctx, b)
	if err != nil {
		return nil
	}
	return keysOf(ps)
}
