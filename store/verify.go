package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
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
	return s.verify(ctx, o, false)
}

// verify is Verify; held says the caller holds gc.lock exclusively, so
// that a second look needs no lock of its own.
func (s *Store) verify(ctx context.Context, o VerifyOptions, held bool) (VerifyResult, error) {
	var res VerifyResult
	problems, err := s.index.IntegrityCheck(ctx)
	if err != nil {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	res.IndexProblems = problems
	refs, err := s.index.ReferencedBlobs(ctx)
	if err != nil {
		if len(problems) > 0 {
			// The index is too damaged to read: report what the integrity
			// check found rather than the first query that failed.
			return res, nil
		}
		return res, fmt.Errorf("store: verify: %w", err)
	}
	type ref struct{ size, parts int64 }
	used := make(map[cas.Blob]ref, len(refs))
	for _, r := range refs {
		used[r.Blob] = ref{r.Size, r.Parts}
	}
	var entries []cas.Entry
	var total int64
	if err := s.blobs.Walk(ctx, func(e cas.Entry) error {
		entries = append(entries, e)
		if e.Kind == cas.EntryBlob {
			total += e.Size
		}
		return nil
	}); err != nil {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	seen := make(map[cas.Blob]bool, len(entries))
	mtimes := map[cas.Blob]time.Time{}
	var whole []cas.Blob
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		path := s.abs(e.RelPath)
		switch e.Kind {
		case cas.EntryTemp:
			res.Temp = append(res.Temp, Problem{Path: path, Reason: "temp file"})
			continue
		case cas.EntryStray:
			if e.Vanished {
				// gc or a writer's rename took it since the listing.
				continue
			}
			if e.BadShard {
				res.Corrupt = append(res.Corrupt, Problem{Path: path, Reason: e.Problem})
				continue
			}
			p := Problem{Path: path, Blob: e.Blob, Reason: e.Problem}
			if _, ok := used[e.Blob]; ok && !e.Blob.Digest.IsZero() && e.RelPath == e.Blob.RelPath() {
				seen[e.Blob] = true
				p.Keys = s.keys(ctx, e.Blob)
				res.Corrupt = append(res.Corrupt, p)
			} else {
				res.Orphans = append(res.Orphans, p)
			}
			continue
		}
		err := s.blobs.Verify(ctx, e.Blob)
		if errors.Is(err, cas.ErrNotFound) {
			// Removed since the walk listed it: if a row still uses it,
			// the re-check below under the lock says so.
			continue
		}
		seen[e.Blob] = true
		res.Checked++
		res.CheckedBytes += e.Size
		if o.Progress != nil {
			o.Progress(res.CheckedBytes, total)
		}
		r, isUsed := used[e.Blob]
		switch {
		case err == nil && isUsed && r.size != e.Size:
			// Cannot happen with a sound hash; say so rather than hide it.
			res.Corrupt = append(res.Corrupt, Problem{Path: path, Blob: e.Blob, Keys: s.keys(ctx, e.Blob),
				Reason: fmt.Sprintf("%d bytes, the index says %d", e.Size, r.size)})
		case err == nil && isUsed:
			whole = append(whole, e.Blob)
		case err == nil:
			res.Orphans = append(res.Orphans, Problem{Path: path, Blob: e.Blob, Reason: "no index row uses it"})
			mtimes[e.Blob] = e.ModTime
		default:
			reason := err.Error()
			var ce *cas.CorruptError
			if errors.As(err, &ce) {
				reason = ce.Reason
				_, other := used[cas.Blob{Digest: ce.Got, Ext: e.Blob.Ext}]
				switch {
				case !ce.Got.IsZero() && other:
					reason = "misnamed: holds the content of " + ce.Got.String()
				case isUsed && e.Size < r.size:
					reason = fmt.Sprintf("truncated: %d of %d bytes", e.Size, r.size)
				}
			}
			p := Problem{Path: path, Blob: e.Blob, Reason: reason}
			if isUsed {
				p.Keys = s.keys(ctx, e.Blob)
			}
			res.Corrupt = append(res.Corrupt, p)
		}
	}
	isUsed := func(b cas.Blob) bool { _, ok := used[b]; return ok }
	if err := s.verifyPacks(ctx, &res, isUsed, seen, &whole); err != nil {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	lost, err := s.index.PartsMissingBlob(ctx, func(b cas.Blob) bool { return seen[b] })
	if err != nil {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	if len(lost) > 0 || len(res.Orphans) > 0 {
		// gc may have collected, and writers stored, blobs since the walk:
		// look again while gc cannot sweep.
		if lost, err = s.recheck(ctx, seen, &res, held); err != nil {
			return res, fmt.Errorf("store: verify: %w", err)
		}
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
		if t, ok := mtimes[o.Blob]; ok && t.After(cutoff) {
			res.RecentOrphans++
		}
	}
	if len(whole) > 0 && !s.readOnly {
		if err := s.index.MarkVerified(ctx, whole, s.now()); err != nil {
			return res, fmt.Errorf("store: verify: %w", err)
		}
	}
	res.OK = len(res.Corrupt) == 0 && len(res.Missing) == 0 && len(res.IndexProblems) == 0
	return res, nil
}

// recheck looks again, under gc.lock shared, at what verify's first look
// found missing or unused. While the lock is held gc cannot be between its
// row deletions and its unlinks, and a writer commits a row only once its
// blob is durable: a row whose blob is missing now is damage, whereas one
// the walk missed may have been written, or collected, meanwhile. It
// returns the parts whose blobs are missing, and drops from res.Orphans the
// blobs a row uses now. On a store this process cannot lock (read-only),
// it reads the rows again without the lock.
func (s *Store) recheck(ctx context.Context, seen map[cas.Blob]bool, res *VerifyResult, held bool) ([]index.Part, error) {
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
	lost, err := s.index.PartsMissingBlob(ctx, func(b cas.Blob) bool {
		if seen[b] {
			return true
		}
		_, err := s.blobs.Stat(ctx, b)
		return err == nil || errors.Is(err, cas.ErrCorrupt)
	})
	if err != nil || len(res.Orphans) == 0 {
		return lost, err
	}
	refs, err := s.index.ReferencedBlobs(ctx)
	if err != nil {
		return nil, err
	}
	used := make(map[cas.Blob]bool, len(refs))
	for _, r := range refs {
		used[r.Blob] = true
	}
	kept := res.Orphans[:0]
	for _, o := range res.Orphans {
		if o.Blob.Digest.IsZero() || !used[o.Blob] {
			kept = append(kept, o)
		}
	}
	res.Orphans = kept
	return lost, nil
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
	return filepath.Join(s.dir, filepath.FromSlash(rel))
}
