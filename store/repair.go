package store

import (
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
	packed, err := e.repairPacks(ctx, v.Corrupt, o.DryRun)
	res.Quarantined = append(res.Quarantined, packed...)
	if err != nil {
		return res, fmt.Errorf("repair: %w", err)
	}
	for _, p := range v.Corrupt {
		if e.inPacks(p.Path) {
			continue // repairPacks did it
		}
		r := Repaired{Blob: p.Blob, Path: p.Path, Keys: p.Keys, Reason: p.Reason}
		if !o.DryRun {
			to, err := e.quarantine(p.Path)
			if err != nil {
				return res, fmt.Errorf("repair: %w", err)
			}
			r.To = to
		}
		res.Quarantined = append(res.Quarantined, r)
	}
	var lost []cas.Blob
	for _, p := range v.Missing {
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
// whole and that rows name; the rows move to the new pack in one
// transaction; the damaged pack goes to QuarantineDir. A used blob that was
// corrupt in it gets a note of its own there, so that its rows stay, gc
// runs, and writing the same content again heals it, as for a corrupt loose
// blob. Blobs of a pack whose table of contents is lost are missing, not
// corrupt: Repair drops their rows.
func (e *localEngine) repairPacks(ctx context.Context, corrupt []Problem, dryRun bool) ([]Repaired, error) {
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
	var out []Repaired
	for _, name := range names {
		path := e.name(cas.PacksDir + "/" + name)
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
		ok, _, err := e.blobs.VerifyPack(ctx, name)
		if err != nil {
			return out, err
		}
		whole := map[cas.Blob]bool{}
		for _, e := range ok {
			whole[e.Blob] = true
		}
		named, err := e.ix.PackedBlobs(ctx, name)
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
			info, err := e.blobs.WritePack(ctx, live)
			if err != nil {
				return out, fmt.Errorf("rewrite %s: %w", name, err)
			}
			rec = index.PackRecord{Name: info.Name, Size: info.Size, Raw: info.Raw, Blobs: live}
		}
		if err := e.ix.ReplacePack(ctx, name, rec); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return out, err
		}
		to, err := e.quarantine(path)
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
