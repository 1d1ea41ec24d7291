package cas

import (
	"context"
	"fmt"
)

// Pending is content written to a temp file in its blob's shard, neither
// synced nor named yet: the first half of a put, for a writer that makes
// the bytes of several puts durable with one barrier (see Barrier) before
// naming them. Commit finishes it as PutHashedNameUnsynced would;
// CommitSynced, once a barrier begun after the write has ended, only names
// it. A Pending is for one goroutine; its temp file is removed unless it
// is committed.
type Pending struct {
	s   *Store
	res PutResult
	tmp string
	f   file
	id  *fileID
}

// WriteHashed writes content hashed already to a temp file, or finds it
// stored already (Existed, as with PutHashed: nothing is written then, and
// the Pending needs no commit). It leaves the temp pool's filling to its
// caller (see RefillTempPool).
func (s *Store) WriteHashed(ctx context.Context, h Hashed) (*Pending, error) {
	if err := CheckExt(h.blob.Ext); err != nil {
		return nil, fmt.Errorf("cas: put: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.writePending(h)
}

func (s *Store) writePending(h Hashed) (*Pending, error) {
	data, b := h.data, h.blob
	p := &Pending{s: s, res: PutResult{Blob: b, Size: int64(len(data))}}
	if s.presentBytes(b, data) {
		p.res.Existed = true
		return p, nil
	}
	tmp, f, ok := s.takeTemp()
	if !ok {
		var err error
		if tmp, f, err = s.createTemp(b.Shard()); err != nil {
			return nil, err
		}
	}
	if _, err := f.Write(data); err != nil {
		s.discard(tmp, f)
		return nil, s.writeError(b, err)
	}
	p.tmp, p.f = tmp, f
	return p, nil
}

// Result says what the put stores.
func (p *Pending) Result() PutResult { return p.res }

// Commit makes the content the blob, as PutHashedNameUnsynced does: its
// bytes are synced, and it is renamed into place; syncName syncs its name
// (nil when there is nothing to sync).
func (p *Pending) Commit() (syncName func() error, err error) {
	if p.f == nil {
		return nil, nil
	}
	s, b := p.s, p.res.Blob
	id, err := s.commitSync(p.tmp, p.f, b, false)
	p.f = nil
	if err != nil || s.durability != SyncFull {
		return nil, err
	}
	shard := BlobsDir + "/" + b.Shard()
	return func() error {
		s.syncs.Add(1)
		if err := s.fs.SyncDir(shard); err != nil {
			return fmt.Errorf("cas: sync %s: %w", s.abs(shard), err)
		}
		s.rememberSynced(b, id)
		return nil
	}, nil
}

// CommitSynced renames the content into place, its bytes made durable by a
// barrier (see Barrier) begun after WriteHashed returned; its name is not
// synced. Once a barrier begun after CommitSynced has ended, the blob is
// durable, and NameSynced says so.
func (p *Pending) CommitSynced() error {
	if p.f == nil {
		return nil
	}
	s, b := p.s, p.res.Blob
	if fid, ok := identify(p.f); ok {
		p.id = &fid
	}
	err := s.renameSync(p.tmp, p.f, b, false)
	p.f = nil
	return err
}

// NameSynced records that a barrier begun after CommitSynced has ended, so
// that a put finding the blob again costs no sync (see syncPresent).
func (p *Pending) NameSynced() {
	if !p.res.Existed {
		p.s.rememberSynced(p.res.Blob, p.id)
	}
}

// Discard removes the temp file of content not committed.
func (p *Pending) Discard() {
	if p.f != nil {
		p.s.discard(p.tmp, p.f)
		p.f = nil
	}
}

// CanBarrier reports whether Barrier makes everything written durable with
// one call: on Linux, in a durable store.
func (s *Store) CanBarrier() bool {
	return s.durability == SyncFull && haveSyncFS
}

// Barrier makes everything written to the file system that holds the store
// durable, whoever wrote it, with one call (syncfs(2)): the bytes and names
// of any number of blobs, and the index's log beside them. It flushes the
// other files of that file system too, so that it costs as much as they
// hold unwritten; it is counted in Syncs.
func (s *Store) Barrier() error {
	s.syncs.Add(1)
	if err := s.fs.SyncFS(); err != nil {
		return fmt.Errorf("cas: sync the file system of %s: %w", s.dir, err)
	}
	return nil
}
