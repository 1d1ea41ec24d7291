package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// verifyRemote is Verify on a store in an object store: every object is
// read from the store itself, past the cache (cas.OpenStored), re-hashed
// and checked against the index a shard at a time, as on a directory.
// Object stores keep no temp files and this store no packs.
func (s *Store) verifyRemote(ctx context.Context, o VerifyOptions) (VerifyResult, error) {
	var res VerifyResult
	problems, err := s.index.IntegrityCheck(ctx)
	if err != nil {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	res.IndexProblems = problems
	var total int64
	if st, err := s.index.Stats(ctx, ""); err == nil {
		total = st.StoredBytes + st.UnreferencedBytes
	} else {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	ahead, err := newShardRows(ctx, s.index)
	if err != nil {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	v := &verifier{s: s, o: o, res: &res, total: total, inPacks: map[cas.Blob]bool{}, seen: map[cas.Blob]bool{},
		mtimes: map[cas.Blob]time.Time{}, used: map[cas.Blob]index.ShardBlob{}, ahead: ahead, whole: newWholeRows(), start: s.now()}
	err = v.run(ctx, s.remote.be.Walk)
	if err == nil {
		err = v.markWhole(ctx)
	}
	if err != nil {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	// Look again at what seemed missing or unused: gc deletes rows before
	// objects and writers put objects before rows, so a row used now whose
	// object is not there now is damage.
	var still []cas.Blob
	for _, b := range v.missing {
		if v.seen[b] {
			continue
		}
		row, err := s.index.Blob(ctx, b)
		if errors.Is(err, index.ErrNotFound) || (err == nil && row.Parts == 0) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("store: verify: %w", err)
		}
		if _, err := s.remote.be.Stat(ctx, b); err == nil {
			continue
		} else if !errors.Is(err, cas.ErrNotFound) {
			return res, fmt.Errorf("store: verify: %w", err)
		}
		still = append(still, b)
	}
	kept := res.Orphans[:0]
	for _, p := range res.Orphans {
		if !p.Blob.Digest.IsZero() {
			if row, err := s.index.Blob(ctx, p.Blob); err == nil && row.Parts > 0 {
				continue
			}
		}
		kept = append(kept, p)
	}
	res.Orphans = kept
	for _, b := range still {
		res.Missing = append(res.Missing, Problem{Path: s.objectName(b.RelPath()), Blob: b, Keys: s.keys(ctx, b), Reason: "missing"})
	}
	sort.Slice(res.Missing, func(i, j int) bool { return res.Missing[i].Path < res.Missing[j].Path })
	grace := o.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	cutoff := s.now().Add(-grace)
	for _, p := range res.Orphans {
		if t, ok := v.mtimes[p.Blob]; ok && t.After(cutoff) {
			res.RecentOrphans++
		}
	}
	if res.CountDrift, err = s.index.CountDrift(ctx); err != nil {
		return res, fmt.Errorf("store: verify: %w", err)
	}
	res.OK = len(res.Corrupt) == 0 && len(res.Missing) == 0 && len(res.IndexProblems) == 0 && len(res.CountDrift) == 0
	return res, nil
}

// verifyObject re-hashes a blob's object as the store holds it.
func (s *Store) verifyObject(ctx context.Context, b cas.Blob) error {
	r, err := cas.OpenStored(ctx, s.remote.be, b)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = cas.CopyContext(ctx, discard{}, r)
	return err
}
