package cas

import (
	"context"
	"errors"
	"fmt"
)

// Pending is content written to a temp file in its blob's shard, neither
// synced nor named yet: the first half of a put, for a writer that makes
// the bytes and names of several puts durable with one barrier (see
// Barrier). Commit finishes it as PutHashedNameUnsynced would;
// CommitUnsynced only names it; CommitThenSync names it and returns the
// sync of bytes and name together. A Pending is for one goroutine; its
// temp file is removed unless it is committed.
type Pending struct {
	s   *Store
	res PutResult
	tmp string
	f   file
	id  *fileID
	// aw is the blob's entry among those awaiting a barrier, once
	// CommitUnsynced named it.
	aw *awaited
}

// WriteHashed writes content hashed already to a temp file, or finds it
// stored already (Existed, as with PutHashed: nothing is written then, and
// the Pending needs no commit). It leaves the temp pool's filling to its
// caller (see RefillTempPool).
func (s *Store) WriteHashed(ctx context.Context, h Hashed) (*Pending, error) {
	if err := CheckExt(h.blob.Ext); err != nil {
		return nil, fmt.Errorf("put: %w", err)
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
		if err := s.syncShard(b); err != nil {
			return fmt.Errorf("sync %s: %w", s.abs(shard), err)
		}
		s.rememberSynced(b, id)
		return nil
	}, nil
}

// CommitThenSync renames the content into place at once, and returns
// sync, which makes its bytes and its name durable with one wait: the
// file's datasync and its shard directory's sync issued together, where
// Commit syncs the bytes first and the name after (nil when there is
// nothing to sync). Until sync has returned, a power cut may leave the
// name without the bytes, as with CommitUnsynced. sync must be called,
// once: it closes the file.
func (p *Pending) CommitThenSync() (sync func() error, err error) {
	if p.f == nil {
		return nil, nil
	}
	s, b, f := p.s, p.res.Blob, p.f
	p.f = nil
	if s.durability != SyncFull {
		return nil, s.renameSync(p.tmp, f, b, false)
	}
	var id *fileID
	if fid, ok := identify(f); ok {
		id = &fid
	}
	if err := s.renameInto(p.tmp, b, false); err != nil {
		f.Close()
		return nil, err
	}
	shard := BlobsDir + "/" + b.Shard()
	return func() error {
		s.syncs.Add(2)
		bytesSynced := make(chan error, 1)
		go func() { bytesSynced <- datasync(f) }()
		dirErr := s.syncShard(b)
		err := <-bytesSynced
		if err != nil {
			// Named before its bytes were synced: the name may now hold
			// damaged bytes that the page cache still serves whole.
			fi, _ := f.Stat()
			s.dropDamaged(b, fi)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return s.writeError(b, err)
		}
		if dirErr != nil {
			return fmt.Errorf("sync %s: %w", s.abs(shard), dirErr)
		}
		s.rememberSynced(b, id)
		return nil
	}, nil
}

// CommitUnsynced renames the content into place without a sync: neither
// its bytes nor its name are durable until a barrier (see Barrier) begun
// after it has ended, and NameSynced then says so. Until then a power cut
// may leave the name without the bytes: a writer that commits a row for
// such a blob before the barrier must be able to check the blob after an
// unclean shutdown. In a durable store with a barrier, the file stays open
// until a barrier checks its write-back through it (see checkAwaited); a
// writer whose barrier failed says so with Expire.
func (p *Pending) CommitUnsynced() error {
	if p.f == nil {
		return nil
	}
	s, b, f := p.s, p.res.Blob, p.f
	p.f = nil
	if fid, ok := identify(f); ok {
		p.id = &fid
	}
	if !s.CanBarrier() {
		return s.renameSync(p.tmp, f, b, false)
	}
	if err := s.renameInto(p.tmp, b, false); err != nil {
		f.Close()
		return err
	}
	p.aw = s.awaiting.add(b, f)
	return nil
}

// NameSynced records that a barrier begun after CommitUnsynced has ended,
// and reported no error, so that a put finding the blob again costs no
// sync (see syncPresent).
func (p *Pending) NameSynced() {
	if p.aw != nil {
		aw := p.aw
		p.s.awaiting.drop(func(w *awaited) bool { return w != aw })
	}
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

// BarrierCheap reports whether Barrier may be taken now without waiting long
// for what other writers left unwritten: CanBarrier, and the machine held
// at most BarrierUnwrittenMax bytes written and not yet on disk when last
// looked at (at most barrierGaugeAge ago). Where it is not, a sync of each
// file costs the files' own bytes only.
func (s *Store) BarrierCheap() bool {
	return s.CanBarrier() && s.gauge.cheapNow()
}

// Barrier makes everything written to the file system that holds the store
// durable, whoever wrote it, with one call (syncfs(2)): the bytes and names
// of any number of blobs, and the index's log beside them. It flushes the
// other files of that file system too, so that it costs as much as they
// hold unwritten; it is counted in Syncs.
//
// Barrier also checks, through its own descriptor, the write-back of each
// blob named by CommitUnsynced before it began (see checkAwaited): one
// that failed, which the barrier itself may not report, fails it, and
// every later barrier too until its writer calls Expire.
func (s *Store) Barrier() error {
	s.syncs.Add(1)
	all, check := s.awaiting.begin()
	err := s.fs.SyncFS()
	if err != nil {
		err = fmt.Errorf("sync the file system of %s: %w", s.dir, err)
	}
	return errors.Join(err, s.checkAwaited(all, check))
}
