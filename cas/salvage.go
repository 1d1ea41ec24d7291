package cas

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/klauspost/compress/zstd"

	"github.com/toolcas/toolcas/internal/cancel"
)

// A SizedBlob is a blob and its size in bytes.
type SizedBlob struct {
	Blob Blob
	Size int64
}

// SalvagePack recovers the blobs of want from a pack whose table of
// contents is damaged or gone, and calls found with each one's bytes,
// checked against its digest. Its frames are found by walking the zstd
// frames from the start of the file, each decoded alone; whatever part of
// the table of contents still reads (a pack cut short loses its end) says
// where blobs lie in them, each checked; the rest of each frame is matched
// against want, by size and digest, from both ends of what is left, as a
// pack writes whole blobs one after another in a frame. A blob in a frame
// that does not decode, or next to blobs want does not name (their rows
// are gone) on both sides, is not found. SalvagePack changes nothing. It
// returns how many blobs of want it found.
func (s *Store) SalvagePack(ctx context.Context, name string, want []SizedBlob, found func(Blob, []byte) error) (int, error) {
	if _, err := ParsePackName(name); err != nil {
		return 0, fmt.Errorf("salvage pack: %w", err)
	}
	f, _, err := s.openRegular(PacksDir + "/" + name)
	if err != nil {
		return 0, fmt.Errorf("salvage %s: %w", name, err)
	}
	data, err := io.ReadAll(cancel.NewReader(ctx, f))
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("salvage %s: %w", name, err)
	}
	frames, tocAt := walkFrames(data)
	sv := &salvager{want: map[int64]map[Digest]Blob{}, found: found}
	for _, w := range want {
		if sv.want[w.Size] == nil {
			sv.want[w.Size] = map[Digest]Blob{}
		}
		sv.want[w.Size][w.Blob.Digest] = w.Blob
	}
	var entries []PackEntry
	if tocAt >= 0 {
		entries = partialTOC(data[tocAt:], frames)
	}
	for i, fr := range frames {
		if err := ctx.Err(); err != nil {
			return sv.n, err
		}
		raw, err := decodeRaw(data[fr.Off : fr.Off+fr.Len])
		if err != nil {
			continue // its blobs are lost
		}
		if err := sv.frame(raw, entriesOf(entries, i)); err != nil {
			return sv.n, err
		}
	}
	return sv.n, nil
}

// walkFrames finds the zstd frames at the start of a pack's bytes, one
// after another, and the offset of the skippable frame after them (the
// table of contents), or -1 when the frames end otherwise: at damage, or
// at the end of the bytes.
func walkFrames(data []byte) (frames []packFrame, tocAt int64) {
	var off int64
	for off+4 <= int64(len(data)) {
		magic := binary.LittleEndian.Uint32(data[off:])
		if magic&0xFFFFFFF0 == skippableMagic&0xFFFFFFF0 {
			return frames, off
		}
		n, ok := zstdFrameLen(data[off:])
		if !ok {
			return frames, -1
		}
		frames = append(frames, packFrame{Off: off, Len: n})
		off += n
	}
	return frames, -1
}

// zstdFrameLen returns the length of the zstd frame at the start of b, read
// from its header and block headers, without decoding it.
func zstdFrameLen(b []byte) (int64, bool) {
	if len(b) < 6 || binary.LittleEndian.Uint32(b) != 0xFD2FB528 {
		return 0, false
	}
	fhd := b[4]
	single := fhd&0x20 != 0
	checksum := fhd&0x04 != 0
	n := 5
	if !single {
		n++ // window descriptor
	}
	n += []int{0, 1, 2, 4}[fhd&0x03] // dictionary id
	fcs := []int{0, 2, 4, 8}[fhd>>6]
	if fcs == 0 && single {
		fcs = 1
	}
	n += fcs
	for {
		if n+3 > len(b) {
			return 0, false
		}
		h := uint32(b[n]) | uint32(b[n+1])<<8 | uint32(b[n+2])<<16
		n += 3
		size := int(h >> 3)
		switch (h >> 1) & 3 {
		case 0, 2: // raw, compressed
			n += size
		case 1: // run length: one byte
			n++
		default:
			return 0, false
		}
		if n > len(b) {
			return 0, false
		}
		if h&1 != 0 {
			break
		}
	}
	if checksum {
		n += 4
	}
	if n > len(b) {
		return 0, false
	}
	return int64(n), true
}

// decodeRaw decodes one zstd frame.
func decodeRaw(frame []byte) ([]byte, error) {
	dec := decoders.Get().(*zstd.Decoder)
	defer decoders.Put(dec)
	return dec.DecodeAll(frame, nil)
}

// partialTOC reads what it can of the skippable frame holding a pack's
// table of contents: its entries up to the first that does not parse, or
// that names a frame walkFrames did not find where the table says.
func partialTOC(b []byte, frames []packFrame) []PackEntry {
	if len(b) < 8 {
		return nil
	}
	r := bytes.NewReader(b[8:])
	num := func() (int64, bool) {
		v, err := binary.ReadUvarint(r)
		return int64(v), err == nil && v <= 1<<62
	}
	if v, err := r.ReadByte(); err != nil || v != tocVersion {
		return nil
	}
	nf, ok := num()
	if !ok || nf != int64(len(frames)) {
		return nil
	}
	for i := range nf {
		off, ok1 := num()
		_, ok2 := num()
		_, ok3 := num()
		if !ok1 || !ok2 || !ok3 || off != frames[i].Off {
			return nil
		}
	}
	ne, ok := num()
	if !ok {
		return nil
	}
	var out []PackEntry
	for range ne {
		var e PackEntry
		if _, err := io.ReadFull(r, e.Blob.Digest[:]); err != nil {
			break
		}
		n, ok := num()
		if !ok || n > 64 {
			break
		}
		ext := make([]byte, n)
		if _, err := io.ReadFull(r, ext); err != nil {
			break
		}
		e.Blob.Ext = string(ext)
		fr, ok1 := num()
		off, ok2 := num()
		size, ok3 := num()
		if !ok1 || !ok2 || !ok3 || fr >= nf || CheckExt(e.Blob.Ext) != nil {
			break
		}
		e.Frame, e.Offset, e.Size = int(fr), off, size
		out = append(out, e)
	}
	return out
}

// entriesOf returns the entries of frame i.
func entriesOf(entries []PackEntry, i int) []PackEntry {
	var out []PackEntry
	for _, e := range entries {
		if e.Frame == i {
			out = append(out, e)
		}
	}
	return out
}

// salvager finds the blobs it wants in decoded frames.
type salvager struct {
	// want holds the blobs looked for, by size and digest; a blob leaves
	// it once found.
	want  map[int64]map[Digest]Blob
	found func(Blob, []byte) error
	n     int
}

// take hands over blob b, found in a frame, if it is wanted.
func (sv *salvager) take(b Blob, data []byte) error {
	size := int64(len(data))
	if w, ok := sv.want[size][b.Digest]; !ok || w != b {
		return nil
	}
	delete(sv.want[size], b.Digest)
	sv.n++
	return sv.found(b, data)
}

// frame salvages one decoded frame: the entries the table of contents
// still gives, where their bytes check; then, in each stretch no entry
// covers, wanted blobs matched from its start and from its end.
func (sv *salvager) frame(raw []byte, entries []PackEntry) error {
	slices.SortFunc(entries, func(a, b PackEntry) int { return int(a.Offset - b.Offset) })
	var covered int64
	var gaps [][2]int64
	for _, e := range entries {
		if e.Offset < covered || e.Offset+e.Size > int64(len(raw)) || Sum(raw[e.Offset:e.Offset+e.Size]) != e.Blob.Digest {
			continue // damaged entry: its stretch is a gap
		}
		if e.Offset > covered {
			gaps = append(gaps, [2]int64{covered, e.Offset})
		}
		if err := sv.take(e.Blob, raw[e.Offset:e.Offset+e.Size]); err != nil {
			return err
		}
		covered = e.Offset + e.Size
	}
	if covered < int64(len(raw)) {
		gaps = append(gaps, [2]int64{covered, int64(len(raw))})
	}
	for _, g := range gaps {
		if err := sv.gap(raw[g[0]:g[1]]); err != nil {
			return err
		}
	}
	return nil
}

// errNoMatch says no wanted blob starts, or ends, a stretch.
var errNoMatch = errors.New("no wanted blob here")

// gap matches wanted blobs at the start of b, then at its end, until
// neither end matches.
func (sv *salvager) gap(b []byte) error {
	for len(b) > 0 {
		n, err := sv.matchStart(b)
		if err == nil {
			b = b[n:]
			continue
		}
		if !errors.Is(err, errNoMatch) {
			return err
		}
		if n, err = sv.matchEnd(b); err != nil {
			if errors.Is(err, errNoMatch) {
				return nil
			}
			return err
		}
		b = b[:len(b)-n]
	}
	return nil
}

// sizes returns the sizes of the wanted blobs no larger than n, smallest
// first.
func (sv *salvager) sizes(n int) []int64 {
	var out []int64
	for size, ds := range sv.want {
		if size <= int64(n) && len(ds) > 0 {
			out = append(out, size)
		}
	}
	slices.Sort(out)
	return out
}

// matchStart finds a wanted blob at the start of b and returns its size:
// one pass of a hasher over b, its digest taken at each wanted size.
func (sv *salvager) matchStart(b []byte) (int, error) {
	h := NewHash()
	var at int64
	var d Digest
	for _, size := range sv.sizes(len(b)) {
		h.Write(b[at:size])
		at = size
		h.Sum(d[:0])
		if blob, ok := sv.want[size][d]; ok {
			return int(size), sv.take(blob, b[:size])
		}
	}
	return 0, errNoMatch
}

// matchEnd finds a wanted blob at the end of b and returns its size.
func (sv *salvager) matchEnd(b []byte) (int, error) {
	for _, size := range sv.sizes(len(b)) {
		tail := b[int64(len(b))-size:]
		if blob, ok := sv.want[size][Sum(tail)]; ok {
			return int(size), sv.take(blob, tail)
		}
	}
	return 0, errNoMatch
}
