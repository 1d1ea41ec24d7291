package cas

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"
)

// EntryKind classifies what a walk finds under blobs/.
type EntryKind int

const (
	// EntryBlob is a regular file whose name is a blob name in its own shard.
	EntryBlob EntryKind = iota
	// EntryTemp is a temp file left by a write in progress or by a crash.
	EntryTemp
	// EntryStray is anything else: a file whose name is not a blob name, a
	// blob name in the wrong shard, a directory or link where a blob should be.
	EntryStray
)

// String returns "blob", "temp" or "stray".
func (k EntryKind) String() string {
	switch k {
	case EntryBlob:
		return "blob"
	case EntryTemp:
		return "temp"
	case EntryStray:
		return "stray"
	}
	return fmt.Sprintf("EntryKind(%d)", int(k))
}

// An Entry is one name found by Walk.
type Entry struct {
	Kind EntryKind
	// RelPath is the name relative to the store root, with forward slashes.
	RelPath string
	// Blob is set for EntryBlob.
	Blob    Blob
	Size    int64
	ModTime time.Time
	// Problem says, for EntryStray, what is wrong with the name.
	Problem string
	// Vanished reports a name listed and then removed before it could be
	// examined: an EntryStray whose Problem says so.
	Vanished bool
	// BadShard reports a link or file standing where a shard directory
	// should be: an EntryStray, and damage, since the blobs of that shard
	// cannot be reached.
	BadShard bool
	// Lazy reports an EntryBlob that WalkNames gave without its Size and
	// ModTime: Info reads them.
	Lazy bool
}

// Walk calls fn for every name under blobs/, shard by shard in the order
// of their names (the names within a shard in no order). Temp files are
// reported as EntryTemp, never as blobs. Any error listing a directory stops
// the walk and is returned, so that a caller deciding what to delete fails
// closed; an error from fn stops the walk and is returned as is.
func (s *Store) Walk(ctx context.Context, fn func(Entry) error) error {
	return s.walk(ctx, false, fn)
}

// WalkNames is Walk without a look at each blob file: an EntryBlob comes
// from the directory's listing alone (its name, and a regular file by the
// listing's type), Lazy, without its Size and ModTime, which Info reads
// for the few entries that need them. It spares a system call per file to
// a caller, such as gc's mark, that needs them only for the garbage.
func (s *Store) WalkNames(ctx context.Context, fn func(Entry) error) error {
	return s.walk(ctx, true, fn)
}

// Info returns e with its Size and ModTime read, if WalkNames gave it
// without them, and as it is otherwise. A file removed since the listing
// comes back as an EntryStray, Vanished, as Walk would have given it.
func (s *Store) Info(e Entry) (Entry, error) {
	if !e.Lazy {
		return e, nil
	}
	fi, err := s.fs.Lstat(e.RelPath)
	e.Lazy = false
	switch {
	case errors.Is(err, fs.ErrNotExist):
		e.Kind, e.Vanished, e.Problem = EntryStray, true, "vanished during the walk"
		return e, nil
	case err != nil:
		return e, fmt.Errorf("walk %s: %w", s.abs(e.RelPath), err)
	case !fi.Mode().IsRegular():
		e.Kind = EntryStray
		e.Problem = "a " + kindOf(fi.Mode()) + " where a blob should be"
	}
	e.Size, e.ModTime = fi.Size(), fi.ModTime()
	return e, nil
}

func (s *Store) walk(ctx context.Context, lazy bool, fn func(Entry) error) error {
	top, err := s.fs.ReadDir(BlobsDir)
	if err != nil {
		return fmt.Errorf("walk %s: %w", s.abs(BlobsDir), err)
	}
	// The shards in the order of their names, so that a caller reading
	// something per shard can read the next one ahead.
	slices.SortFunc(top, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, de := range top {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := de.Name()
		rel := BlobsDir + "/" + name
		if isShardName(name) && de.IsDir() {
			if err := s.walkShard(ctx, name, lazy, fn); err != nil {
				return err
			}
			continue
		}
		e, err := s.entry(rel, de, false)
		if err != nil {
			return err
		}
		if isShardName(name) && !e.Vanished {
			e.Kind = EntryStray
			e.BadShard = true
			e.Problem = "a " + kindOf(de.Type()) + " where a shard directory should be"
			if err := fn(e); err != nil {
				return err
			}
			continue
		}
		if e.Kind == EntryBlob || e.Kind == EntryStray {
			e.Kind = EntryStray
			if e.Problem == "" {
				e.Problem = "not in a shard directory"
			}
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) walkShard(ctx context.Context, shard string, lazy bool, fn func(Entry) error) error {
	dir := BlobsDir + "/" + shard
	list := s.fs.ReadDir
	if lazy {
		list = func(dir string) ([]fs.DirEntry, error) { return readDirLazy(s.fs, dir) }
	}
	entries, err := list(dir)
	if err != nil {
		return fmt.Errorf("walk %s: %w", s.abs(dir), err)
	}
	for _, de := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		e, err := s.entry(dir+"/"+de.Name(), de, lazy)
		if err != nil {
			return err
		}
		if e.Kind == EntryBlob && e.Blob.Shard() != shard {
			// A stray gets its size and time, as Walk gives them.
			if e, err = s.Info(e); err != nil {
				return err
			}
		}
		if e.Kind == EntryBlob && e.Blob.Shard() != shard {
			e.Kind = EntryStray
			e.Problem = "blob name in shard " + shard + ", want " + e.Blob.Shard()
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// entry classifies one directory entry. A name that vanished since the
// listing is reported as a stray with that problem rather than failing the
// walk, since concurrent writers and gc rename and remove files all the time.
// With lazy, a regular file (by the listing's type) with a blob's name is
// an EntryBlob, Lazy, without a look at the file.
func (s *Store) entry(rel string, de fs.DirEntry, lazy bool) (Entry, error) {
	name := de.Name()
	e := Entry{RelPath: rel}
	if lazy && de.Type().IsRegular() && !isTempName(name) {
		if b, err := ParseBlobName(name); err == nil {
			e.Kind, e.Blob, e.Lazy = EntryBlob, b, true
			return e, nil
		}
	}
	fi, err := de.Info()
	if errors.Is(err, fs.ErrNotExist) {
		e.Kind = EntryStray
		e.Vanished = true
		e.Problem = "vanished during the walk"
		return e, nil
	}
	if err != nil {
		return e, fmt.Errorf("walk %s: %w", s.abs(rel), err)
	}
	e.Size = fi.Size()
	e.ModTime = fi.ModTime()
	if isTempName(name) {
		e.Kind = EntryTemp
		if !fi.Mode().IsRegular() {
			e.Kind = EntryStray
			e.Problem = "a " + kindOf(fi.Mode()) + " with a temp file's name"
		}
		return e, nil
	}
	b, perr := ParseBlobName(name)
	switch {
	case perr != nil:
		e.Kind = EntryStray
		e.Problem = "not a blob name"
		if !fi.Mode().IsRegular() {
			e.Problem = "a " + kindOf(fi.Mode()) + ", not a blob"
		}
	case !fi.Mode().IsRegular():
		e.Kind = EntryStray
		e.Blob = b
		e.Problem = "a " + kindOf(fi.Mode()) + " where a blob should be"
	default:
		e.Kind = EntryBlob
		e.Blob = b
	}
	return e, nil
}
