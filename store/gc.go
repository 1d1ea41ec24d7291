package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// DefaultGrace is how old an unreferenced blob must be before gc removes it,
// unless told otherwise.
const DefaultGrace = time.Hour

// ErrMissingBlobs is returned by GC when index rows point at blob files that
// are not there: something is wrong that verify should look at first.
var ErrMissingBlobs = errors.New("index rows point at missing blobs")

// GCOptions configure GC.
type GCOptions struct {
	// Grace is how old (by modification time, which every dedup hit
	// refreshes) an unreferenced blob or a temp file must be to go. It is
	// used as given: zero removes every unreferenced blob at once.
	// DefaultGrace is the usual value.
	Grace time.Duration
	// DryRun reports what would go and removes nothing.
	DryRun bool
	// Progress, when set, is called as blobs are examined.
	Progress func(done, total int)
	// LockTimeout bounds the wait for writes under way to finish
	// (DefaultGCLockTimeout when zero); past it GC fails with ErrLocked,
	// naming the processes holding the lock when they can be known.
	LockTimeout time.Duration
}

// GCResult says what GC removed, or would remove on a dry run.
type GCResult struct {
	RemovedBlobs int
	FreedBytes   int64
	// KeptYoung counts unreferenced blobs kept because they are younger than
	// the grace period.
	KeptYoung   int
	RemovedTemp int
	// InUseTemp counts temp files kept, whatever their age, because a put
	// is still writing them.
	InUseTemp int
	DryRun    bool
	// Removed lists the blobs removed.
	Removed []cas.Blob
	// Packs says what was done to pack files.
	Packs PackSweep
	// UnusedPacked and UnusedPackedBytes count the packed blobs whose rows
	// gc deleted (or would delete): their bytes stay in their packs until a
	// pack is more than half unused and gc rewrites it.
	UnusedPacked      int
	UnusedPackedBytes int64
}

// GC removes the blobs no index row uses and that are older than the grace
// period, and temp files older than it. It marks a shard at a time (its
// memory follows a shard and the garbage, not the store) without a lock,
// writers writing on. It sweeps holding gc.lock exclusively, so that no
// writer is between its blob and its row, in short holds with writers let
// in between, each deleting the rows of a batch of the garbage in one
// transaction (which checks again that no part uses them) and unlinking
// their files; see sweeper.sweep. A dry run takes no lock. It fails closed: any error
// while listing rows or files stops it before it deletes anything. It
// refuses to run while rows point at missing blobs. Rows are deleted and
// committed before their files are unlinked.
func (s *Store) GC(ctx context.Context, o GCOptions) (GCResult, error) {
	if s.remote != nil {
		return s.gcRemote(ctx, o)
	}
	if err := s.writable("gc"); err != nil {
		return GCResult{}, err
	}
	s.release()
	defer makeReserve(s.dir, s.reserve)
	timeout, err := checkGCOptions(o)
	if err != nil {
		return GCResult{}, err
	}
	// One gc at a time on the index: gc.lock is a file lock, which holds
	// only for the processes of one machine, and an index on PostgreSQL may
	// be shared beyond it. The index's gc lock (an advisory lock there,
	// nothing on SQLite) is taken before the mark, and checked before each
	// delete. A dry run deletes nothing and takes neither.
	gcLock, err := s.indexGCLock(ctx, o.DryRun)
	if err != nil {
		return GCResult{}, err
	}
	if gcLock != nil {
		defer gcLock.Release()
	}
	stillHeld := func() error {
		if gcLock == nil {
			return nil
		}
		return gcLock.Held(ctx)
	}
	res := GCResult{DryRun: o.DryRun}
	now := s.now()
	cutoff := now.Add(-o.Grace)
	old := olderThan(now, o.Grace)

	// Mark: what the index uses, what is on disk, a shard at a time.
	m, err := s.mark(ctx, old, o.Progress)
	if err != nil {
		return GCResult{}, err
	}
	res.KeptYoung = m.keptYoung
	if len(m.missing) > 0 {
		// Blobs Repair quarantined are known damage: their rows wait for
		// the same content to be written again.
		quarantined, err := s.Quarantined(ctx)
		if err != nil {
			return GCResult{}, fmt.Errorf("store: gc: %w (nothing deleted)", err)
		}
		m.missing = slices.DeleteFunc(m.missing, func(b cas.Blob) bool { return quarantined[b] })
	}
	if len(m.missing) > 0 {
		slices.SortFunc(m.missing, byFileName)
		return GCResult{}, fmt.Errorf("store: gc: %w: %d blobs, such as %s; nothing deleted; casctl repair drops their rows",
			ErrMissingBlobs, len(m.missing), s.blobs.Path(m.missing[0]))
	}
	stale, oldTemps := m.stale, m.oldTemps
	// What the pack sweep asks of the mark, when there are packs: the
	// candidates, and loose copies of blobs whose rows name a pack.
	onDisk := map[cas.Blob]cas.Entry{}
	if m.packs {
		for _, g := range m.garbage {
			onDisk[g.blob] = g.entry(g.blob)
		}
		for b, e := range m.looseCopies {
			if _, ok := onDisk[b]; !ok {
				onDisk[b] = e
			}
		}
	}
	if o.DryRun {
		slices.SortFunc(m.garbage, func(a, b gcGarbage) int { return byFileName(a.blob, b.blob) })
		res.Removed = make([]cas.Blob, 0, len(m.garbage))
		for _, g := range m.garbage {
			if g.pack != "" {
				// Its bytes go when its pack is rewritten.
				res.UnusedPacked++
				res.UnusedPackedBytes += g.size
				continue
			}
			res.RemovedBlobs++
			res.FreedBytes += g.size
			res.Removed = append(res.Removed, g.blob)
		}
		// As the sweep would: one a live writer holds stays.
		for _, t := range oldTemps {
			if s.blobs.TempInUse(t.RelPath) {
				res.InUseTemp++
			} else {
				res.RemovedTemp++
			}
		}
		if m.packs {
			dying := make(map[cas.Blob]bool, len(m.garbage))
			for _, g := range m.garbage {
				dying[g.blob] = true
			}
			res.Packs, err = s.sweepPacks(ctx, cutoff, true, onDisk, dying)
			if err != nil {
				return GCResult{}, fmt.Errorf("store: gc: packs: %w", err)
			}
		}
		return res, nil
	}

	if err := s.fault("gc:marked"); err != nil {
		return GCResult{}, fmt.Errorf("store: gc: sweep (nothing deleted): %w", err)
	}
	sw := &sweeper{s: s, timeout: timeout}
	defer sw.unlock()
	// The first hold: gc.lock exclusively before anything is deleted.
	if err := sw.lock(ctx); err != nil {
		return GCResult{}, err
	}
	if err := s.fault("gc:sweep"); err != nil {
		return GCResult{}, fmt.Errorf("store: gc: sweep (nothing deleted): %w", err)
	}
	if err := stillHeld(); err != nil {
		return GCResult{}, fmt.Errorf("store: gc: %w (nothing deleted)", err)
	}
	if len(stale) > 0 {
		if _, err := s.index.DeleteBlobRows(ctx, stale); err != nil {
			return GCResult{}, fmt.Errorf("store: gc: %w", err)
		}
	}
	sw.unlock()
	var errs []string
	res.Removed = make([]cas.Blob, 0, len(m.garbage))
	// The sweep unlinks from two goroutines: mu guards res and errs.
	var mu sync.Mutex
	err = sw.sweep(ctx, m.garbage, cutoff, now, stillHeld, func(g *gcGarbage) {
		if g.pack != "" {
			// Its bytes go when its pack is rewritten, below.
			mu.Lock()
			res.UnusedPacked++
			res.UnusedPackedBytes += g.size
			mu.Unlock()
			return
		}
		err := s.blobs.Remove(ctx, g.blob)
		mu.Lock()
		defer mu.Unlock()
		if err != nil && !errors.Is(err, cas.ErrNotFound) {
			errs = append(errs, err.Error())
			return
		}
		res.RemovedBlobs++
		res.FreedBytes += g.size
		res.Removed = append(res.Removed, g.blob)
	})
	if err != nil {
		return res, fmt.Errorf("store: gc: %w (the blobs removed so far are gone; the next gc removes the rest)", err)
	}
	// Temp files and packs, in a last hold, when there are any.
	if len(oldTemps) > 0 || m.packs {
		if err := sw.lock(ctx); err != nil {
			return res, fmt.Errorf("store: gc: %w", err)
		}
		for _, t := range oldTemps {
			if err := s.blobs.RemoveTemp(ctx, t.RelPath); errors.Is(err, cas.ErrTempInUse) {
				res.InUseTemp++
				continue
			} else if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			res.RemovedTemp++
		}
		if m.packs {
			var err error
			if res.Packs, err = s.sweepPacks(ctx, cutoff, false, onDisk, nil); err != nil {
				errs = append(errs, "packs: "+err.Error())
			}
		}
		sw.unlock()
	}
	slices.SortFunc(res.Removed, byFileName)
	if len(errs) > 0 {
		return res, fmt.Errorf("store: gc: %d files could not be removed (their rows are gone; the next gc retries): %s",
			len(errs), strings.Join(errs, "; "))
	}
	return res, nil
}

// byFileName orders blobs by their file names: by digest, then extension
// (the hex of a digest sorts as its bytes do).
func byFileName(a, b cas.Blob) int {
	if c := bytes.Compare(a.Digest[:], b.Digest[:]); c != 0 {
		return c
	}
	return strings.Compare(a.Ext, b.Ext)
}

// keysOf lists the keys of parts, for messages.
func keysOf(ps []index.Part) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Key
	}
	return out
}

// gcMark is what gc's mark found: only what the sweep acts on, so that its
// size follows the garbage, not the store.
type gcMark struct {
	// candidates are the blobs no row uses and whose file (or pack) is
	// older than the grace period, with what the walk saw of them: the
	// remote mark's.
	candidates map[cas.Blob]gcCandidate
	// garbage are the local mark's candidates, each blob once: in a list,
	// which takes less than half the memory of a map of a tenth of a
	// million blobs, and which the sweep orders as it takes them.
	garbage []gcGarbage
	// packs says the store has pack files or rows naming packs.
	packs     bool
	keptYoung int
	// stale are rows no part uses whose blob is on disk nowhere.
	stale []cas.Blob
	// missing are blobs rows use that are on disk nowhere.
	missing  []cas.Blob
	oldTemps []cas.Entry
	// looseCopies are loose files of blobs whose rows name a pack.
	looseCopies map[cas.Blob]cas.Entry
}

// gcCandidate is what the mark keeps of a candidate: no more, since a
// tenth of a million blobs may be garbage.
type gcCandidate struct {
	size int64
	// modTime is the file's modification time, in nanoseconds since 1970
	// (a time.Time takes three times the memory).
	modTime int64
	// pack is the path of the pack holding the blob, when it is not a
	// file of its own.
	pack string
	// id is the blob's row id, 0 when no row names it.
	id int64
}

// gcGarbage is a candidate of the local mark, with its blob.
type gcGarbage struct {
	blob cas.Blob
	gcCandidate
}

// entry returns the walk's entry for candidate b, as the pack sweep
// reads it.
func (c gcCandidate) entry(b cas.Blob) cas.Entry {
	rel := c.pack
	if rel == "" {
		rel = b.RelPath()
	}
	return cas.Entry{Kind: cas.EntryBlob, RelPath: rel, Blob: b, Size: c.size, ModTime: time.Unix(0, c.modTime)}
}

// mark compares the index's blob rows with the files a shard at a time:
// the rows of one shard against the walk's entries of that shard and the
// packed blobs in it. It holds one shard's rows and files at
// a time (a 256th of the store), the packs' tables of contents (which
// reads load anyway) and what it found to delete. It fails closed: any
// error reading rows or listing files is returned, and gc deletes nothing.
// A row found used whose blob the walk did not see is looked at again
// before it counts as missing: a writer may have stored it since.
//
// The rows no part uses and those naming a pack are read whole first
// (index.UnusualRows); of the others, used and loose, a shard's ids and
// digest starts alone are read from blobs_digest, which costs no lookup of
// each row in the table (that lookup was most of the mark's time). They
// are matched with the files by digest start (see matchByKey): a start
// with as many files as rows keeps its files, and one with more or fewer
// has its rows read whole and matched exactly, so that a file no row
// names is found even beside a row whose digest starts alike, and a used
// row's missing file is found even beside another file of its start.
// Every removal is decided again exactly under gc.lock by the sweep.
func (s *Store) mark(ctx context.Context, old func(time.Time) bool, progress func(done, total int)) (gcMark, error) {
	m := gcMark{looseCopies: map[cas.Blob]cas.Entry{}}
	listErr := func(what string, err error) error {
		return fmt.Errorf("store: gc: list %s (nothing deleted): %w", what, err)
	}
	// Packed blobs by shard, each blob once, the first pack holding it.
	var packed [256][]cas.Entry
	packs, packTemps, bad, err := s.blobs.Packs(ctx)
	if err != nil {
		return m, listErr("blob files", err)
	}
	m.packs = len(packs) > 0 || len(packTemps) > 0
	for name, err := range bad {
		return m, listErr("blob files", fmt.Errorf("pack %s does not load (run casctl verify): %w", name, err))
	}
	seenPacked := map[cas.Blob]bool{}
	for _, p := range packs {
		for _, e := range p.Entries {
			if seenPacked[e.Blob] {
				continue
			}
			seenPacked[e.Blob] = true
			packed[e.Blob.Digest[0]] = append(packed[e.Blob.Digest[0]], cas.Entry{Kind: cas.EntryBlob,
				RelPath: cas.PacksDir + "/" + p.Name, Blob: e.Blob, Size: e.Size, ModTime: p.ModTime})
		}
	}
	seenPacked = nil
	total := 0
	for _, es := range packed {
		total += len(es)
	}
	done := 0
	ahead, err := newShardKeys(ctx, s.index)
	if err != nil {
		return m, listErr("unused blobs", err)
	}
	// The candidates are mostly the rows no part uses: the list made at
	// about their number is not grown and copied again and again.
	m.garbage = make([]gcGarbage, 0, ahead.unusual.Len()+64)
	ahead.fault = func(sh byte) error { return s.fault(fmt.Sprintf("gc:referenced/%02x", sh)) }
	// Scratch of every shard: the rows known by their keys alone, and the
	// count of files of each key they are matched with.
	var byKey []index.BlobKey
	fileKeys := map[index.DigestKey]int{}
	shard := func(sh byte, loose map[cas.Blob]cas.Entry) error {
		keys, err := ahead.get(ctx, sh)
		if err != nil {
			return listErr("referenced blobs", err)
		}
		if err := s.fault("gc:unreferenced"); err != nil {
			return listErr("unreferenced blobs", err)
		}
		inPack := make(map[cas.Blob]cas.Entry, len(packed[sh]))
		for _, e := range packed[sh] {
			inPack[e.Blob] = e
		}
		// The walk gives loose files by name alone: their times and sizes
		// are read here, for the few that are not used. id is the blob's
		// row's, 0 for a file no row names.
		var infoErr error
		unused := func(b cas.Blob, e cas.Entry, id int64) {
			e, err := s.blobs.Info(e)
			if err != nil {
				infoErr = err
				return
			}
			if e.Vanished {
				// Removed since the listing: the next gc looks again.
				return
			}
			if old(e.ModTime) {
				c := gcCandidate{size: e.Size, modTime: e.ModTime.UnixNano(), id: id}
				if isPacked(e) {
					c.pack = e.RelPath
				}
				m.garbage = append(m.garbage, gcGarbage{blob: b, gcCandidate: c})
			} else {
				m.keptYoung++
			}
		}
		// row takes a row whose blob is known for the files of its blob.
		row := func(r index.ShardBlob) error {
			m.packs = m.packs || r.Packed
			e, isLoose := loose[r.Blob]
			p, isPacked := inPack[r.Blob]
			delete(loose, r.Blob)
			delete(inPack, r.Blob)
			if isLoose && r.Packed {
				le, err := s.blobs.Info(e)
				if err != nil {
					return listErr("blob files", err)
				}
				if !le.Vanished {
					m.looseCopies[r.Blob] = le
				}
			}
			if !isLoose && isPacked {
				e = p
			}
			switch {
			case r.Used && !isLoose && !isPacked:
				m.missing = append(m.missing, r.Blob)
			case r.Used:
			case !isLoose && !isPacked:
				m.stale = append(m.stale, r.Blob)
			default:
				unused(r.Blob, e, r.ID)
			}
			return nil
		}
		// The unusual rows (unused or packed) are known whole; the rest
		// are used and loose, known by their keys alone, and matched with
		// the files by key: where a key has as many files as rows, its
		// files are used, and where not, its rows are read whole. Both
		// lists come in the order of their keys, then ids, and are
		// walked together.
		if !slices.IsSortedFunc(keys, compareBlobKeys) {
			slices.SortFunc(keys, compareBlobKeys)
		}
		unusual := ahead.unusual.InShard(sh)
		byKey = byKey[:0]
		for _, k := range keys {
			for len(unusual) > 0 && compareBlobKeys(index.BlobKey{ID: unusual[0].ID, Key: index.KeyOf(unusual[0].Blob.Digest)}, k) < 0 {
				unusual = unusual[1:]
			}
			if len(unusual) == 0 || unusual[0].ID != k.ID || index.KeyOf(unusual[0].Blob.Digest) != k.Key {
				byKey = append(byKey, k)
				continue
			}
			if err := row(unusual[0]); err != nil {
				return err
			}
			unusual = unusual[1:]
		}
		whole := matchByKey(byKey, loose, inPack, fileKeys)
		if len(whole) > 0 {
			blobs, err := s.index.BlobsByID(ctx, whole)
			if err != nil {
				return listErr("referenced blobs", err)
			}
			for _, id := range whole {
				// A row deleted since the read is gone; one that took the
				// id since is used, as every row not read as unusual.
				if b, ok := blobs[id]; ok {
					if err := row(index.ShardBlob{ID: id, Blob: b, Used: true}); err != nil {
						return err
					}
				}
			}
		}
		// Files no row names, each blob once: a packed copy, when there is
		// one, rather than a loose one.
		for b, e := range loose {
			if _, ok := inPack[b]; !ok {
				unused(b, e, 0)
			}
		}
		for b, e := range inPack {
			unused(b, e, 0)
		}
		if infoErr != nil {
			return listErr("blob files", infoErr)
		}
		done += len(keys)
		if progress != nil {
			progress(done, max(total, done))
		}
		return nil
	}
	// The walk lists each shard's entries together, the shards in no
	// particular order: a shard is marked once the walk has left it, and
	// the shards it did not find (empty ones packing removed) at the end.
	var marked [256]bool
	cur, loose := -1, map[cas.Blob]cas.Entry{}
	flush := func() error {
		if cur < 0 || marked[cur] {
			return nil
		}
		marked[cur] = true
		return shard(byte(cur), loose)
	}
	err = s.blobs.WalkNames(ctx, func(e cas.Entry) error {
		if err := s.fault("gc:walk"); err != nil {
			return err
		}
		sh, ok := shardOf(e.RelPath)
		if ok && sh != cur {
			if err := flush(); err != nil {
				return err
			}
			// One map for every shard: a new one would grow anew for each.
			cur = sh
			clear(loose)
			ahead.start(ctx, sh)
		}
		switch e.Kind {
		case cas.EntryBlob:
			loose[e.Blob] = e
		case cas.EntryTemp:
			if old(e.ModTime) {
				m.oldTemps = append(m.oldTemps, e)
			}
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	for sh := 0; sh < 256 && err == nil; sh++ {
		if !marked[sh] {
			err = shard(byte(sh), map[cas.Blob]cas.Entry{})
		}
	}
	if err != nil {
		if strings.Contains(err.Error(), "(nothing deleted)") {
			return m, err
		}
		return m, listErr("blob files", err)
	}
	// A row used and a blob not seen: stored since its shard was walked,
	// or packed meanwhile, or truly missing.
	missing := m.missing[:0]
	for _, b := range m.missing {
		if _, err := s.blobs.Stat(ctx, b); err != nil && !errors.Is(err, cas.ErrCorrupt) {
			missing = append(missing, b)
		}
	}
	m.missing = missing
	return m, nil
}

// matchByKey matches the rows of one shard that are known by their keys
// alone (used and loose rows, whose blobs are not read), in the order of
// their keys, with the files of the shard no other row took, loose or
// packed. Where a key has as many files as rows, the files are taken as
// the rows' blobs and leave loose and inPack: a file may so be kept for a
// row of another blob whose digest starts alike, or of the same digest
// with another extension, whose own file is gone, which keeps garbage,
// never removes a blob in use. Where a key has more files than rows, one
// of them at least is no row's; where fewer, a row's blob is missing: the
// ids of these rows are returned, to be read whole and matched exactly.
// Files whose key no row has stay in the maps. count is scratch space.
func matchByKey(rows []index.BlobKey, loose, inPack map[cas.Blob]cas.Entry, count map[index.DigestKey]int) (whole []int64) {
	if len(rows) == 0 {
		return nil
	}
	clear(count)
	for b := range loose {
		count[index.KeyOf(b.Digest)]++
	}
	for b := range inPack {
		if _, ok := loose[b]; !ok {
			count[index.KeyOf(b.Digest)]++
		}
	}
	// taken marks a key whose files the rows took.
	const taken = -1
	took := false
	for j := 0; j < len(rows); {
		k := rows[j].Key
		next := j + 1
		for next < len(rows) && rows[next].Key == k {
			next++
		}
		if count[k] == next-j {
			count[k] = taken
			took = true
		} else {
			for _, r := range rows[j:next] {
				whole = append(whole, r.ID)
			}
		}
		j = next
	}
	if took {
		for b := range loose {
			if count[index.KeyOf(b.Digest)] == taken {
				delete(loose, b)
			}
		}
		for b := range inPack {
			if count[index.KeyOf(b.Digest)] == taken {
				delete(inPack, b)
			}
		}
	}
	return whole
}

// compareBlobKeys orders rows as BlobKeysInShard gives them: by key, then
// id.
func compareBlobKeys(a, b index.BlobKey) int {
	if c := index.CompareKeys(a.Key, b.Key); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// shardOf returns the shard number of a path blobs/xx/… inside a shard.
func shardOf(rel string) (int, bool) {
	rest, ok := strings.CutPrefix(rel, cas.BlobsDir+"/")
	if !ok {
		return 0, false
	}
	name, _, ok := strings.Cut(rest, "/")
	if !ok || len(name) != 2 {
		return 0, false
	}
	n, err := strconv.ParseUint(name, 16, 8)
	if err != nil || strings.ToLower(name) != name {
		return 0, false
	}
	return int(n), true
}

// checkGCOptions refuses options that make no sense and returns how long
// gc waits for writers.
func checkGCOptions(o GCOptions) (time.Duration, error) {
	if o.Grace < 0 {
		return 0, fmt.Errorf("store: gc: negative grace period %v", o.Grace)
	}
	if o.LockTimeout < 0 {
		return 0, fmt.Errorf("store: gc: negative lock timeout %v", o.LockTimeout)
	}
	if o.LockTimeout == 0 {
		return DefaultGCLockTimeout, nil
	}
	return o.LockTimeout, nil
}

// indexGCLock takes the index's gc lock, one gc at a time on an index
// however many machines share it; a dry run takes none and gets nil.
func (s *Store) indexGCLock(ctx context.Context, dryRun bool) (*index.GCLock, error) {
	if dryRun {
		return nil, nil
	}
	l, err := s.index.AcquireGCLock(ctx)
	if errors.Is(err, index.ErrGCRunning) {
		return nil, fmt.Errorf("store: gc: %w on this store's index (%s); nothing deleted, try again when it is done",
			index.ErrGCRunning, s.index.Path())
	}
	if err != nil {
		return nil, fmt.Errorf("store: gc: %w (nothing deleted)", err)
	}
	return l, nil
}

// olderThan reports whether a time is at least grace before now. A file
// stamped in the future (a clock set back, a copy from another machine) is
// taken as stamped now, so that it ages like the rest.
func olderThan(now time.Time, grace time.Duration) func(time.Time) bool {
	cutoff := now.Add(-grace)
	return func(t time.Time) bool {
		if t.After(now) {
			t = now
		}
		return !t.After(cutoff)
	}
}
