package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// PackLockFile keeps packers apart: one pack at a time per store.
const PackLockFile = "pack.lock"

// DefaultPackAge is how long a blob must have gone unreferenced before
// Pack moves it into a pack, unless told otherwise.
const DefaultPackAge = 24 * time.Hour

// PackLimit is the most uncompressed blob bytes one pack file takes; more
// cold blobs make several packs, so that gc rewrites a pack of bounded size.
const PackLimit = 64 << 20

// RewriteThreshold is the fraction of a pack's bytes that must be dead (no
// row uses them) before gc rewrites it without them.
const RewriteThreshold = 0.5

// PackOptions configure Pack.
type PackOptions struct {
	// OlderThan is how long ago a blob must have been written or last
	// reused to be packed. DefaultPackAge is the usual value; zero packs
	// every loose blob some part uses.
	OlderThan time.Duration
	// DryRun reports what would be packed and changes nothing.
	DryRun bool
	// Progress, when set, is called as blobs are packed.
	Progress func(done, total int)
}

// PackResult says what Pack did, or would do on a dry run.
type PackResult struct {
	DryRun bool
	// Packs lists the pack files written.
	Packs []string
	// Blobs counts the blobs packed, RawBytes their size.
	Blobs    int
	RawBytes int64
	// PackBytes is the size of the pack files written.
	PackBytes int64
	// RemovedLoose counts the loose files removed once packed;
	// RemovedShards the shard directories left empty and removed.
	RemovedLoose  int
	RemovedShards int
}

// Pack moves loose blobs that no write has used for o.OlderThan into zstd
// pack files, similar blobs (same extension, tool, run) side by side, and
// removes their loose files. Each pack is durable and its rows committed
// before any loose file goes, so a crash at any point leaves every blob
// readable, loose or packed. Reads find packed blobs transparently, by
// digest, whatever path an old pointer names. Writers go on meanwhile; gc
// waits, as for any writer.
func (s *Store) Pack(ctx context.Context, o PackOptions) (PackResult, error) {
	if s.remote != nil {
		return PackResult{}, s.localOnly("pack")
	}
	if o.OlderThan < 0 {
		return PackResult{}, fmt.Errorf("store: pack: negative age %v", o.OlderThan)
	}
	res := PackResult{DryRun: o.DryRun}
	unlockPack, err := s.packLock(ctx)
	if err != nil {
		return res, err
	}
	defer unlockPack()
	cands, err := s.index.PackCandidates(ctx, s.now().Add(-o.OlderThan))
	if err != nil {
		return res, fmt.Errorf("store: pack: %w", err)
	}
	// Only loose blobs: one written again after it was packed has a row
	// naming its pack already, and a blob missing from disk is verify's.
	loose := cands[:0]
	for _, c := range cands {
		st, err := s.blobs.Stat(ctx, c.Blob)
		if err != nil || st.Pack != "" {
			continue
		}
		loose = append(loose, c)
	}
	slices.SortStableFunc(loose, func(a, b index.PackCandidate) int {
		return cmp.Or(strings.Compare(a.Blob.Ext, b.Blob.Ext), strings.Compare(a.Tool, b.Tool),
			strings.Compare(a.Run, b.Run), strings.Compare(a.Key, b.Key))
	})
	if o.DryRun {
		for _, c := range loose {
			res.Blobs++
			res.RawBytes += c.Size
		}
		return res, nil
	}
	for len(loose) > 0 {
		n, size := 0, int64(0)
		for n < len(loose) && (n == 0 || size+loose[n].Size <= PackLimit) {
			size += loose[n].Size
			n++
		}
		batch := loose[:n]
		loose = loose[n:]
		if err := s.packBatch(ctx, batch, &res); err != nil {
			return res, err
		}
		if o.Progress != nil {
			o.Progress(res.Blobs, res.Blobs+len(loose))
		}
	}
	if len(res.Packs) > 0 {
		if res.RemovedShards, err = s.blobs.RemoveEmptyShards(ctx); err != nil {
			return res, fmt.Errorf("store: pack: %w", err)
		}
		s.truncateLog(ctx)
	}
	return res, nil
}

// truncateLog folds the index's write-ahead log into the database and cuts
// it to nothing, once a pack has changed the rows of the blobs it took in.
// The log otherwise keeps its blocks for as long as any process has the
// index open: those of the pack's own transactions (100 KiB beside an index
// of 440 KiB on the real trace's store) and of the largest run of writes
// before them, up to SQLite's automatic checkpoint at a thousand pages. It
// is safe with writers in other processes: SQLite waits, at most its busy
// timeout, for the writer of the moment and for readers of older pages to
// finish, holding new writers back meanwhile (their own busy timeout and
// retries wait for it), and gives up leaving the log whole when they do
// not. It is best effort: the pack is done and recorded whatever it does.
func (s *Store) truncateLog(ctx context.Context) {
	s.index.Checkpoint(ctx)
}

// packBatch writes one pack, records it, then removes the loose files. It
// holds the writers' side of gc.lock from the first byte of the pack to the
// last loose file removed, as a writer does from blob to row.
func (s *Store) packBatch(ctx context.Context, batch []index.PackCandidate, res *PackResult) error {
	unlock, err := s.sharedLock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	blobs := make([]cas.Blob, len(batch))
	for i, c := range batch {
		blobs[i] = c.Blob
	}
	if err := s.fault("pack:write"); err != nil {
		return fmt.Errorf("store: pack: %w", err)
	}
	info, err := s.blobs.WritePack(ctx, blobs)
	if err != nil {
		return fmt.Errorf("store: pack: %w", err)
	}
	if err := s.fault("pack:record"); err != nil {
		return fmt.Errorf("store: pack: %w", err)
	}
	if err := s.index.RecordPack(ctx, index.PackRecord{Name: info.Name, Size: info.Size, Raw: info.Raw, Blobs: blobs}); err != nil {
		return fmt.Errorf("store: pack: %w", err)
	}
	res.Packs = append(res.Packs, info.Name)
	res.Blobs += len(info.Entries)
	res.RawBytes += info.Raw
	res.PackBytes += info.Size
	if err := s.fault("pack:remove"); err != nil {
		return fmt.Errorf("store: pack: %w", err)
	}
	for _, b := range blobs {
		if err := s.blobs.Remove(ctx, b); err != nil && !errors.Is(err, cas.ErrNotFound) {
			return fmt.Errorf("store: pack: %s is packed, its loose file stays: %w", b, err)
		}
		res.RemovedLoose++
	}
	return nil
}

// packLock keeps a second packer out while one works; like gc, a packer
// waits for another at most until its context ends or DefaultGCLockTimeout
// passes.
func (s *Store) packLock(ctx context.Context) (func(), error) {
	start := time.Now()
	ctx, cancel := withLockDeadline(ctx, DefaultGCLockTimeout)
	defer cancel()
	l := flock.New(filepath.Join(s.dir, PackLockFile))
	if _, err := l.TryLockContext(ctx, exclusivePoll); err != nil {
		l.Close()
		return nil, lockedError(l.Path(), "another pack", err, time.Since(start))
	}
	return func() { l.Unlock(); l.Close() }, nil
}

// isPacked reports whether a walk entry stands for a blob held in a pack.
func isPacked(e cas.Entry) bool {
	return strings.HasPrefix(e.RelPath, cas.PacksDir+"/")
}

// PackSweep says what gc did to packs.
type PackSweep struct {
	// Rewritten counts packs rewritten without their dead blobs; Dropped
	// packs removed whole (nothing in them used, or no row names them).
	Rewritten int
	Dropped   int
	// FreedBytes is the pack bytes on disk given back.
	FreedBytes int64
	// RemovedTemp counts temp files removed from packs/.
	RemovedTemp int
	// RemovedLoose counts loose files removed because the pack their row
	// names holds the same blob (left by a pack that stopped before
	// removing them, or written again after packing).
	RemovedLoose int
}

// sweepPacks is gc's part for packs, run under gc's exclusive lock after the
// rows of dead blobs are deleted: a pack none of whose blobs any row names
// goes; one whose dead share passes RewriteThreshold is rewritten with its
// live blobs (new pack durable, rows moved in one transaction, then the old
// pack unlinked); packs no row names and temp files, older than the grace
// period, go, and so do loose copies of packed blobs. A dry run counts and
// changes nothing. onDisk is what gc's mark found of the blobs it asks
// about: the unused ones, and loose copies of blobs whose rows name a
// pack; dying lists the blobs whose rows a dry run would have deleted.
func (s *Store) sweepPacks(ctx context.Context, cutoff time.Time, dryRun bool, onDisk map[cas.Blob]cas.Entry, dying map[cas.Blob]bool) (PackSweep, error) {
	var sw PackSweep
	rows, err := s.index.Packs(ctx)
	if err != nil {
		return sw, err
	}
	files, temps, _, err := s.blobs.Packs(ctx)
	if err != nil {
		return sw, err
	}
	recorded := map[string]bool{}
	for _, r := range rows {
		recorded[r.Name] = true
	}
	for _, f := range files {
		if !recorded[f.Name] && f.ModTime.Before(cutoff) {
			// Written by a pack that did not reach its rows (a crash):
			// its blobs are still loose.
			sw.Dropped++
			sw.FreedBytes += f.Size
			if !dryRun {
				if err := s.blobs.RemovePack(ctx, f.Name); err != nil {
					return sw, err
				}
			}
		}
	}
	for _, t := range temps {
		if t.ModTime.Before(cutoff) {
			sw.RemovedTemp++
			if !dryRun {
				if err := s.blobs.RemoveTempPack(ctx, t.RelPath); err != nil {
					return sw, err
				}
			}
		}
	}
	for _, r := range rows {
		if err := ctx.Err(); err != nil {
			return sw, err
		}
		var live []cas.Blob
		if r.LiveBlobs > 0 {
			named, err := s.index.PackedBlobs(ctx, r.Name)
			if err != nil {
				return sw, err
			}
			for _, b := range named {
				if dying[b] {
					r.LiveBlobs--
					r.LiveBytes -= onDisk[b].Size
					continue
				}
				live = append(live, b)
			}
		}
		dead := r.Raw - r.LiveBytes
		for _, b := range live {
			// The row names this pack, which holds the blob: a loose copy
			// is redundant.
			if e, ok := onDisk[b]; ok && !isPacked(e) && e.ModTime.Before(cutoff) {
				sw.RemovedLoose++
				if !dryRun {
					if err := s.blobs.Remove(ctx, b); err != nil && !errors.Is(err, cas.ErrNotFound) {
						return sw, err
					}
				}
			}
		}
		switch {
		case r.LiveBlobs == 0:
			sw.Dropped++
			sw.FreedBytes += r.Size
			if dryRun {
				continue
			}
			if err := s.index.ReplacePack(ctx, r.Name, index.PackRecord{}); err != nil {
				return sw, err
			}
			if err := s.blobs.RemovePack(ctx, r.Name); err != nil {
				return sw, err
			}
		case float64(dead) > RewriteThreshold*float64(r.Raw):
			sw.Rewritten++
			if dryRun {
				sw.FreedBytes += int64(float64(r.Size) * float64(dead) / float64(r.Raw))
				continue
			}
			info, err := s.blobs.WritePack(ctx, live)
			if err != nil {
				return sw, fmt.Errorf("rewrite %s: %w", r.Name, err)
			}
			if err := s.fault("gc:rewrite-record"); err != nil {
				return sw, err
			}
			if err := s.index.ReplacePack(ctx, r.Name, index.PackRecord{Name: info.Name, Size: info.Size, Raw: info.Raw, Blobs: live}); err != nil {
				return sw, err
			}
			if err := s.blobs.RemovePack(ctx, r.Name); err != nil {
				return sw, err
			}
			sw.FreedBytes += r.Size - info.Size
		}
	}
	return sw, nil
}

// verifyPacks is verify's part for packs: every pack re-hashed as a whole
// and blob by blob. Blobs found whole count as seen (a row using one is not
// missing); damage is reported with the keys that lose their bytes; a pack
// no row names is an orphan (gc removes it); temp files are listed.
func (s *Store) verifyPacks(ctx context.Context, res *VerifyResult, used func(cas.Blob) bool, seen map[cas.Blob]bool, whole *[]cas.Blob) error {
	rows, err := s.index.Packs(ctx)
	if err != nil {
		return err
	}
	recorded := map[string]bool{}
	for _, r := range rows {
		recorded[r.Name] = true
	}
	packs, temps, bad, err := s.blobs.Packs(ctx)
	if err != nil {
		return err
	}
	for _, t := range temps {
		res.Temp = append(res.Temp, Problem{Path: s.abs(t.RelPath), Reason: "temp file"})
	}
	names := make([]string, 0, len(packs)+len(bad))
	for _, p := range packs {
		names = append(names, p.Name)
	}
	for name := range bad {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		path := s.abs(cas.PacksDir + "/" + name)
		ok, problems, err := s.blobs.VerifyPack(ctx, name)
		if err != nil {
			return err
		}
		for _, e := range ok {
			if seen[e.Blob] {
				continue // verified as a loose file already
			}
			seen[e.Blob] = true
			res.Checked++
			res.CheckedBytes += e.Size
			if used(e.Blob) {
				*whole = append(*whole, e.Blob)
			}
		}
		for _, p := range problems {
			if !p.Blob.Digest.IsZero() && seen[p.Blob] {
				continue // a loose copy was found whole: reads use it
			}
			pr := Problem{Path: path, Blob: p.Blob, Reason: p.Reason}
			if !p.Blob.Digest.IsZero() && used(p.Blob) {
				pr.Keys = s.keys(ctx, p.Blob)
				seen[p.Blob] = true // corrupt, not also missing
			}
			if p.Blob.Digest.IsZero() || used(p.Blob) || recorded[name] {
				res.Corrupt = append(res.Corrupt, pr)
			}
		}
		if !recorded[name] && len(problems) == 0 {
			res.Orphans = append(res.Orphans, Problem{Path: path, Reason: "pack no index row names"})
		}
	}
	return nil
}

// DefaultPackOver is the amount of cold loose bytes past which gc packs
// them (casctl gc --pack-over).
const DefaultPackOver = 256 << 20

// PackIfOver packs, as Pack does with o, when the blobs some part uses that
// are loose, unpacked and unused for o.OlderThan add up to more than limit
// bytes. It reports whether it packed. gc's callers run it after a sweep.
func (s *Store) PackIfOver(ctx context.Context, limit int64, o PackOptions) (PackResult, bool, error) {
	dry := o
	dry.DryRun = true
	res, err := s.Pack(ctx, dry)
	if err != nil || res.RawBytes <= limit {
		return res, false, err
	}
	res, err = s.Pack(ctx, o)
	return res, err == nil, err
}

// inPacks reports whether path is inside the store's packs/ directory.
func (s *Store) inPacks(path string) bool {
	rel, err := filepath.Rel(s.dir, path)
	return err == nil && strings.HasPrefix(filepath.ToSlash(rel), cas.PacksDir+"/")
}

// repairPacks is Repair's part for damaged packs. Each pack verify found
// anything wrong with is written anew with the blobs in it that read back
// whole and that rows name; the rows move to the new pack in one
// transaction; the damaged pack goes to QuarantineDir. A used blob that was
// corrupt in it gets a note of its own there, so that its rows stay, gc
// runs, and writing the same content again heals it, as for a corrupt loose
// blob. Blobs of a pack whose table of contents is lost are missing, not
// corrupt: Repair drops their rows.
func (s *Store) repairPacks(ctx context.Context, corrupt []Problem, dryRun bool) ([]Repaired, error) {
	damaged := map[string][]Problem{}
	var names []string
	for _, p := range corrupt {
		if !s.inPacks(p.Path) {
			continue
		}
		name := filepath.Base(p.Path)
		if damaged[name] == nil {
			names = append(names, name)
		}
		damaged[name] = append(damaged[name], p)
	}
	slices.Sort(names)
	var out []Repaired
	for _, name := range names {
		path := s.abs(cas.PacksDir + "/" + name)
		var bad []Repaired
		for _, p := range damaged[name] {
			if !p.Blob.Digest.IsZero() && len(p.Keys) > 0 {
				bad = append(bad, Repaired{Blob: p.Blob, Path: path, Keys: p.Keys, Reason: p.Reason})
			}
		}
		if dryRun {
			out = append(out, bad...)
			continue
		}
		ok, _, err := s.blobs.VerifyPack(ctx, name)
		if err != nil {
			return out, err
		}
		whole := map[cas.Blob]bool{}
		for _, e := range ok {
			whole[e.Blob] = true
		}
		named, err := s.index.PackedBlobs(ctx, name)
		if err != nil {
			return out, err
		}
		var live []cas.Blob
		for _, b := range named {
			if whole[b] {
				live = append(live, b)
			}
		}
		var rec index.PackRecord
		if len(live) > 0 {
			info, err := s.blobs.WritePack(ctx, live)
			if err != nil {
				return out, fmt.Errorf("rewrite %s: %w", name, err)
			}
			rec = index.PackRecord{Name: info.Name, Size: info.Size, Raw: info.Raw, Blobs: live}
		}
		if err := s.index.ReplacePack(ctx, name, rec); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return out, err
		}
		to, err := s.quarantine(path)
		if err != nil {
			return out, err
		}
		for i := range bad {
			note := filepath.Join(filepath.Dir(to), bad[i].Blob.FileName())
			if _, err := os.Lstat(note); err == nil {
				note = filepath.Join(filepath.Dir(to), bad[i].Blob.FileName()+".pack")
			}
			msg := fmt.Sprintf("%s was corrupt in %s (now %s): %s\n", bad[i].Blob, name, to, bad[i].Reason)
			if err := os.WriteFile(note, []byte(msg), 0o444); err != nil {
				return out, err
			}
			bad[i].To = to
		}
		out = append(out, bad...)
	}
	return out, nil
}
