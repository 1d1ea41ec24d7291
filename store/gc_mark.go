package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// markGC is gc's mark on a local store: it compares the index's blob rows
// with the files a shard at a time, the rows of one shard against the
// walk's entries of that shard and the packed blobs in it. It holds one
// shard's rows and files at a time (a 256th of the store), the packs'
// tables of contents (which reads load anyway) and what it found to
// delete. It fails closed: any error reading rows or listing files is
// returned, and gc deletes nothing. A row found used whose blob the walk
// did not see is looked at again before it counts as missing: a writer
// may have stored it since.
//
// The rows no part uses and those naming a pack are read whole first
// (index.UnusualRows); of the others, used and loose, a shard's ids and
// digest starts alone are read from blobs_digest, which costs no lookup of
// each row in the table (that lookup was most of the mark's time). They
// are matched with the files by digest start (see matchByKey). Every
// removal is decided again exactly under gc.lock by the sweep.
func (e *localEngine) markGC(ctx context.Context, p *GCPlan, progress func(done, total int)) error {
	m := &localMark{e: e, p: p, progress: progress, fileKeys: map[index.DigestKey]int{}}
	if err := m.readPacks(ctx); err != nil {
		return err
	}
	ahead, err := newShardKeys(ctx, e.ix)
	if err != nil {
		return listError("unused blobs", err)
	}
	ahead.fault = func(sh byte) error { return fault(e, fmt.Sprintf("gc:referenced/%02x", sh)) }
	m.ahead = ahead
	// The candidates are mostly the rows no part uses: the list made at
	// about their number is not grown and copied again and again.
	p.Remove = make([]GCBlob, 0, ahead.unusual.Len()+64)
	if err := m.walk(ctx); err != nil {
		return err
	}
	if !p.hasPacks || !p.planPacks {
		return nil
	}
	dying := make(map[cas.Blob]int64, len(p.Remove))
	for _, b := range p.Remove {
		dying[b.Blob] = b.Size
	}
	if err := e.planPacks(ctx, p, dying); err != nil {
		return fmt.Errorf("gc: packs: %w", err)
	}
	return nil
}

// localMark is the state of one local mark, between shards.
type localMark struct {
	e        *localEngine
	p        *GCPlan
	progress func(done, total int)
	ahead    *shardReader[index.BlobKey]
	// packed holds the packed blobs by shard, each blob once, the first
	// pack holding it; total counts them.
	packed [256][]cas.Entry
	total  int
	done   int
	// Scratch of every shard: the rows known by their keys alone, and the
	// count of files of each key they are matched with.
	byKey    []index.BlobKey
	fileKeys map[index.DigestKey]int
}

// readPacks reads the packs' tables of contents.
func (m *localMark) readPacks(ctx context.Context) error {
	packs, packTemps, bad, err := m.e.blobs.Packs(ctx)
	if err != nil {
		return listError("blob files", err)
	}
	m.p.hasPacks = len(packs) > 0 || len(packTemps) > 0
	for name, err := range bad {
		return listError("blob files", fmt.Errorf("pack %s does not load (run casctl verify): %w", name, err))
	}
	seen := map[cas.Blob]bool{}
	for _, pk := range packs {
		for _, en := range pk.Entries {
			if seen[en.Blob] {
				continue
			}
			seen[en.Blob] = true
			sh := en.Blob.Digest[0]
			m.packed[sh] = append(m.packed[sh], cas.Entry{Kind: cas.EntryBlob,
				RelPath: cas.PacksDir + "/" + pk.Name, Blob: en.Blob, Size: en.Size, ModTime: pk.ModTime})
			m.total++
			m.p.Blobs++
		}
	}
	return nil
}

// walk lists each shard's entries together, the shards in no particular
// order: a shard is marked once the walk has left it, and the shards it
// did not find (empty ones packing removed) at the end.
func (m *localMark) walk(ctx context.Context) error {
	var marked [256]bool
	cur, loose := -1, map[cas.Blob]cas.Entry{}
	flush := func() error {
		if cur < 0 || marked[cur] {
			return nil
		}
		marked[cur] = true
		return m.shard(ctx, byte(cur), loose)
	}
	err := m.e.blobs.WalkNames(ctx, func(en cas.Entry) error {
		if err := fault(m.e, "gc:walk"); err != nil {
			return err
		}
		sh, ok := shardOf(en.RelPath)
		if ok && sh != cur {
			if err := flush(); err != nil {
				return err
			}
			// One map for every shard: a new one would grow anew for each.
			cur = sh
			clear(loose)
			m.ahead.start(ctx, sh)
		}
		switch en.Kind {
		case cas.EntryBlob:
			loose[en.Blob] = en
			m.p.Blobs++
		case cas.EntryTemp:
			if m.p.old(en.ModTime) {
				m.p.Temps = append(m.p.Temps, GCTemp{Path: en.RelPath, InUse: m.e.blobs.TempInUse(en.RelPath)})
			}
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	for sh := 0; sh < 256 && err == nil; sh++ {
		if !marked[sh] {
			err = m.shard(ctx, byte(sh), map[cas.Blob]cas.Entry{})
		}
	}
	if err != nil {
		return listError("blob files", err)
	}
	return nil
}

// shard marks one shard: its rows against its loose files and the packed
// blobs in it. The unusual rows (unused or packed) are known whole; the
// rest are used and loose, known by their keys alone, and matched with the
// files by key (see matchByKey).
func (m *localMark) shard(ctx context.Context, sh byte, loose map[cas.Blob]cas.Entry) error {
	keys, err := m.ahead.get(ctx, sh)
	if err != nil {
		return listError("referenced blobs", err)
	}
	if err := fault(m.e, "gc:unreferenced"); err != nil {
		return listError("unreferenced blobs", err)
	}
	inPack := make(map[cas.Blob]cas.Entry, len(m.packed[sh]))
	for _, en := range m.packed[sh] {
		inPack[en.Blob] = en
	}
	if err := m.rows(ctx, sh, keys, loose, inPack); err != nil {
		return err
	}
	// Files no row names, every copy: a loose one goes with the sweep; a
	// packed one counts as unused packed bytes, which go when its pack is
	// rewritten. Planning only the packed copy of a blob that also has a
	// loose one (a packer stopped before it removed its loose files, the
	// blob's row collected since) left the loose file an orphan that no
	// gc removed.
	for b, en := range loose {
		if err := m.unused(b, en, 0, time.Time{}); err != nil {
			return err
		}
	}
	for b, en := range inPack {
		if err := m.unused(b, en, 0, time.Time{}); err != nil {
			return err
		}
	}
	m.done += len(keys)
	if m.progress != nil {
		m.progress(m.done, max(m.total, m.done))
	}
	return nil
}

// rows takes a shard's rows: the unusual ones, and those of keys whose
// files do not match their rows one for one, each against its files; both
// lists come in the order of their keys, then ids, and are walked
// together.
func (m *localMark) rows(ctx context.Context, sh byte, keys []index.BlobKey, loose, inPack map[cas.Blob]cas.Entry) error {
	if !slices.IsSortedFunc(keys, compareBlobKeys) {
		slices.SortFunc(keys, compareBlobKeys)
	}
	unusual := m.ahead.unusual.InShard(sh)
	m.byKey = m.byKey[:0]
	for _, k := range keys {
		for len(unusual) > 0 && compareBlobKeys(index.BlobKey{ID: unusual[0].ID, Key: index.KeyOf(unusual[0].Blob.Digest)}, k) < 0 {
			unusual = unusual[1:]
		}
		if len(unusual) == 0 || unusual[0].ID != k.ID || index.KeyOf(unusual[0].Blob.Digest) != k.Key {
			m.byKey = append(m.byKey, k)
			continue
		}
		if err := m.row(unusual[0], loose, inPack); err != nil {
			return err
		}
		unusual = unusual[1:]
	}
	whole := matchByKey(m.byKey, loose, inPack, m.fileKeys)
	if len(whole) == 0 {
		return nil
	}
	blobs, err := m.e.ix.BlobsByID(ctx, whole)
	if err != nil {
		return listError("referenced blobs", err)
	}
	for _, id := range whole {
		// A row deleted since the read is gone; one that took the id since
		// is used, as every row not read as unusual.
		if b, ok := blobs[id]; ok {
			if err := m.row(index.ShardBlob{ID: id, Blob: b, Used: true}, loose, inPack); err != nil {
				return err
			}
		}
	}
	return nil
}

// row takes a row whose blob is known against the files of its blob.
func (m *localMark) row(r index.ShardBlob, loose, inPack map[cas.Blob]cas.Entry) error {
	m.p.hasPacks = m.p.hasPacks || r.Packed
	en, isLoose := loose[r.Blob]
	pk, isPacked := inPack[r.Blob]
	delete(loose, r.Blob)
	delete(inPack, r.Blob)
	if isLoose && r.Packed {
		le, err := m.e.blobs.Info(en)
		if err != nil {
			return listError("blob files", err)
		}
		if !le.Vanished {
			m.p.looseCopies[r.Blob] = le
		}
	}
	if !isLoose && isPacked {
		en = pk
	}
	switch {
	case r.Used && !isLoose && !isPacked:
		m.p.Missing = append(m.p.Missing, r.Blob)
	case r.Used:
	case !isLoose && !isPacked:
		m.p.StaleRows = append(m.p.StaleRows, r.Blob)
	default:
		return m.unused(r.Blob, en, r.ID, r.LastReferenced)
	}
	return nil
}

// unused adds a blob no part uses to the plan. The walk gives loose files
// by name alone: their times and sizes are read here, for the few that are
// not used. id is the blob's row's, 0 for a file no row names, and lastRef
// the row's last reference: the blob is as old as the later of that and
// its file, since the sweep deletes a row only once its last reference is
// past the grace period (a write of the same content refreshes it, and
// cannot touch a pack's file).
func (m *localMark) unused(b cas.Blob, en cas.Entry, id int64, lastRef time.Time) error {
	en, err := m.e.blobs.Info(en)
	if err != nil {
		return listError("blob files", err)
	}
	if en.Vanished {
		// Removed since the listing: the next gc looks again.
		return nil
	}
	g := GCBlob{Blob: b, Size: en.Size, ModTime: en.ModTime, Reason: GCUnused, id: id}
	if lastRef.After(g.ModTime) {
		g.ModTime = lastRef
	}
	if id == 0 {
		g.Reason = GCNoRow
	}
	if isPacked(en) {
		g.Pack = en.RelPath
	}
	m.p.unused(g)
	return nil
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

// isPacked reports whether a walk entry stands for a blob held in a pack.
func isPacked(e cas.Entry) bool {
	return strings.HasPrefix(e.RelPath, cas.PacksDir+"/")
}
