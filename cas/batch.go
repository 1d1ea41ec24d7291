package cas

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// An Item is one blob's content in a batch put.
type Item struct {
	Data []byte
	Ext  string
}

// PutBatch stores many blobs and pays for durability once per batch rather
// than once per blob, as git's core.fsyncMethod=batch does: every new blob is
// written to a temp file in its shard without a sync, one file-system barrier
// makes all of them durable, they are renamed to their final names, and a
// second barrier makes the renames durable. No blob appears under its final
// name before its bytes are durable, exactly as with Put. Items with the same
// content and extension are written once; the later ones report Existed.
//
// On error, no temp file is left behind; blobs already renamed stay (they
// are whole and durable content that nothing references yet).
func (s *Store) PutBatch(ctx context.Context, items []Item) ([]PutResult, error) {
	for i, it := range items {
		if err := CheckExt(it.Ext); err != nil {
			return nil, fmt.Errorf("cas: put batch item %d: %w", i, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type pending struct {
		tmp  string
		blob Blob
	}
	var (
		results = make([]PutResult, len(items))
		seen    = make(map[Blob]bool, len(items))
		todo    []pending
	)
	cleanup := func() {
		for _, p := range todo {
			s.fs.Remove(p.tmp)
		}
	}
	for i, it := range items {
		b := Blob{Digest: Sum(it.Data), Ext: it.Ext}
		results[i] = PutResult{Blob: b, Size: int64(len(it.Data))}
		if seen[b] {
			results[i].Existed = true
			continue
		}
		seen[b] = true
		if s.presentBytes(b, it.Data) {
			results[i].Existed = true
			continue
		}
		if err := ctx.Err(); err != nil {
			cleanup()
			return nil, err
		}
		tmp, f, err := s.createTemp(b.Shard())
		if err != nil {
			cleanup()
			return nil, err
		}
		if _, err := f.Write(it.Data); err != nil {
			s.discard(tmp, f)
			cleanup()
			return nil, s.writeError(b, err)
		}
		if err := f.Close(); err != nil {
			s.fs.Remove(tmp)
			cleanup()
			return nil, s.writeError(b, err)
		}
		todo = append(todo, pending{tmp, b})
	}
	if len(todo) == 0 {
		return results, nil
	}
	if s.durability == SyncFull {
		if err := s.barrier(func() error {
			for _, p := range todo {
				if err := s.syncFile(p.tmp); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			cleanup()
			return nil, s.writeError(Blob{}, err)
		}
	}
	for i, p := range todo {
		if err := s.fs.Rename(p.tmp, p.blob.RelPath()); err != nil {
			todo = todo[i:]
			cleanup()
			return nil, fmt.Errorf("cas: rename into %s: %w", s.abs(p.blob.RelPath()), err)
		}
	}
	if s.durability == SyncFull {
		if err := s.barrier(func() error {
			done := make(map[string]bool)
			for _, p := range todo {
				if sh := p.blob.Shard(); !done[sh] {
					done[sh] = true
					s.syncs.Add(1)
					if err := s.fs.SyncDir(BlobsDir + "/" + sh); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("cas: sync shard directories: %w", err)
		}
	}
	return results, nil
}

// barrier flushes the whole file system in one call; where the platform has
// no such call, it runs fallback, which syncs each file or directory.
func (s *Store) barrier(fallback func() error) error {
	err := s.fs.SyncFS()
	if errors.Is(err, errSyncFSUnsupported) {
		return fallback()
	}
	s.syncs.Add(1)
	return err
}

func (s *Store) syncFile(name string) error {
	f, err := s.fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	s.syncs.Add(1)
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
