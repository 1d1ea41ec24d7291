package cas

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/toolcas/toolcas/internal/cancel"
)

// ErrPackCorrupt is returned, wrapped, for a pack file whose bytes do not
// hash to its name or whose table of contents does not parse.
var ErrPackCorrupt = errors.New("pack corrupt")

// PackInfo describes a pack file.
type PackInfo struct {
	Name    string // pack-<digest>.zst
	Digest  Digest
	Size    int64 // bytes on disk
	ModTime time.Time
	// Entries lists the blobs the pack holds, sorted by file name.
	Entries []PackEntry
	// Raw is the sum of the sizes of the blobs it holds.
	Raw int64
}

// Blobs returns the blobs the pack holds.
func (i PackInfo) Blobs() []Blob {
	out := make([]Blob, len(i.Entries))
	for k, e := range i.Entries {
		out[k] = e.Blob
	}
	return out
}

// loadedPack is a pack whose table of contents is in memory.
type loadedPack struct {
	name    string
	size    int64
	modTime time.Time
	toc     *packTOC
}

// packSet is what a Store knows of its packs: the tables of contents read so
// far. It is refreshed from the directory whenever a blob is in none of them,
// so packs written or removed by other processes are found.
type packSet struct {
	mu     sync.Mutex
	loaded map[string]*loadedPack
	// bad remembers packs whose table of contents did not load, so that a
	// damaged pack is not re-read on every miss.
	bad map[string]error
	// frames holds the last few frames decoded, newest last: a reader that
	// pages through a blob, or reads its neighbours, decodes once.
	frames []cachedFrame
	// last is the pack the last lookup found a blob in: readers go through
	// blobs in the order they are packed, so the next one is most often
	// there too, and one search of its table of contents finds it.
	last *loadedPack
	// hint is the PackHint SetPackHint gave, if any.
	hint atomic.Pointer[PackHint]
}

// cachedFrame is a decoded frame of a pack.
type cachedFrame struct {
	pack  string
	frame int
	data  []byte
}

// frameCacheSize is how many decoded frames a Store keeps, each at most
// FrameSize bytes.
const frameCacheSize = 4

// lookup returns the loaded pack holding b: one loaded already, else the
// one the PackHint names, else one found by refreshing the set once.
func (s *Store) lookup(ctx context.Context, b Blob) (*loadedPack, PackEntry, bool, error) {
	s.packs.mu.Lock()
	lp, e, ok := s.searchLoaded(b)
	s.packs.mu.Unlock()
	if ok {
		return lp, e, true, nil
	}
	if lp, e, ok = s.hintedPack(ctx, b); ok {
		return lp, e, true, nil
	}
	s.packs.mu.Lock()
	defer s.packs.mu.Unlock()
	if lp, e, ok = s.searchLoaded(b); ok { // loaded meanwhile
		return lp, e, true, nil
	}
	if err := s.refreshPacks(ctx); err != nil {
		return nil, PackEntry{}, false, err
	}
	lp, e, ok = s.searchLoaded(b)
	return lp, e, ok, nil
}

// A PackHint names the pack that holds a blob, as far as its caller knows
// (a store's index records it), or returns "".
type PackHint func(ctx context.Context, b Blob) string

// SetPackHint gives the store a PackHint, which a read of a packed blob
// that no table of contents read so far lists asks first: a process that
// reads one packed blob then reads that pack's table alone, not every
// pack's. A hint that names no pack, or one that does not hold the blob,
// costs what a read costs without one.
func (s *Store) SetPackHint(h PackHint) {
	s.packs.hint.Store(&h)
}

// hintedPack looks for b in the pack the PackHint names.
func (s *Store) hintedPack(ctx context.Context, b Blob) (*loadedPack, PackEntry, bool) {
	h := s.packs.hint.Load()
	if h == nil || *h == nil {
		return nil, PackEntry{}, false
	}
	name := (*h)(ctx, b)
	if name == "" {
		return nil, PackEntry{}, false
	}
	return s.findIn(name, b)
}

func (s *Store) searchLoaded(b Blob) (*loadedPack, PackEntry, bool) {
	if lp := s.packs.last; lp != nil && s.packs.loaded[lp.name] == lp {
		if e, ok := lp.toc.find(b); ok {
			return lp, e, true
		}
	}
	for _, lp := range s.packs.loaded {
		if lp == s.packs.last {
			continue
		}
		if e, ok := lp.toc.find(b); ok {
			s.packs.last = lp
			return lp, e, true
		}
	}
	return nil, PackEntry{}, false
}

// refreshPacks lists packs/, loads the tables of contents of packs not seen
// before and forgets packs that are gone. The caller holds s.packs.mu.
func (s *Store) refreshPacks(ctx context.Context) error {
	des, err := s.fs.ReadDir(PacksDir)
	if errors.Is(err, fs.ErrNotExist) {
		s.packs.loaded, s.packs.bad = nil, nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", s.abs(PacksDir), err)
	}
	if s.packs.loaded == nil {
		s.packs.loaded = map[string]*loadedPack{}
		s.packs.bad = map[string]error{}
	}
	present := map[string]bool{}
	for _, de := range des {
		name := de.Name()
		if _, err := ParsePackName(name); err != nil {
			continue
		}
		present[name] = true
		if s.packs.loaded[name] != nil || s.packs.bad[name] != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		lp, err := s.loadPack(name)
		if err != nil {
			s.packs.bad[name] = err
			continue
		}
		s.packs.loaded[name] = lp
	}
	for name := range s.packs.loaded {
		if !present[name] {
			delete(s.packs.loaded, name)
		}
	}
	for name := range s.packs.bad {
		if !present[name] {
			delete(s.packs.bad, name)
		}
	}
	return nil
}

// openPackFile opens a pack file for reading, never through a link.
func (s *Store) openPackFile(name string) (file, fs.FileInfo, error) {
	if _, err := ParsePackName(name); err != nil {
		return nil, nil, err
	}
	f, fi, err := s.openRegular(PacksDir + "/" + name)
	var odd oddFile
	if errors.As(err, &odd) {
		return nil, nil, fmt.Errorf("%w: %s is a %s", ErrPackCorrupt, name, string(odd))
	}
	return f, fi, err
}

func (s *Store) loadPack(name string) (*loadedPack, error) {
	f, fi, err := s.openPackFile(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ra, ok := f.(io.ReaderAt)
	if !ok {
		return nil, errors.New("pack file does not support positioned reads")
	}
	var toc *packTOC
	if of, ok := f.(*os.File); ok && s.mapped {
		toc, err = mapTOC(of, fi.Size())
	} else {
		toc, err = readTOC(ra, fi.Size())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrPackCorrupt, name, err)
	}
	return &loadedPack{name: name, size: fi.Size(), modTime: fi.ModTime(), toc: toc}, nil
}

// openPacked opens a blob held in a pack, or returns ErrNotFound.
func (s *Store) openPacked(ctx context.Context, b Blob) (*Reader, error) {
	r, _, err := s.readPacked(ctx, b, false)
	return r, err
}

// readPacked opens a blob held in a pack, or returns ErrNotFound. With
// direct, a blob of a small frame comes as the frame's bytes (data, and a
// nil Reader) instead.
func (s *Store) readPacked(ctx context.Context, b Blob, direct bool) (*Reader, []byte, error) {
	for range 2 {
		lp, e, ok, err := s.lookup(ctx, b)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, fmt.Errorf("%s: %w", b.FileName(), ErrNotFound)
		}
		frame := lp.toc.frames[e.Frame]
		if frame.Raw <= FrameSize {
			if data, ok := s.cachedFrame(lp.name, e.Frame); ok {
				// Decoded already: no need to open the pack.
				data = data[e.Offset : e.Offset+e.Size : e.Offset+e.Size]
				if direct {
					return nil, data, nil
				}
				return newReader(io.NopCloser(bytes.NewReader(data)), b, e.Size, lp.name), nil, nil
			}
		}
		f, _, err := s.openPackFile(lp.name)
		if errors.Is(err, fs.ErrNotExist) {
			// Rewritten by gc since it was loaded: look again.
			s.packs.mu.Lock()
			delete(s.packs.loaded, lp.name)
			s.packs.mu.Unlock()
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if frame.Raw <= FrameSize {
			// A frame of many small blobs: decode it whole, once.
			data, err := s.frameBytes(lp.name, e.Frame, frame, f)
			f.Close()
			if err != nil {
				return nil, nil, &CorruptError{Blob: b, Reason: fmt.Sprintf("in %s: %v", lp.name, err)}
			}
			data = data[e.Offset : e.Offset+e.Size : e.Offset+e.Size]
			if direct {
				return nil, data, nil
			}
			return newReader(io.NopCloser(bytes.NewReader(data)), b, e.Size, lp.name), nil, nil
		}
		fr, err := openEntry(f, lp.name, frame, e)
		if err != nil {
			return nil, nil, &CorruptError{Blob: b, Reason: fmt.Sprintf("in %s: %v", lp.name, err)}
		}
		return newReader(fr, b, e.Size, lp.name), nil, nil
	}
	return nil, nil, fmt.Errorf("%s: %w", b.FileName(), ErrNotFound)
}

// frameBytes returns a frame's decoded bytes, from the cache or decoded
// from f. The decoder checks the frame's checksum; the caller's Reader checks
// the blob's digest.
func (s *Store) frameBytes(pack string, i int, fr packFrame, f file) ([]byte, error) {
	if data, ok := s.cachedFrame(pack, i); ok {
		return data, nil
	}
	data, err := decodeFrame(f, i, fr, nil)
	if err != nil {
		return nil, err
	}
	s.packs.mu.Lock()
	if len(s.packs.frames) == frameCacheSize {
		s.packs.frames = s.packs.frames[1:]
	}
	s.packs.frames = append(s.packs.frames, cachedFrame{pack: pack, frame: i, data: data})
	s.packs.mu.Unlock()
	return data, nil
}

// cachedFrame returns a frame's decoded bytes if the cache holds them.
func (s *Store) cachedFrame(pack string, i int) ([]byte, bool) {
	s.packs.mu.Lock()
	defer s.packs.mu.Unlock()
	for k, c := range s.packs.frames {
		if c.pack == pack && c.frame == i {
			s.packs.frames = append(append(s.packs.frames[:k:k], s.packs.frames[k+1:]...), c)
			return c.data, true
		}
	}
	return nil, false
}

// decodeFrame reads and decodes one whole frame, checking its checksum and
// its length against the table of contents, into dst's memory when it has
// room for the frame (nil: new memory).
func decodeFrame(f file, i int, fr packFrame, dst []byte) ([]byte, error) {
	ra, ok := f.(io.ReaderAt)
	if !ok {
		return nil, errors.New("pack file does not support positioned reads")
	}
	cp := compressedFrames.Get().(*[]byte)
	defer compressedFrames.Put(cp)
	if int64(cap(*cp)) < fr.Len {
		*cp = make([]byte, fr.Len)
	}
	comp := (*cp)[:fr.Len]
	if _, err := ra.ReadAt(comp, fr.Off); err != nil {
		return nil, fmt.Errorf("read frame %d: %w", i, err)
	}
	dec := decoders.Get().(*zstd.Decoder)
	if int64(cap(dst)) < fr.Raw {
		// A caller that gives a buffer reuses it for frame after
		// frame: room for any frame of small blobs saves making a new
		// one for each frame a little larger than the last.
		n := fr.Raw
		if dst != nil && n <= FrameSize {
			n = FrameSize
		}
		dst = make([]byte, 0, n)
	}
	data, err := dec.DecodeAll(comp, dst[:0])
	decoders.Put(dec)
	if err != nil {
		return nil, fmt.Errorf("decode frame %d: %w", i, err)
	}
	if int64(len(data)) != fr.Raw {
		return nil, fmt.Errorf("frame %d decodes to %d bytes, the table of contents says %d", i, len(data), fr.Raw)
	}
	return data, nil
}

// statPacked describes a blob held in a pack, or returns ErrNotFound.
func (s *Store) statPacked(ctx context.Context, b Blob) (BlobInfo, error) {
	lp, e, ok, err := s.lookup(ctx, b)
	if err != nil {
		return BlobInfo{}, err
	}
	if !ok {
		return BlobInfo{}, fmt.Errorf("stat %s: %w", b.FileName(), ErrNotFound)
	}
	return BlobInfo{Blob: b, Size: e.Size, ModTime: lp.modTime, Pack: lp.name}, nil
}

// Packs lists the store's pack files with their tables of contents, and
// the temp files left in packs/ by writes in progress or crashes. A pack
// whose table of contents does not load is listed in bad with the error.
func (s *Store) Packs(ctx context.Context) (packs []PackInfo, temps []Entry, bad map[string]error, err error) {
	des, err := s.fs.ReadDir(PacksDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list %s: %w", s.abs(PacksDir), err)
	}
	bad = map[string]error{}
	for _, de := range des {
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, err
		}
		name := de.Name()
		if isTempName(name) {
			fi, err := de.Info()
			if err != nil {
				continue
			}
			temps = append(temps, Entry{Kind: EntryTemp, RelPath: PacksDir + "/" + name, Size: fi.Size(), ModTime: fi.ModTime()})
			continue
		}
		d, err := ParsePackName(name)
		if err != nil {
			continue
		}
		lp, err := s.loadPack(name)
		if err != nil {
			bad[name] = err
			continue
		}
		pi := PackInfo{Name: name, Digest: d, Size: lp.size, ModTime: lp.modTime, Entries: lp.toc.entries()}
		for _, e := range pi.Entries {
			pi.Raw += e.Size
		}
		packs = append(packs, pi)
	}
	sort.Slice(packs, func(i, j int) bool { return packs[i].Name < packs[j].Name })
	return packs, temps, bad, nil
}

// countingWriter counts and hashes what goes into a pack file.
type countingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// WritePack writes the given blobs, in that order (callers put similar blobs
// next to each other), into one new pack file and returns it once it is
// durable (in SyncFull mode) under its final name. Each blob is read through
// Open and so checked first: a corrupt blob stops the pack with an error
// naming it, and nothing is left behind; a blob not found (removed since it
// was chosen) is left out, and the pack's Entries list what it holds, which
// is what the caller records. A blob listed twice is packed once. Nothing
// is removed: the caller records the pack and then removes the loose files.
func (s *Store) WritePack(ctx context.Context, blobs []Blob) (PackInfo, error) {
	if len(blobs) == 0 {
		return PackInfo{}, errors.New("write pack: no blobs")
	}
	created, err := s.mkdir(PacksDir)
	if err != nil {
		return PackInfo{}, err
	}
	if created && s.durability == SyncFull {
		if err := s.fs.SyncDir("."); err != nil {
			return PackInfo{}, fmt.Errorf("sync %s: %w", s.dir, err)
		}
	}
	tmp, f, err := s.createTempIn(PacksDir)
	if err != nil {
		return PackInfo{}, err
	}
	info, err := s.writePack(ctx, f, blobs)
	if err != nil {
		s.discard(tmp, f)
		return PackInfo{}, err
	}
	if s.durability == SyncFull {
		if err := f.Sync(); err != nil {
			s.discard(tmp, f)
			return PackInfo{}, s.writeError(Blob{}, err)
		}
	}
	if err := f.Close(); err != nil {
		s.fs.Remove(tmp)
		return PackInfo{}, s.writeError(Blob{}, err)
	}
	info.Name = PackName(info.Digest)
	if err := s.fs.Rename(tmp, PacksDir+"/"+info.Name); err != nil {
		s.fs.Remove(tmp)
		return PackInfo{}, fmt.Errorf("rename into %s: %w", s.abs(PacksDir+"/"+info.Name), err)
	}
	if s.durability == SyncFull {
		if err := s.fs.SyncDir(PacksDir); err != nil {
			return PackInfo{}, fmt.Errorf("sync %s: %w", s.abs(PacksDir), err)
		}
	}
	info.ModTime = s.now()
	return info, nil
}

func (s *Store) writePack(ctx context.Context, f file, blobs []Blob) (PackInfo, error) {
	cw := &countingWriter{w: f, h: NewHash()}
	bw := bufio.NewWriterSize(cw, chunkSize)
	enc, err := zstd.NewWriter(bw, packEncoderOptions...)
	if err != nil {
		return PackInfo{}, err
	}
	var (
		frames  []packFrame
		entries []PackEntry
		seen    = map[Blob]bool{}
		raw     int64 // uncompressed bytes in the open frame
		start   int64 // where the open frame starts in the file
		info    PackInfo
	)
	closeFrame := func() error {
		if err := enc.Close(); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		frames = append(frames, packFrame{Off: start, Len: cw.n - start, Raw: raw})
		start, raw = cw.n, 0
		enc.Reset(bw)
		return nil
	}
	for _, b := range blobs {
		if seen[b] {
			continue
		}
		seen[b] = true
		if err := ctx.Err(); err != nil {
			return PackInfo{}, err
		}
		r, err := s.Open(ctx, b)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return PackInfo{}, fmt.Errorf("write pack: %w", err)
		}
		size := r.Size()
		if raw > 0 && raw+size > FrameSize {
			if err := closeFrame(); err != nil {
				r.Close()
				return PackInfo{}, s.writeError(Blob{}, err)
			}
		}
		e := PackEntry{Blob: b, Frame: len(frames), Offset: raw, Size: size}
		// Bytes go into the frame only once they are checked: small blobs
		// are read whole first; a large one has its frame to itself and a
		// bad byte in it stops the whole pack.
		var n int64
		if size < FrameSize {
			data, err := io.ReadAll(r)
			if err == nil {
				_, err = enc.Write(data)
			}
			n = int64(len(data))
			if err != nil {
				r.Close()
				return PackInfo{}, fmt.Errorf("write pack: %s: %w", b, err)
			}
		} else if n, err = io.Copy(enc, r); err != nil {
			r.Close()
			return PackInfo{}, fmt.Errorf("write pack: %s: %w", b, err)
		}
		r.Close()
		e.Size = n
		raw += n
		entries = append(entries, e)
		info.Raw += n
	}
	if len(entries) == 0 {
		return PackInfo{}, fmt.Errorf("write pack: %w: every blob given was removed", ErrNotFound)
	}
	if err := closeFrame(); err != nil {
		return PackInfo{}, s.writeError(Blob{}, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Blob.FileName() < entries[j].Blob.FileName() })
	if _, err := bw.Write(tocFrame(marshalTOC(frames, entries), cw.n)); err != nil {
		return PackInfo{}, s.writeError(Blob{}, err)
	}
	if err := bw.Flush(); err != nil {
		return PackInfo{}, s.writeError(Blob{}, err)
	}
	cw.h.Sum(info.Digest[:0])
	info.Size = cw.n
	info.Entries = entries
	return info, nil
}

// RemovePack deletes a pack file. Only gc calls it, once no index row uses
// any blob in it, or once its live blobs are in a new pack whose rows are
// committed.
func (s *Store) RemovePack(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := ParsePackName(name); err != nil {
		return fmt.Errorf("remove pack: %w", err)
	}
	if err := s.fs.Remove(PacksDir + "/" + name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", s.abs(PacksDir+"/"+name), err)
	}
	s.packs.mu.Lock()
	delete(s.packs.loaded, name)
	s.packs.mu.Unlock()
	return nil
}

// RemoveTempPack deletes a temp file in packs/ that Packs reported.
func (s *Store) RemoveTempPack(ctx context.Context, rel string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(rel) <= len(PacksDir)+1 || rel[:len(PacksDir)+1] != PacksDir+"/" || !isTempName(rel[len(PacksDir)+1:]) {
		return fmt.Errorf("remove temp: %q is not a temp file of the store's packs", clip(rel))
	}
	if err := s.fs.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove temp %s: %w", s.abs(rel), err)
	}
	return nil
}

// PackProblem is something VerifyPack found wrong.
type PackProblem struct {
	Pack string
	// Blob is set when the problem is one blob's; zero for the whole pack.
	Blob   Blob
	Reason string
}

// VerifyPack re-hashes a pack file against its name and every blob in it
// against its digest, frame by frame, and returns what it found wrong. A
// pack whose table of contents does not load gives one problem and no
// blobs. ok lists the blobs found whole.
func (s *Store) VerifyPack(ctx context.Context, name string) (ok []PackEntry, problems []PackProblem, err error) {
	d, err := ParsePackName(name)
	if err != nil {
		return nil, nil, fmt.Errorf("verify pack: %w", err)
	}
	f, _, err := s.openPackFile(name)
	if err != nil {
		return nil, []PackProblem{{Pack: name, Reason: err.Error()}}, nil
	}
	h := NewHash()
	_, err = io.Copy(h, cancel.NewReader(ctx, f))
	f.Close()
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, []PackProblem{{Pack: name, Reason: err.Error()}}, nil
	}
	var got Digest
	h.Sum(got[:0])
	if got != d {
		problems = append(problems, PackProblem{Pack: name, Reason: "content hashes to " + got.String()})
	}
	lp, err := s.loadPack(name)
	if err != nil {
		return nil, append(problems, PackProblem{Pack: name, Reason: err.Error()}), nil
	}
	// Frame by frame, as reads go: a frame of small blobs is decoded whole
	// (so damage anywhere in it fails every blob in it, as it fails their
	// reads), a frame of one large blob is streamed.
	byFrame := make([][]PackEntry, len(lp.toc.frames))
	for _, e := range lp.toc.entries() {
		byFrame[e.Frame] = append(byFrame[e.Frame], e)
	}
	for i, fr := range lp.toc.frames {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		bad := func(e PackEntry, reason string) {
			problems = append(problems, PackProblem{Pack: name, Blob: e.Blob, Reason: reason})
		}
		if fr.Raw <= FrameSize {
			var data []byte
			pf, _, err := s.openPackFile(name)
			if err == nil {
				data, err = decodeFrame(pf, i, fr, nil)
				pf.Close()
			}
			for _, e := range byFrame[i] {
				if err != nil {
					bad(e, err.Error())
				} else if got := Sum(data[e.Offset : e.Offset+e.Size]); got != e.Blob.Digest {
					bad(e, "content hashes to "+got.String())
				} else {
					ok = append(ok, e)
				}
			}
			continue
		}
		// A frame of one large blob: stream it through a checked Reader,
		// which owns the file it is given.
		for _, e := range byFrame[i] {
			pf, _, err := s.openPackFile(name)
			if err != nil {
				bad(e, err.Error())
				continue
			}
			frr, err := openEntry(pf, name, fr, e)
			if err != nil {
				bad(e, err.Error())
				continue
			}
			r := newReader(frr, e.Blob, e.Size, name)
			_, err = io.Copy(io.Discard, r)
			r.Close()
			if err != nil {
				bad(e, err.Error())
				continue
			}
			ok = append(ok, e)
		}
	}
	return ok, problems, nil
}

// RemoveEmptyShards removes shard directories that hold nothing, as packing
// leaves them; a write recreates its shard when it needs it. A directory that
// is not empty is left alone, whatever another process does meanwhile.
func (s *Store) RemoveEmptyShards(ctx context.Context) (int, error) {
	top, err := s.fs.ReadDir(BlobsDir)
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", s.abs(BlobsDir), err)
	}
	n := 0
	for _, de := range top {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if !de.IsDir() || !isShardName(de.Name()) {
			continue
		}
		// Remove fails on a directory that is not empty, which is what keeps
		// this safe against a writer creating a file in it meanwhile.
		if err := s.fs.Remove(BlobsDir + "/" + de.Name()); err == nil {
			n++
		}
	}
	return n, nil
}

// PackPosition says where a packed blob is: its pack, and its entry in the
// pack's table of contents (its frame, offset in the frame and size); ok is
// false when no pack holds it. A reader of many blobs reads them in this
// order, so that each frame is decoded once.
func (s *Store) PackPosition(ctx context.Context, b Blob) (pack string, e PackEntry, ok bool) {
	lp, e, ok, err := s.lookup(ctx, b)
	if err != nil || !ok {
		return "", PackEntry{}, false
	}
	return lp.name, e, true
}

// PackPositionIn is PackPosition for a blob that pack (a pack's file name)
// is said to hold: only that pack's table of contents is read, where
// PackPosition reads every pack's the first time. When the pack is gone
// or does not hold the blob (gc rewrote it), it looks as PackPosition
// does.
func (s *Store) PackPositionIn(ctx context.Context, pack string, b Blob) (string, PackEntry, bool) {
	if lp, e, ok := s.findIn(pack, b); ok {
		return lp.name, e, true
	}
	return s.PackPosition(ctx, b)
}

// findIn looks for b in the named pack, loading its table of contents
// alone if need be.
func (s *Store) findIn(pack string, b Blob) (*loadedPack, PackEntry, bool) {
	lp := s.namedPack(pack)
	if lp == nil {
		return nil, PackEntry{}, false
	}
	e, ok := lp.toc.find(b)
	if ok {
		s.packs.mu.Lock()
		s.packs.last = lp
		s.packs.mu.Unlock()
	}
	return lp, e, ok
}

// LoadPackTables loads the tables of contents of the named packs that are
// not loaded yet, several at once, so that PackPositionIn finds blobs in
// them at once: a process's first search needs the tables of most packs
// before it can read a blob. A name that is no pack's is left alone, as
// PackPositionIn leaves it.
func (s *Store) LoadPackTables(ctx context.Context, names []string) {
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for _, name := range names {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s.namedPack(name)
		})
	}
	wg.Wait()
}

// namedPack returns the pack of that name, loading its table of contents
// first (without holding the lock, so that several load at once) when it
// is not loaded yet; nil for a pack that cannot be loaded.
func (s *Store) namedPack(name string) *loadedPack {
	s.packs.mu.Lock()
	lp, bad := s.packs.loaded[name], s.packs.bad[name]
	s.packs.mu.Unlock()
	if lp != nil || bad != nil {
		return lp
	}
	if _, err := ParsePackName(name); err != nil {
		return nil
	}
	l, err := s.loadPack(name)
	if err != nil {
		return nil
	}
	s.packs.mu.Lock()
	defer s.packs.mu.Unlock()
	if cur := s.packs.loaded[name]; cur != nil {
		return cur // loaded meanwhile by another caller
	}
	if s.packs.loaded == nil {
		s.packs.loaded, s.packs.bad = map[string]*loadedPack{}, map[string]error{}
	}
	s.packs.loaded[name] = l
	return l
}

// DecodeFrame decodes a frame of many small blobs of a pack (one that
// PackPosition named) into dst's memory, grown as needed, and returns its
// bytes: each blob's at the offset PackPosition gave, none of them checked
// against its digest (the frame's checksum is, as it decodes; the caller
// checks a blob with CheckBytes before it trusts it). Unlike PackedBytes,
// it neither caches the frame nor allocates one, for a reader that goes
// through many frames once. ErrNotFound says the pack is gone (gc
// rewrote it since: PackPosition finds the blob's new place).
func (s *Store) DecodeFrame(ctx context.Context, pack string, frame int, dst []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.packs.mu.Lock()
	lp := s.packs.loaded[pack]
	s.packs.mu.Unlock()
	if lp == nil {
		return nil, fmt.Errorf("%s: %w", pack, ErrNotFound)
	}
	if frame < 0 || frame >= len(lp.toc.frames) || lp.toc.frames[frame].Raw > FrameSize {
		return nil, fmt.Errorf("%s: no frame %d of small blobs", pack, frame)
	}
	f, _, err := s.openPackFile(pack)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", pack, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := decodeFrame(f, frame, lp.toc.frames[frame], dst)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pack, err)
	}
	return data, nil
}

// PackedBytes returns the bytes of a blob held in a small frame of a pack
// (one of many blobs), decoding the frame or taking it from the cache,
// without checking them against the blob's digest: the frame's checksum
// was checked as it was decoded, and the caller checks the digest
// (CheckBytes) before it trusts them, which a search that finds nothing in
// them may skip. The bytes are shared with the cache: never change them. A
// blob in a frame of its own comes as a Reader instead; ErrNotFound says
// no pack holds the blob.
func (s *Store) PackedBytes(ctx context.Context, b Blob) ([]byte, *Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	r, data, err := s.readPacked(ctx, b, true)
	return data, r, err
}

// CheckBytes returns nil when data hashes to b's digest, and a
// *CorruptError (wrapping ErrCorrupt) when it does not.
func CheckBytes(b Blob, data []byte) error {
	h := hashPool.Get().(hash.Hash)
	h.Reset()
	defer hashPool.Put(h)
	h.Write(data)
	return mismatch(b, h, int64(len(data)))
}

// OpenPacked opens a blob from the pack that holds it, without looking for
// a file of its own first, as Open does; it returns ErrNotFound when no
// pack holds it.
func (s *Store) OpenPacked(ctx context.Context, b Blob) (*Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.openPacked(ctx, b)
}
