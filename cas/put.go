package cas

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"
)

// memLimit is the largest content a put holds in memory: such content is
// hashed before anything is written, so a dedup hit writes nothing. Larger
// content is hashed while it streams to a temp file.
const memLimit = 1 << 20

// chunkSize is the unit of streaming reads and writes.
const chunkSize = 256 << 10

var bufPool = sync.Pool{New: func() any {
	b := make([]byte, memLimit+1)
	return &b
}}

// PutResult says what a put stored.
type PutResult struct {
	Blob Blob
	Size int64
	// Existed reports that identical content was already stored under the
	// blob's name (or earlier in the same batch): nothing was written, and
	// the file's modification time was refreshed for gc's grace period.
	Existed bool
}

// Put stores the bytes read from r as a blob with extension ext and returns
// its name. Memory stays bounded whatever the size of r. When Put returns
// without error the blob is durable (in SyncFull mode) and reads back exactly
// r's bytes. A file left at the final name with other content, by a crash or
// a corruption, is replaced atomically.
func (s *Store) Put(ctx context.Context, r io.Reader, ext string) (PutResult, error) {
	if err := CheckExt(ext); err != nil {
		return PutResult{}, fmt.Errorf("put: %w", err)
	}
	return s.PutWith(ctx, r, func() (string, error) { return ext, nil })
}

// PutWith is Put for content whose type is known only once it has all been
// read: extFor is called after the last byte is read (and before anything
// is renamed into place), typically to look at what a wrapping reader saw.
func (s *Store) PutWith(ctx context.Context, r io.Reader, extFor func() (string, error)) (PutResult, error) {
	st, err := s.Stage(ctx, r, extFor)
	if err != nil {
		return PutResult{}, err
	}
	return st.Commit(ctx)
}

// Staged is content read to its end and made durable, but not yet a blob:
// small content is held in memory, larger content in a temp file that the
// store keeps locked, so that gc leaves it alone however long the content
// took to arrive. Commit makes it the blob; Discard drops it. A Staged is
// for one goroutine.
type Staged struct {
	s      *Store
	blob   Blob
	size   int64
	data   []byte // small content; nil when it is in tmp
	tmp    string
	f      file
	synced bool
	done   bool
}

// Stage reads r to its end without making a blob of it yet: the slow part of
// a streamed put, which holds no lock of the store's. The content's bytes
// are durable (in SyncFull mode) when Stage returns.
func (s *Store) Stage(ctx context.Context, r io.Reader, extFor func() (string, error)) (*Staged, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	n, err := io.ReadFull(r, buf)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		ext, err := extOf(extFor)
		if err != nil {
			return nil, err
		}
		data := append([]byte(nil), buf[:n]...)
		return &Staged{s: s, blob: Blob{Digest: Sum(data), Ext: ext}, size: int64(n), data: data}, nil
	case err != nil:
		return nil, fmt.Errorf("put: read content: %w", err)
	}
	return s.stageStream(ctx, buf, r, extFor)
}

// Blob returns the name the content will have.
func (st *Staged) Blob() Blob { return st.blob }

// Size returns the content's size in bytes.
func (st *Staged) Size() int64 { return st.size }

// Commit makes the staged content the blob, or finds it already stored, as
// Put does. It may be called once.
func (st *Staged) Commit(ctx context.Context) (PutResult, error) {
	if st.done {
		return PutResult{}, errors.New("put: staged content committed or discarded already")
	}
	st.done = true
	if st.data != nil || st.f == nil {
		return st.s.putBytes(ctx, st.data, st.blob.Ext)
	}
	s, b := st.s, st.blob
	res := PutResult{Blob: b, Size: st.size}
	hit, err := s.presentStream(ctx, b, st.size)
	if err != nil {
		s.discard(st.tmp, st.f)
		return res, err
	}
	if hit {
		s.discard(st.tmp, st.f)
		res.Existed = true
		return res, nil
	}
	if !st.synced && s.durability == SyncFull {
		s.syncs.Add(1)
		if err := st.f.Sync(); err != nil {
			s.discard(st.tmp, st.f)
			return res, s.writeError(b, err)
		}
	}
	if err := s.rename(st.tmp, st.f, b); err != nil {
		return res, err
	}
	return res, nil
}

// Discard drops staged content that will not be committed.
func (st *Staged) Discard() {
	if st.done {
		return
	}
	st.done = true
	if st.f != nil {
		st.s.discard(st.tmp, st.f)
	}
}

func extOf(extFor func() (string, error)) (string, error) {
	ext, err := extFor()
	if err != nil {
		return "", fmt.Errorf("put: %w", err)
	}
	if err := CheckExt(ext); err != nil {
		return "", fmt.Errorf("put: %w", err)
	}
	return ext, nil
}

// PutBytes stores b as a blob with extension ext, as Put does.
func (s *Store) PutBytes(ctx context.Context, b []byte, ext string) (PutResult, error) {
	return s.PutHashed(ctx, Hash(b, ext))
}

// PutHashed is PutBytes for content hashed already (see Hashed).
func (s *Store) PutHashed(ctx context.Context, h Hashed) (PutResult, error) {
	if err := CheckExt(h.blob.Ext); err != nil {
		return PutResult{}, fmt.Errorf("put: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return PutResult{}, err
	}
	res, _, err := s.putBytesSync(h, true)
	s.RefillTempPool()
	return res, err
}

// Hashed is content with the blob it is, hashed once by Hash: a writer
// that needs the blob's name before its put (to name it in the index
// meanwhile) hands the same value to PutHashed or PutHashedNameUnsynced,
// which do not hash it again.
type Hashed struct {
	data []byte
	blob Blob
}

// Hash hashes data, the content of a blob with extension ext.
func Hash(data []byte, ext string) Hashed {
	return Hashed{data: data, blob: Blob{Digest: Sum(data), Ext: ext}}
}

// Blob returns the blob the content is.
func (h Hashed) Blob() Blob { return h.blob }

// putBytesNameUnsynced is PutBytes for a writer that overlaps the last
// barrier with work of its own: a new blob's bytes are durable and it is
// visible under its name when it returns, but its shard directory is not
// yet synced, so a power cut may still lose the name. syncName syncs it;
// the blob is durable once syncName returns nil. syncName is nil when
// there is nothing to sync (a dedup hit, or durability off).
func (s *Store) putBytesNameUnsynced(ctx context.Context, b []byte, ext string) (res PutResult, syncName func() error, err error) {
	return s.PutHashedNameUnsynced(ctx, Hash(b, ext))
}

// PutHashedNameUnsynced is putBytesNameUnsynced for content hashed already.
// It leaves the temp pool's filling to its caller (see RefillTempPool).
func (s *Store) PutHashedNameUnsynced(ctx context.Context, h Hashed) (res PutResult, syncName func() error, err error) {
	p, err := s.WriteHashed(ctx, h)
	if err != nil {
		return PutResult{}, nil, err
	}
	syncName, err = p.Commit()
	return p.Result(), syncName, err
}

func (s *Store) putBytes(_ context.Context, data []byte, ext string) (PutResult, error) {
	res, _, err := s.putBytesSync(Hash(data, ext), true)
	s.RefillTempPool()
	return res, err
}

// putBytesSync is putBytes, syncing the shard directory after the rename
// only when syncName is set. A new blob's file, durable, is returned as id
// (see rememberSynced).
func (s *Store) putBytesSync(h Hashed, syncName bool) (PutResult, *fileID, error) {
	if s.durability == SyncNone {
		if res, done, err := s.putInPlace(h); done {
			return res, nil, err
		}
	}
	p, err := s.writePending(h)
	if err != nil {
		return PutResult{Blob: h.blob, Size: int64(len(h.data))}, nil, err
	}
	if p.f == nil {
		return p.res, nil, nil
	}
	id, err := s.commitSync(p.tmp, p.f, p.res.Blob, syncName)
	return p.res, id, err
}

// putInPlace writes a new blob straight under its name, when no crash
// guarantee is owed (SyncNone): one file made with O_EXCL, written and
// closed, where a put through a temp file makes two names (the temp file's
// and the blob's). The file is locked while it is written (see lockTemp),
// so that verify tells a blob being written from a torn one (see
// BeingWritten). A crash may leave a torn blob under its name: it fails
// its digest on every read and in verify, and the next put of the same
// content, finding other bytes there, replaces it through a temp file.
//
// done is false when the name is taken: the caller then puts as usual
// (writePending), which checks what the file holds, refreshes its time
// on a hit, and replaces it when it holds other bytes.
func (s *Store) putInPlace(h Hashed) (res PutResult, done bool, err error) {
	b := h.blob
	res = PutResult{Blob: b, Size: int64(len(h.data))}
	name := b.RelPath()
	f, err := s.fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	// Packing removes empty shard directories while writers run: make it
	// again, as createTemp does.
	for try := 0; try < shardRetries && errors.Is(err, fs.ErrNotExist); try++ {
		if err = s.remakeShard(b.Shard()); err == nil {
			f, err = s.fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
		}
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		return res, false, nil
	case err != nil:
		return res, true, s.writeError(b, err)
	}
	if err := lockTemp(f); err != nil {
		f.Close()
		s.fs.Remove(name)
		return res, true, fmt.Errorf("lock %s: %w", s.abs(name), err)
	}
	_, err = f.Write(h.data)
	if err != nil {
		// Nothing names the blob yet: a torn file would only cost the
		// next put of it a replacement, but a full disk wants the space.
		// Unless another put, finding it torn, has replaced it whole.
		if mine, serr := f.Stat(); serr == nil {
			if now, serr := s.fs.Lstat(name); serr == nil && os.SameFile(mine, now) {
				s.fs.Remove(name)
			}
		}
		f.Close()
		return res, true, s.writeError(b, err)
	}
	if err := f.Close(); err != nil {
		return res, true, s.writeError(b, err)
	}
	return res, true, nil
}

// BeingWritten reports whether b's loose file is being written now by a
// put in place (see putInPlace), in this process or another: a blob whose
// bytes do not match its name yet, not a torn one.
func (s *Store) BeingWritten(b Blob) bool {
	f, err := s.fs.OpenFile(b.RelPath(), os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return errors.Is(tryLockTemp(f), ErrTempInUse)
}

// stageStream writes head followed by the rest of r to a temp file. The
// digest, and so the shard, is known only after the last byte, so the temp
// file is made in blobs/ and renamed into its shard on commit: one atomic
// rename on one file system.
func (s *Store) stageStream(ctx context.Context, head []byte, r io.Reader, extFor func() (string, error)) (*Staged, error) {
	tmp, f, err := s.createTempIn(BlobsDir)
	if err != nil {
		return nil, err
	}
	h := NewHash()
	var size int64
	chunk := head
	for {
		if err := ctx.Err(); err != nil {
			s.discard(tmp, f)
			return nil, err
		}
		h.Write(chunk)
		if _, err := f.Write(chunk); err != nil {
			s.discard(tmp, f)
			return nil, s.writeError(Blob{}, err)
		}
		size += int64(len(chunk))
		n, rerr := io.ReadFull(r, head[:chunkSize])
		chunk = head[:n]
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			h.Write(chunk)
			if _, err := f.Write(chunk); err != nil {
				s.discard(tmp, f)
				return nil, s.writeError(Blob{}, err)
			}
			size += int64(n)
			break
		}
		if rerr != nil {
			s.discard(tmp, f)
			return nil, fmt.Errorf("put: read content: %w", rerr)
		}
	}
	var d Digest
	h.Sum(d[:0])
	ext, err := extOf(extFor)
	if err != nil {
		s.discard(tmp, f)
		return nil, err
	}
	b := Blob{Digest: d, Ext: ext}
	st := &Staged{s: s, blob: b, size: size, tmp: tmp, f: f}
	// Made durable now, so that Commit, under the store's lock, only
	// renames; unless the blob looks stored already, when Commit will most
	// likely find a dedup hit and the sync would be wasted.
	if fi, err := s.fs.Lstat(b.RelPath()); s.durability == SyncFull && (err != nil || !fi.Mode().IsRegular() || fi.Size() != size) {
		s.syncs.Add(1)
		if err := f.Sync(); err != nil {
			s.discard(tmp, f)
			return nil, s.writeError(b, err)
		}
		st.synced = true
	}
	return st, nil
}

// createTemp creates a temp file in a shard directory, recreating the
// directory if something removed it.
func (s *Store) createTemp(shard string) (string, file, error) {
	dir := BlobsDir + "/" + shard
	tmp, f, err := s.createTempIn(dir)
	// Packing removes empty shard directories (RemoveEmptyShards) while
	// writers run, and may remove one again just after a writer made it
	// anew: make it again, a few times, before giving up.
	for try := 0; try < shardRetries && errors.Is(err, fs.ErrNotExist); try++ {
		if err := s.remakeShard(shard); err != nil {
			return "", nil, err
		}
		tmp, f, err = s.createTempIn(dir)
	}
	return tmp, f, err
}

// shardRetries is how many times a write makes its shard directory again
// when it finds it gone.
const shardRetries = 5

func (s *Store) createTempIn(dir string) (string, file, error) {
	for range 10 {
		tmp := dir + "/" + tempPrefix + randomSuffix()
		// Blob files are read-only: nothing may change a blob in place.
		f, err := s.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			if isDiskFull(err) {
				return "", nil, fmt.Errorf("create temp file in %s: %w: %w", s.abs(dir), ErrDiskFull, err)
			}
			return "", nil, fmt.Errorf("create temp file in %s: %w", s.abs(dir), err)
		}
		// gc removes a temp file only while it holds its lock: a file gc
		// removed between its creation and this lock is made anew.
		if err := lockTemp(f); err != nil {
			s.discard(tmp, f)
			return "", nil, fmt.Errorf("lock temp file %s: %w", s.abs(tmp), err)
		}
		if unlinked(f) {
			f.Close()
			continue
		}
		return tmp, f, nil
	}
	return "", nil, fmt.Errorf("create temp file in %s: too many name collisions", s.abs(dir))
}

func randomSuffix() string {
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return hex.EncodeToString(b[:])
}

// commitSync makes a written temp file the blob: sync, close, rename to the
// final name, and sync the shard directory when syncName is set. Until the
// rename the blob is invisible; the rename happens only once its bytes are
// durable. Durable, it returns which file the blob is, where that can be
// told (see identify); with syncName, the store then remembers it synced.
func (s *Store) commitSync(tmp string, f file, b Blob, syncName bool) (*fileID, error) {
	var id *fileID
	if s.durability == SyncFull {
		s.syncs.Add(1)
		if err := f.Sync(); err != nil {
			s.discard(tmp, f)
			return nil, s.writeError(b, err)
		}
		if fid, ok := identify(f); ok {
			id = &fid
		}
	}
	if err := s.renameSync(tmp, f, b, syncName); err != nil {
		return nil, err
	}
	if syncName {
		s.rememberSynced(b, id)
	}
	return id, nil
}

// rememberSynced remembers that the file id, at b's name, has had its bytes
// and its name synced by this Store (see syncPresent). A nil id, a file
// that cannot be told from one made later at its inode, is not kept.
func (s *Store) rememberSynced(b Blob, id *fileID) {
	if id != nil {
		s.synced.add(b, *id, s.now())
	}
}

// rename is commit once the temp file's bytes are durable.
func (s *Store) rename(tmp string, f file, b Blob) error {
	return s.renameSync(tmp, f, b, true)
}

// renameSync is rename, syncing the shard directory only when syncName is
// set.
func (s *Store) renameSync(tmp string, f file, b Blob, syncName bool) error {
	if err := f.Close(); err != nil {
		s.fs.Remove(tmp)
		return s.writeError(b, err)
	}
	return s.renameInto(tmp, b, syncName)
}

// renameInto renames the temp file tmp to b's name, and syncs the shard
// directory when syncName is set; tmp is removed if the rename fails.
func (s *Store) renameInto(tmp string, b Blob, syncName bool) error {
	err := s.fs.Rename(tmp, b.RelPath())
	// A streamed blob's temp file is in blobs/ and its shard is made on
	// first use, or again when packing removed it since (see createTemp).
	for try := 0; try < shardRetries && errors.Is(err, fs.ErrNotExist) && path.Dir(tmp) == BlobsDir; try++ {
		if err = s.remakeShard(b.Shard()); err == nil {
			err = s.fs.Rename(tmp, b.RelPath())
		}
	}
	if err != nil {
		s.fs.Remove(tmp)
		return fmt.Errorf("rename into %s: %w", s.abs(b.RelPath()), err)
	}
	if s.durability == SyncFull && syncName {
		s.syncs.Add(1)
		if err := s.syncShard(b); err != nil {
			return fmt.Errorf("sync %s: %w", s.abs(BlobsDir+"/"+b.Shard()), err)
		}
	}
	return nil
}

// syncShard syncs the directory that names b. A directory that is not
// there any more has no name of b's to make durable: it went with a pack
// that holds b (a pack is durable before a loose file goes, and packing
// removes the shard directories it empties), which is no failure of the
// write that made b. Anywhere else b has gone, the error stays.
func (s *Store) syncShard(b Blob) error { return s.syncShardOf(b.Shard(), []Blob{b}) }

// syncShardOf is syncShard for the blobs bs, all of shard.
func (s *Store) syncShardOf(shard string, bs []Blob) error {
	err := s.fs.SyncDir(BlobsDir + "/" + shard)
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, b := range bs {
		if _, perr := s.statPacked(context.Background(), b); perr != nil {
			return err
		}
	}
	return nil
}

// discard closes and removes a temp file after a failed or unneeded write.
func (s *Store) discard(tmp string, f file) {
	f.Close()
	s.fs.Remove(tmp)
}

func (s *Store) writeError(b Blob, err error) error {
	name := "blob"
	if !b.Digest.IsZero() {
		name = b.FileName()
	}
	if isDiskFull(err) {
		return fmt.Errorf("write %s: %w: %w", name, ErrDiskFull, err)
	}
	return fmt.Errorf("write %s: %w", name, err)
}

func (s *Store) abs(rel string) string {
	return filepath.Join(s.dir, filepath.FromSlash(rel))
}

// presentBytes reports whether the blob's file holds exactly data. When it
// does, its modification time is refreshed so that gc's grace period counts
// from this put. A file with other content is not present: the put replaces it.
//
// A miss, the usual case for new content, costs one lookup: should the
// shard directory have been removed and made anew meanwhile, the blob is
// written again, to the same name, with the same bytes.
func (s *Store) presentBytes(b Blob, data []byte) bool {
	fi, err := s.fs.Peek(b.RelPath())
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(data)) {
		return false
	}
	f, err := s.fs.OpenFile(b.RelPath(), os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	same := sameContent(f, data) && s.syncPresent(f, b) == nil
	f.Close()
	return same && s.touch(b)
}

// settleTime is the age past which a blob's name and bytes are taken as on
// disk whoever wrote them: see syncPresent.
const settleTime = time.Minute

// syncPresent makes a blob found already stored durable before a put
// reports it, when the store is durable and the blob is young: another
// process may have renamed it into place a moment ago and not yet synced
// its shard directory (or been killed before it could), and a row this
// put's caller commits must never outlive the blob's name in a power cut.
// A blob born more than settleTime ago is taken as on disk: its writer
// synced it, or the file system's own periodic commit (every 5 s on ext4,
// up to 30 s on XFS and btrfs) has written it since, so hits on older
// blobs cost no sync (a pooled temp file waits at most maxPooledAge
// before it is renamed, which leaves 50 s of that). Nor do hits on a file
// this Store synced itself, bytes and then name (see rememberSynced): the
// same file, told by its inode and birth time, so not one that gc removed
// and another writer made anew since. The
// file's sync is a datasync, so that the modification time each hit sets
// (touch) does not make the next hit wait for the disk.
func (s *Store) syncPresent(f file, b Blob) error {
	if s.durability != SyncFull {
		return nil
	}
	id, known := identify(f)
	if known && (s.now().Sub(id.born) > settleTime || s.synced.has(b, id)) {
		return nil
	}
	s.syncs.Add(2)
	if err := datasync(f); err != nil {
		return err
	}
	if err := s.syncShard(b); err != nil {
		return err
	}
	if known {
		s.synced.add(b, id, s.now())
	}
	return nil
}

// presentStream is presentBytes for content already streamed to a temp file:
// the existing file must have the size and hash to the digest.
func (s *Store) presentStream(ctx context.Context, b Blob, size int64) (bool, error) {
	fi, err := s.fs.Lstat(b.RelPath())
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != size {
		return false, nil
	}
	if err := s.Verify(ctx, b); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, nil
	}
	f, err := s.fs.OpenFile(b.RelPath(), os.O_RDONLY, 0)
	if err != nil {
		return false, nil
	}
	err = s.syncPresent(f, b)
	f.Close()
	return err == nil && s.touch(b), nil
}

// Expire sets a blob's modification time far in the past, so that gc
// takes it as old whatever its grace period: a writer whose index row
// failed marks so the blob it wrote. A missing blob is no error.
func (s *Store) Expire(b Blob) error {
	if err := CheckExt(b.Ext); err != nil {
		return fmt.Errorf("expire: %w", err)
	}
	// A writer that named the blob without a sync has learnt how its
	// barrier went.
	s.awaiting.drop(func(w *awaited) bool { return w.blob != b })
	old := time.Unix(1, 0)
	if err := s.fs.Chtimes(b.RelPath(), old, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("expire %s: %w", b.FileName(), err)
	}
	return nil
}

// touch refreshes a blob's modification time; it fails only when the file
// vanished, and then the blob is not present.
func (s *Store) touch(b Blob) bool {
	now := s.now()
	return s.fs.Chtimes(b.RelPath(), now, now) == nil
}

func sameContent(r io.Reader, want []byte) bool {
	var buf [32 << 10]byte
	for {
		n, err := io.ReadFull(r, buf[:])
		if n > len(want) || !bytes.Equal(buf[:n], want[:n]) {
			return false
		}
		want = want[n:]
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return len(want) == 0
		}
		if err != nil {
			return false
		}
	}
}
