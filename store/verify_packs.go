package store

import (
	"context"
	"slices"

	"github.com/toolcas/toolcas/cas"
)

// verifyPacks is verify's part for packs: every pack re-hashed as a whole
// and blob by blob. Blobs found whole count as seen (a row using one is not
// missing); damage is reported with the keys that lose their bytes; a pack
// no row names is an orphan (gc removes it); temp files are listed.
func (e *localEngine) verifyPacks(ctx context.Context, res *VerifyResult, used func(cas.Blob) bool, seen map[cas.Blob]bool, whole *[]cas.Blob) error {
	rows, err := e.ix.Packs(ctx)
	if err != nil {
		return err
	}
	recorded := map[string]bool{}
	for _, r := range rows {
		recorded[r.Name] = true
	}
	packs, temps, bad, err := e.blobs.Packs(ctx)
	if err != nil {
		return err
	}
	for _, t := range temps {
		res.Temp = append(res.Temp, Problem{Path: e.name(t.RelPath), Reason: "temp file"})
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
		path := e.name(cas.PacksDir + "/" + name)
		ok, problems, err := e.blobs.VerifyPack(ctx, name)
		if err != nil {
			return err
		}
		for _, en := range ok {
			if seen[en.Blob] {
				continue // verified as a loose file already
			}
			seen[en.Blob] = true
			res.Checked++
			res.CheckedBytes += en.Size
			if used(en.Blob) {
				*whole = append(*whole, en.Blob)
			}
		}
		for _, p := range problems {
			if !p.Blob.Digest.IsZero() && seen[p.Blob] {
				continue // a loose copy was found whole: reads use it
			}
			pr := Problem{Path: path, Blob: p.Blob, Reason: p.Reason}
			if !p.Blob.Digest.IsZero() && used(p.Blob) {
				pr.Keys = keysUsing(ctx, e.ix, p.Blob)
				seen[p.Blob] = true // corrupt, not also missing
			}
			if p.Blob.Digest.IsZero() || used(p.Blob) || recorded[name] {
				res.Corrupt = append(res.Corrupt, pr)
			}
		}
		if !recorded[name] && len(problems) == 0 {
			res.Orphans = append(res.Orphans, Problem{Path: path, Reason: "pack no index row names"})
		}
		if bad[name] != nil && recorded[name] {
			if err := e.damagedTOC(ctx, res, name, used, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// damagedTOC reports the used blobs the rows place in a pack whose table
// of contents does not load: not missing (their bytes are likely whole in
// the pack's frames) but damaged, which Repair salvages.
func (e *localEngine) damagedTOC(ctx context.Context, res *VerifyResult, name string, used func(cas.Blob) bool, seen map[cas.Blob]bool) error {
	named, err := e.ix.PackedBlobs(ctx, name)
	if err != nil {
		return err
	}
	for _, b := range named {
		if seen[b] || !used(b) {
			continue // a loose copy was found whole, or no part uses it
		}
		seen[b] = true
		res.Corrupt = append(res.Corrupt, Problem{Path: e.name(cas.PacksDir + "/" + name), Blob: b,
			Keys: keysUsing(ctx, e.ix, b), Reason: "in a pack whose table of contents is damaged: casctl repair salvages it from the pack's frames"})
	}
	return nil
}

// packedBlobs returns the blobs some pack holds.
func (e *localEngine) packedBlobs(ctx context.Context) (map[cas.Blob]bool, error) {
	packs, _, _, err := e.blobs.Packs(ctx)
	if err != nil {
		return nil, err
	}
	in := map[cas.Blob]bool{}
	for _, p := range packs {
		for _, en := range p.Entries {
			in[en.Blob] = true
		}
	}
	return in, nil
}
