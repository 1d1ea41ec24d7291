package cas

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// A pack file holds many blobs compressed together, for blobs that are no
// longer read often: git's packfiles are the model. Its layout:
//
//	frame 0, frame 1, …   zstd frames, each independently decodable, each
//	                      holding the bytes of one or more whole blobs one
//	                      after another (about FrameSize of them)
//	table of contents     in a zstd skippable frame, so that the whole file
//	                      is a valid zstd stream of the blobs' bytes
//
// The table of contents ends with a fixed trailer: its own offset and a magic
// number, so a reader finds it from the end of the file. A pack is named
// pack-<digest>.zst after the BLAKE3 digest of all its bytes, so verify can
// check a pack as a whole and a pack, once renamed into place, never changes.

// PacksDir is the directory under the store root that holds pack files.
const PacksDir = "packs"

// FrameSize is the amount of uncompressed blob bytes a pack frame gathers
// before it is closed; a blob larger than that gets a frame of its own.
const FrameSize = 1 << 20

const (
	packPrefix     = "pack-"
	packSuffix     = ".zst"
	packMagic      = "TCPACK01"
	tocVersion     = 1
	skippableMagic = 0x184D2A5E
	trailerSize    = int64(8 + len(packMagic))
	// maxTOC bounds the table of contents a reader accepts, so that a
	// damaged length cannot make it allocate without limit.
	maxTOC = 1 << 30
)

// A PackEntry locates one blob in a pack.
type PackEntry struct {
	Blob Blob
	// Frame is the index of the frame holding the blob.
	Frame int
	// Offset is where the blob starts in the frame's uncompressed bytes.
	Offset int64
	Size   int64
}

// packFrame locates one zstd frame in a pack file.
type packFrame struct {
	Off int64 // offset of the compressed frame in the file
	Len int64 // compressed length
	Raw int64 // uncompressed length
}

// packTOC is a pack's table of contents as a reader holds it: the frames
// decoded, the entries left as the file encodes them and decoded where a
// lookup lands. A process that searches reads the tables of every pack its
// candidates are in: decoded into PackEntry values they took 2.5 times the memory
// of their encoding, and on a machine where a page fault is dear, the
// fresh pages cost a one-shot search more than its matching did.
type packTOC struct {
	frames []packFrame
	// n is the number of entries; raw holds them, sorted by file name.
	// raw may be a memory map (mapTOC), unmapped once t is unreachable:
	// what reads it keeps t reachable until it is done (entryAt uses t
	// last).
	n   int
	raw []byte
	// marks[k] is the offset in raw of entry k*tocMarkEvery: a lookup
	// searches the marks, then decodes at most tocMarkEvery entries.
	marks []uint32
	// exts are the distinct extensions of the entries, so that decoding
	// one makes no string.
	exts []string
}

// PackName returns the file name of the pack whose bytes hash to d.
func PackName(d Digest) string { return packPrefix + d.Hex() + packSuffix }

// ParsePackName parses a pack file name, pack-<64 hex><.zst>.
func ParsePackName(name string) (Digest, error) {
	if !strings.HasPrefix(name, packPrefix) || !strings.HasSuffix(name, packSuffix) {
		return Digest{}, fmt.Errorf("%q is not a pack name", clip(name))
	}
	d, err := ParseHex(strings.TrimSuffix(strings.TrimPrefix(name, packPrefix), packSuffix))
	if err != nil {
		return Digest{}, fmt.Errorf("%q is not a pack name: %w", clip(name), err)
	}
	return d, nil
}

// tocMarkEvery is how many entries lie between two marks of a packTOC.
const tocMarkEvery = 16

// marshalTOC encodes a table of contents: the frames, then the entries,
// which must be sorted by file name.
func marshalTOC(frames []packFrame, entries []PackEntry) []byte {
	var b []byte
	b = append(b, tocVersion)
	b = binary.AppendUvarint(b, uint64(len(frames)))
	for _, f := range frames {
		b = binary.AppendUvarint(b, uint64(f.Off))
		b = binary.AppendUvarint(b, uint64(f.Len))
		b = binary.AppendUvarint(b, uint64(f.Raw))
	}
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for _, e := range entries {
		b = append(b, e.Blob.Digest[:]...)
		b = binary.AppendUvarint(b, uint64(len(e.Blob.Ext)))
		b = append(b, e.Blob.Ext...)
		b = binary.AppendUvarint(b, uint64(e.Frame))
		b = binary.AppendUvarint(b, uint64(e.Offset))
		b = binary.AppendUvarint(b, uint64(e.Size))
	}
	return b
}

// errTOC is what a table of contents that does not parse, or that names
// places outside its pack, gives.
var errTOC = errors.New("table of contents damaged")

// unmarshalTOC parses a table of contents and checks that every frame lies
// inside the first dataEnd bytes of the file and every blob inside its
// frame. The table keeps b.
func unmarshalTOC(b []byte, dataEnd int64) (*packTOC, error) {
	// Parsed from the slice itself: every process's first search reads
	// the tables of contents, and through an io.ByteReader a table of
	// 100,000 blobs took about 1.4 times as long (BenchmarkUnmarshalTOC).
	rest := b
	num := func() (int64, error) {
		v, k := binary.Uvarint(rest)
		if k <= 0 || v > 1<<62 {
			return 0, errTOC
		}
		rest = rest[k:]
		return int64(v), nil
	}
	if len(rest) == 0 || rest[0] != tocVersion {
		v := -1
		if len(rest) > 0 {
			v = int(rest[0])
		}
		return nil, fmt.Errorf("%w: version %d, this build reads %d", errTOC, v, tocVersion)
	}
	rest = rest[1:]
	nf, err := num()
	if err != nil || nf > int64(len(b)) {
		return nil, errTOC
	}
	t := &packTOC{frames: make([]packFrame, nf)}
	var end int64
	for i := range t.frames {
		f := &t.frames[i]
		if f.Off, err = num(); err != nil {
			return nil, err
		}
		if f.Len, err = num(); err != nil {
			return nil, err
		}
		if f.Raw, err = num(); err != nil {
			return nil, err
		}
		if f.Off != end || f.Len <= 0 || f.Off+f.Len > dataEnd {
			return nil, fmt.Errorf("%w: frame %d at %d+%d outside the pack's %d bytes of frames", errTOC, i, f.Off, f.Len, dataEnd)
		}
		end = f.Off + f.Len
	}
	if end != dataEnd {
		return nil, fmt.Errorf("%w: frames end at %d, the table of contents starts at %d", errTOC, end, dataEnd)
	}
	ne, err := num()
	if err != nil || ne > int64(len(b))/(DigestSize+4) {
		return nil, errTOC
	}
	t.n = int(ne)
	t.raw = rest
	t.marks = make([]uint32, 0, (t.n+tocMarkEvery-1)/tocMarkEvery)
	var prev Blob
	for i := range t.n {
		if i%tocMarkEvery == 0 {
			t.marks = append(t.marks, uint32(len(t.raw)-len(rest)))
		}
		if len(rest) < DigestSize {
			return nil, errTOC
		}
		var cur Blob
		copy(cur.Digest[:], rest)
		rest = rest[DigestSize:]
		n, err := num()
		if err != nil || n > 64 || n > int64(len(rest)) {
			return nil, errTOC
		}
		ext := rest[:n]
		rest = rest[n:]
		// A pack's blobs share a few extensions: each is made into a
		// string and checked once, not once an entry. (No extension
		// is empty: t.ext finds none, and CheckExt refuses it.)
		if cur.Ext = t.ext(ext); cur.Ext == "" {
			cur.Ext = string(ext)
			if err := CheckExt(cur.Ext); err != nil {
				return nil, fmt.Errorf("%w: %v", errTOC, err)
			}
			t.exts = append(t.exts, cur.Ext)
		}
		fr, err := num()
		if err != nil {
			return nil, err
		}
		off, err := num()
		if err != nil {
			return nil, err
		}
		size, err := num()
		if err != nil {
			return nil, err
		}
		if fr >= nf || off+size > t.frames[fr].Raw {
			return nil, fmt.Errorf("%w: blob %s outside its frame", errTOC, cur)
		}
		if i > 0 && compareEntries(prev, cur) >= 0 {
			return nil, fmt.Errorf("%w: entries out of order", errTOC)
		}
		prev = cur
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last entry", errTOC, len(rest))
	}
	return t, nil
}

// ext returns the string of t.exts that ext spells, or "".
func (t *packTOC) ext(ext []byte) string {
	for _, s := range t.exts {
		if string(ext) == s {
			return s
		}
	}
	return ""
}

// entryAt decodes the entry at off in t.raw, which unmarshalTOC checked,
// and returns it with the offset of the next one.
func (t *packTOC) entryAt(off int) (PackEntry, int) {
	var e PackEntry
	b := t.raw[off:]
	copy(e.Blob.Digest[:], b)
	b = b[DigestSize:]
	num := func() int64 {
		v, k := binary.Uvarint(b)
		b = b[k:]
		return int64(v)
	}
	n := num()
	e.Blob.Ext = t.ext(b[:n])
	b = b[n:]
	e.Frame = int(num())
	e.Offset = num()
	e.Size = num()
	return e, len(t.raw) - len(b)
}

// entries decodes every entry, in order.
func (t *packTOC) entries() []PackEntry {
	es := make([]PackEntry, t.n)
	off := 0
	for i := range es {
		es[i], off = t.entryAt(off)
	}
	return es
}

// compareEntries orders blobs as a table of contents lists them, in the
// order of their file names: by digest (its hex keeps the bytes' order),
// then extension. Compared as such, not as names built for each one.
func compareEntries(a, b Blob) int {
	return cmp.Or(bytes.Compare(a.Digest[:], b.Digest[:]), strings.Compare(a.Ext, b.Ext))
}

// find returns the entry of b, if the pack holds it.
func (t *packTOC) find(b Blob) (PackEntry, bool) {
	// The first mark past b; the entry is after the one before it.
	k := sort.Search(len(t.marks), func(k int) bool {
		e, _ := t.entryAt(int(t.marks[k]))
		return compareEntries(e.Blob, b) > 0
	})
	if k == 0 {
		return PackEntry{}, false
	}
	off := int(t.marks[k-1])
	for i := (k - 1) * tocMarkEvery; i < min(k*tocMarkEvery, t.n); i++ {
		var e PackEntry
		e, off = t.entryAt(off)
		switch c := compareEntries(e.Blob, b); {
		case c == 0:
			return e, true
		case c > 0:
			return PackEntry{}, false
		}
	}
	return PackEntry{}, false
}

// tocFrame wraps a table of contents in a skippable frame ending with the
// trailer: the frame's offset in the file and the magic number.
func tocFrame(toc []byte, off int64) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, skippableMagic)
	b = binary.LittleEndian.AppendUint32(b, uint32(int64(len(toc))+trailerSize))
	b = append(b, toc...)
	b = binary.LittleEndian.AppendUint64(b, uint64(off))
	return append(b, packMagic...)
}

// readTOC reads the table of contents of a pack file of the given size.
func readTOC(r io.ReaderAt, size int64) (*packTOC, error) {
	off, err := tocOffset(r, size)
	if err != nil {
		return nil, err
	}
	b := make([]byte, size-off)
	if _, err := r.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("read table of contents: %w", err)
	}
	return parseTOC(b, off, size)
}

// mapTOC is readTOC through a memory map of f (see WithMappedTables),
// which the table keeps until it is no longer used; where f cannot be
// mapped, it reads it.
func mapTOC(f *os.File, size int64) (*packTOC, error) {
	off, err := tocOffset(f, size)
	if err != nil {
		return nil, err
	}
	b, unmap, err := mapFile(f, off, size-off)
	if err != nil {
		return readTOC(f, size)
	}
	t, err := parseTOC(b, off, size)
	if err != nil {
		unmap()
		return nil, err
	}
	runtime.AddCleanup(t, func(unmap func()) { unmap() }, unmap)
	return t, nil
}

// tocOffset reads the trailer of a pack file of the given size and
// returns where its table of contents starts.
func tocOffset(r io.ReaderAt, size int64) (int64, error) {
	if size < 8+trailerSize {
		return 0, fmt.Errorf("%w: the file is %d bytes, too short for a pack", errTOC, size)
	}
	var tr [trailerSize]byte
	if _, err := r.ReadAt(tr[:], size-trailerSize); err != nil {
		return 0, fmt.Errorf("read trailer: %w", err)
	}
	if string(tr[8:]) != packMagic {
		return 0, fmt.Errorf("%w: no trailer at the end (truncated?)", errTOC)
	}
	off := int64(binary.LittleEndian.Uint64(tr[:8]))
	if off < 0 || off > size-(8+trailerSize) || size-off > maxTOC {
		return 0, fmt.Errorf("%w: trailer points at %d in a %d-byte file", errTOC, off, size)
	}
	return off, nil
}

// parseTOC parses b, the skippable frame at off that holds a pack's table
// of contents up to the end of the file, of the given size.
func parseTOC(b []byte, off, size int64) (*packTOC, error) {
	if binary.LittleEndian.Uint32(b) != skippableMagic || int64(binary.LittleEndian.Uint32(b[4:]))+8 != size-off {
		return nil, fmt.Errorf("%w: bad frame header", errTOC)
	}
	return unmarshalTOC(b[8:int64(len(b))-trailerSize], off)
}

// Compression levels of packs. Measured on real agent output (1 MiB frames):
// the better level gains 7 % over the default at about 1.4× the time; the
// best level another 8 % at 4× the time.
var packEncoderOptions = []zstd.EOption{
	zstd.WithEncoderLevel(zstd.SpeedBestCompression),
	zstd.WithEncoderConcurrency(1),
	zstd.WithWindowSize(FrameSize),
	zstd.WithEncoderCRC(true),
}

// decoders are reused: making one allocates a few hundred KiB.
var decoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(8*FrameSize))
	if err != nil {
		panic(err) // only invalid options fail, and these are constant
	}
	return d
}}

// compressedFrames holds the buffers decodeFrame reads frames into: a
// search reads hundreds of frames in a row, each of them a few hundred KiB.
var compressedFrames = sync.Pool{New: func() any { return new([]byte) }}

// frameReader reads a blob's bytes out of one frame: it decodes the frame
// from its start, skips to the blob and stops at its end.
type frameReader struct {
	dec  *zstd.Decoder
	body io.Reader
	f    io.Closer
	blob Blob
	pack string
}

// Read reads the blob's bytes; a frame that does not decode is a corrupt
// blob.
func (r *frameReader) Read(p []byte) (int, error) {
	if r.body == nil {
		return 0, io.ErrClosedPipe
	}
	n, err := r.body.Read(p)
	if err != nil && err != io.EOF {
		err = &CorruptError{Blob: r.blob, Reason: fmt.Sprintf("in %s: %v", r.pack, err)}
	}
	return n, err
}

func (r *frameReader) Close() error {
	if r.dec != nil {
		r.dec.Reset(nil)
		decoders.Put(r.dec)
		r.dec, r.body = nil, nil
	}
	return r.f.Close()
}

// openEntry returns a reader of one blob's bytes in a pack file, which it
// closes on error and when the reader is closed. The bytes are not checked
// here: Reader checks them against the digest.
func openEntry(f file, pack string, fr packFrame, e PackEntry) (*frameReader, error) {
	ra, ok := f.(io.ReaderAt)
	if !ok {
		f.Close()
		return nil, errors.New("pack file does not support positioned reads")
	}
	dec := decoders.Get().(*zstd.Decoder)
	if err := dec.Reset(io.NewSectionReader(ra, fr.Off, fr.Len)); err != nil {
		decoders.Put(dec)
		f.Close()
		return nil, err
	}
	r := &frameReader{dec: dec, f: f, blob: e.Blob, pack: pack}
	if _, err := io.CopyN(io.Discard, dec, e.Offset); err != nil {
		r.Close()
		return nil, fmt.Errorf("decode frame %d: %w", e.Frame, err)
	}
	r.body = io.LimitReader(dec, e.Size)
	return r, nil
}
