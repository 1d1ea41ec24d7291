package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// QuarantineDir is the directory under the store root where Repair moves
// corrupt blob files. Nothing in the store reads it again; it is kept for
// whoever wants to look at what went wrong, and may be deleted at will.
const QuarantineDir = "quarantine"

// RepairOptions configure Repair.
type RepairOptions struct {
	// DryRun reports what Repair would do and changes nothing.
	DryRun bool
}

// Repaired is one blob Repair acted on.
type Repaired struct {
	// Blob is the blob's name.
	Blob cas.Blob
	// Path is where the blob's file was (or should have been).
	Path string
	// To is where a quarantined file went; empty for a lost blob and on a
	// dry run.
	To string
	// Keys are the keys whose parts use the blob.
	Keys []string
	// Reason is what verify found wrong.
	Reason string
}

// RepairResult says what Repair did, or would do on a dry run.
type RepairResult struct {
	DryRun bool
	// Lost lists the blobs missing from disk whose parts' rows Repair
	// dropped: those keys no longer resolve.
	Lost []Repaired
	// Quarantined lists the corrupt blob files Repair moved under
	// QuarantineDir. Their rows stay: writing the same content again, under
	// any key, stores the blob afresh and heals every key that uses it.
	Quarantined []Repaired
	// Salvaged lists the blobs whose bytes Repair read back, checked, from
	// where verify could not (a damaged pack's frames, a file behind a
	// link): they are loose files again, and their keys read as before.
	Salvaged []Repaired
	// IndexProblems lists damage to the index database itself, which Repair
	// cannot mend.
	IndexProblems []string
	// CountDrift lists the counters behind stats that differed from a
	// recount of the rows; Repair set them to the recount.
	CountDrift []string
}

// ErrIndexDamaged is returned by Repair when SQLite's integrity check fails:
// the index must be restored from a copy before anything else is trusted.
var ErrIndexDamaged = errors.New("the index database is damaged")

// Repair brings a damaged store back to a state gc accepts, fetching
// nothing it cannot: it drops the rows of parts whose blobs are missing
// from disk (their content is gone; the result names their keys), and moves
// corrupt blob files aside under QuarantineDir, keeping their rows so that a
// later write of the same content heals them, and sets the counters behind
// stats to a recount of the rows when they drifted. It holds gc.lock exclusively,
// so no writer is between its blob and its row meanwhile. Orphans and temp
// files are left to gc.
func (s *Store) Repair(ctx context.Context, o RepairOptions) (RepairResult, error) {
	r, err := capability[repairer](s, "repair", true)
	if err != nil {
		return RepairResult{DryRun: o.DryRun}, err
	}
	return r.repair(ctx, o, func(ctx context.Context, held bool) (VerifyResult, error) {
		return s.verify(ctx, VerifyOptions{}, held)
	})
}

// repair is Repair on a local store; verify is the store's verify.
func (e *localEngine) repair(ctx context.Context, o RepairOptions, verify func(context.Context, bool) (VerifyResult, error)) (_ RepairResult, err error) {
	res := RepairResult{DryRun: o.DryRun}
	unlock, err := e.locks.exclusive(ctx, DefaultGCLockTimeout)
	if err != nil {
		return res, err
	}
	defer unlock()
	v, err := verify(ctx, true)
	if err != nil {
		return res, fmt.Errorf("repair: %w", err)
	}
	res.IndexProblems = v.IndexProblems
	if len(v.IndexProblems) > 0 {
		return res, fmt.Errorf("repair: %w (%s); nothing changed", ErrIndexDamaged, strings.Join(v.IndexProblems, "; "))
	}
	// Bytes verify could not reach where they should be, but that read
	// back checked through a link in the way, are staged first: the link
	// is quarantined below.
	rescued := e.rescue(ctx, v.Missing)
	defer func() {
		for _, st := range rescued {
			st.Discard()
		}
	}()
	packed, salvaged, err := e.repairPacks(ctx, v.Corrupt, o.DryRun)
	res.Quarantined = append(res.Quarantined, packed...)
	res.Salvaged = append(res.Salvaged, salvaged...)
	if err != nil {
		return res, fmt.Errorf("repair: %w", err)
	}
	if err := e.quarantineLoose(v.Corrupt, o.DryRun, &res); err != nil {
		return res, fmt.Errorf("repair: %w", err)
	}
	var lost []cas.Blob
	for _, p := range v.Missing {
		if st := rescued[p.Blob]; st != nil {
			if !o.DryRun {
				if _, err := st.Commit(ctx); err != nil {
					return res, fmt.Errorf("repair: put back %s: %w", p.Blob, err)
				}
			}
			res.Salvaged = append(res.Salvaged, Repaired{Blob: p.Blob, Path: p.Path, Keys: p.Keys,
				Reason: "read back through the link in its way, which is quarantined"})
			continue
		}
		res.Lost = append(res.Lost, Repaired{Blob: p.Blob, Path: p.Path, Keys: p.Keys, Reason: p.Reason})
		lost = append(lost, p.Blob)
	}
	res.CountDrift = v.CountDrift
	if o.DryRun {
		return res, nil
	}
	// Dropping rows keeps the counters as they are, right or wrong: the
	// recount comes last.
	defer func() {
		if len(res.CountDrift) > 0 && err == nil {
			if _, err = e.ix.FixCounts(ctx); err != nil {
				err = fmt.Errorf("repair: %w", err)
			}
		}
	}()
	if len(lost) == 0 {
		return res, nil
	}
	gone, err := e.ix.DeletePartsOf(ctx, lost)
	if err != nil {
		return res, fmt.Errorf("repair: %w", err)
	}
	// Report the keys as they were when the rows went.
	byBlob := map[cas.Blob][]string{}
	for _, p := range gone {
		byBlob[p.Blob] = append(byBlob[p.Blob], p.Key)
	}
	for i := range res.Lost {
		res.Lost[i].Keys = byBlob[res.Lost[i].Blob]
	}
	return res, nil
}

// quarantineLoose moves the corrupt loose blobs verify found, and whatever
// stands where a shard should be, under QuarantineDir (repairPacks does the
// packs).
func (e *localEngine) quarantineLoose(corrupt []Problem, dryRun bool, res *RepairResult) error {
	for _, p := range corrupt {
		if e.inPacks(p.Path) {
			continue
		}
		r := Repaired{Blob: p.Blob, Path: p.Path, Keys: p.Keys, Reason: p.Reason}
		if !dryRun {
			to, err := e.quarantine(p.Path)
			if err != nil {
				return err
			}
			r.To = to
		}
		res.Quarantined = append(res.Quarantined, r)
	}
	return nil
}

// rescue reads the blobs verify found missing through whatever stands in
// their way (a shard directory that is a link to elsewhere, say), and
// stages, in the store, those whose bytes check against their digest.
// Repair never drops the row of a blob whose bytes it can read and check.
func (e *localEngine) rescue(ctx context.Context, missing []Problem) map[cas.Blob]*cas.Staged {
	out := map[cas.Blob]*cas.Staged{}
	for _, p := range missing {
		f, err := os.Open(filepath.Join(e.dir, filepath.FromSlash(p.Blob.RelPath())))
		if err != nil {
			continue
		}
		st, err := e.blobs.Stage(ctx, f, func() (string, error) { return p.Blob.Ext, nil })
		f.Close()
		if err != nil {
			continue
		}
		if st.Blob() != p.Blob {
			st.Discard() // other bytes: not the blob
			continue
		}
		out[p.Blob] = st
	}
	return out
}

// quarantine moves the file (or whatever stands) at path, inside the blob
// directories or packs/, to QuarantineDir under a name of its own, durably, and
// returns where it went.
func (e *localEngine) quarantine(path string) (string, error) {
	rel, err := filepath.Rel(e.dir, path)
	if err != nil || !strings.HasPrefix(filepath.ToSlash(rel), cas.BlobsDir+"/") && !e.inPacks(path) {
		return "", fmt.Errorf("quarantine %s: not under %s or %s", path, filepath.Join(e.dir, cas.BlobsDir), filepath.Join(e.dir, cas.PacksDir))
	}
	qdir := filepath.Join(e.dir, QuarantineDir)
	if err := os.MkdirAll(qdir, 0o755); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", path, err)
	}
	base := filepath.Base(path)
	to := filepath.Join(qdir, base)
	for n := 2; ; n++ {
		if _, err := os.Lstat(to); errors.Is(err, fs.ErrNotExist) {
			break
		}
		to = filepath.Join(qdir, base+"."+strconv.Itoa(n))
	}
	if err := os.Rename(path, to); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", path, err)
	}
	for _, d := range []string{qdir, filepath.Dir(path)} {
		if err := syncDir(d); err != nil {
			return to, fmt.Errorf("quarantine %s: sync %s: %w", path, d, err)
		}
	}
	return to, nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// quarantined returns the blobs that have a file under QuarantineDir, moved
// there by Repair. A directory that does not exist holds none.
func (e *localEngine) quarantined(ctx context.Context) (map[cas.Blob]bool, error) {
	des, err := os.ReadDir(filepath.Join(e.dir, QuarantineDir))
	if errors.Is(err, fs.ErrNotExist) {
		return map[cas.Blob]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", filepath.Join(e.dir, QuarantineDir), err)
	}
	out := make(map[cas.Blob]bool, len(des))
	for _, de := range des {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := de.Name()
		b, err := cas.ParseBlobName(name)
		if err != nil {
			// A second file of the same name has a numeric suffix.
			if i := strings.LastIndexByte(name, '.'); i > 0 {
				if _, nerr := strconv.Atoi(name[i+1:]); nerr == nil {
					b, err = cas.ParseBlobName(name[:i])
				}
			}
		}
		if err == nil {
			out[b] = true
		}
	}
	return out, nil
}

// inPacks reports whether path is inside the store's packs/ directory.
func (e *localEngine) inPacks(path string) bool {
	rel, err := filepath.Rel(e.dir, path)
	return err == nil && strings.HasPrefix(filepath.ToSlash(rel), cas.PacksDir+"/")
}

// repairPacks is Repair's part for damaged packs. Each pack verify found
// anything wrong with is written anew with the blobs in it that read back
// whole and that rows name; the used blobs that do not (a damaged table of
// contents loses them all) are salvaged from its frames (cas.SalvagePack)
// and become loose files again; the rows move to the new pack in one
// transaction; the damaged pack goes to QuarantineDir. A used blob that
// could not be salvaged gets a note of its own there, so that its rows
// stay, gc runs, and writing the same content again heals it, as for a
// corrupt loose blob. A dry run says what it would quarantine and salvage.
func (e *localEngine) repairPacks(ctx context.Context, corrupt []Problem, dryRun bool) (quarantined, salvaged []Repaired, err error) {
	damaged := map[string][]Problem{}
	var names []string
	for _, p := range corrupt {
		if !e.inPacks(p.Path) {
			continue
		}
		name := filepath.Base(p.Path)
		if damaged[name] == nil {
			names = append(names, name)
		}
		damaged[name] = append(damaged[name], p)
	}
	slices.Sort(names)
	for _, name := range names {
		q, sv, err := e.repairPack(ctx, name, damaged[name], dryRun)
		quarantined, salvaged = append(quarantined, q...), append(salvaged, sv...)
		if err != nil {
			return quarantined, salvaged, err
		}
	}
	return quarantined, salvaged, nil
}

// repairPack repairs one damaged pack, whose problems verify found (see
// repairPacks).
func (e *localEngine) repairPack(ctx context.Context, name string, problems []Problem, dryRun bool) (quarantined, salvaged []Repaired, err error) {
	path := e.name(cas.PacksDir + "/" + name)
	bad := map[cas.Blob]Repaired{}
	for _, p := range problems {
		if !p.Blob.Digest.IsZero() && len(p.Keys) > 0 {
			bad[p.Blob] = Repaired{Blob: p.Blob, Path: path, Keys: p.Keys, Reason: p.Reason}
		}
	}
	ok, _, err := e.blobs.VerifyPack(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	whole := map[cas.Blob]bool{}
	for _, en := range ok {
		whole[en.Blob] = true
	}
	named, err := e.ix.PackedBlobs(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	var live []cas.Blob
	for _, b := range named {
		if whole[b] {
			live = append(live, b)
		}
	}
	if salvaged, err = e.salvage(ctx, name, bad, dryRun); err != nil {
		return nil, salvaged, err
	}
	for _, r := range salvaged {
		delete(bad, r.Blob)
	}
	for _, r := range bad {
		quarantined = append(quarantined, r)
	}
	slices.SortFunc(quarantined, func(a, b Repaired) int { return byFileName(a.Blob, b.Blob) })
	if dryRun {
		return quarantined, salvaged, nil
	}
	var rec index.PackRecord
	if len(live) > 0 {
		info, err := e.blobs.WritePack(ctx, live)
		if err != nil {
			return nil, salvaged, fmt.Errorf("rewrite %s: %w", name, err)
		}
		rec = index.PackRecord{Name: info.Name, Size: info.Size, Raw: info.Raw, Blobs: info.Blobs()}
	}
	// The rows of the blobs that are not live go back to loose files:
	// the salvaged ones are there.
	if err := e.ix.ReplacePack(ctx, name, rec); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, salvaged, err
	}
	to, err := e.quarantine(path)
	if err != nil {
		return nil, salvaged, err
	}
	for i := range quarantined {
		if err := e.noteQuarantined(&quarantined[i], name, to); err != nil {
			return quarantined, salvaged, err
		}
	}
	return quarantined, salvaged, nil
}

// salvage reads the bad blobs of a pack back from its frames and, but on
// a dry run, writes them as loose files, durably, a batch at a time.
func (e *localEngine) salvage(ctx context.Context, name string, bad map[cas.Blob]Repaired, dryRun bool) ([]Repaired, error) {
	var want []cas.SizedBlob
	for b := range bad {
		row, err := e.ix.Blob(ctx, b)
		if err != nil {
			return nil, err
		}
		want = append(want, cas.SizedBlob{Blob: b, Size: row.Size})
	}
	if len(want) == 0 {
		return nil, nil
	}
	var (
		out   []Repaired
		batch []cas.Item
		held  int
	)
	flush := func() error {
		if len(batch) > 0 && !dryRun {
			if _, err := e.blobs.PutBatch(ctx, batch); err != nil {
				return fmt.Errorf("salvage %s: %w", name, err)
			}
		}
		batch, held = batch[:0], 0
		return nil
	}
	_, err := e.blobs.SalvagePack(ctx, name, want, func(b cas.Blob, data []byte) error {
		r := bad[b]
		r.Reason = "salvaged from the frames of " + name
		out = append(out, r)
		batch = append(batch, cas.Item{Data: bytes.Clone(data), Ext: b.Ext})
		if held += len(data); held >= PackLimit {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	slices.SortFunc(out, func(a, b Repaired) int { return byFileName(a.Blob, b.Blob) })
	return out, err
}

// noteQuarantined leaves a note in QuarantineDir for a used blob lost with
// its pack (now to): its rows stay, and writing the same content again
// heals them.
func (e *localEngine) noteQuarantined(r *Repaired, pack, to string) error {
	note := filepath.Join(filepath.Dir(to), r.Blob.FileName())
	if _, err := os.Lstat(note); err == nil {
		note = filepath.Join(filepath.Dir(to), r.Blob.FileName()+".pack")
	}
	msg := fmt.Sprintf("%s was corrupt in %s (now %s): %s\n", r.Blob, pack, to, r.Reason)
	if err := os.WriteFile(note, []byte(msg), 0o444); err != nil {
		return err
	}
	r.To = to
	return nil
}
