package cas

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// packFixture stores blobs of many sizes (a few frames' worth, one larger
// than a frame, an empty one) and packs them.
func packFixture(t *testing.T, s *Store) (map[Blob][]byte, []Blob, PackInfo) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	contents := map[Blob][]byte{}
	var order []Blob
	add := func(data []byte, ext string) {
		r, err := s.PutBytes(ctx, data, ext)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := contents[r.Blob]; !ok {
			order = append(order, r.Blob)
		}
		contents[r.Blob] = data
	}
	add(nil, ".txt")
	for i := range 60 {
		var b strings.Builder
		for j := range 200 + rng.IntN(4000) {
			fmt.Fprintf(&b, "line %d of result %d: ok\n", j, i)
		}
		add([]byte(b.String()), ".txt")
	}
	big := make([]byte, FrameSize+12345)
	for i := range big {
		big[i] = byte(rng.IntN(16))
	}
	add(big, ".bin")
	order = append(order, order[3]) // listed twice, packed once
	info, err := s.WritePack(ctx, order)
	if err != nil {
		t.Fatal(err)
	}
	return contents, order, info
}

func removeLoose(t *testing.T, s *Store, blobs map[Blob][]byte) {
	t.Helper()
	for b := range blobs {
		if err := s.Remove(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPackRoundTrip(t *testing.T) {
	for _, d := range []Durability{SyncFull, SyncNone} {
		t.Run(d.String(), func(t *testing.T) { testPackRoundTrip(t, MustOpen(t, WithDurability(d))) })
	}
	t.Run("mapped tables", func(t *testing.T) {
		s := MustOpen(t, WithMappedTables())
		testPackRoundTrip(t, s)
		if runtime.GOOS == "linux" {
			// The tables were mapped, not read as usual.
			maps, err := os.ReadFile("/proc/self/maps")
			if err != nil || !bytes.Contains(maps, []byte(filepath.Join(s.Dir(), PacksDir, "pack-"))) {
				t.Errorf("no pack file of %s in /proc/self/maps (%v): its table was not mapped", s.Dir(), err)
			}
		}
	})
}

func testPackRoundTrip(t *testing.T, s *Store) {
	ctx := context.Background()
	contents, _, info := packFixture(t, s)
	if len(info.Entries) != len(contents) {
		t.Fatalf("pack holds %d entries, want %d", len(info.Entries), len(contents))
	}
	raw := int64(0)
	for _, data := range contents {
		raw += int64(len(data))
	}
	if info.Raw != raw {
		t.Errorf("pack Raw = %d, want %d", info.Raw, raw)
	}
	// The name is the digest of the file's bytes.
	file, err := os.ReadFile(filepath.Join(s.Dir(), PacksDir, info.Name))
	if err != nil {
		t.Fatal(err)
	}
	if got := Sum(file); PackName(got) != info.Name || int64(len(file)) != info.Size {
		t.Errorf("pack %s (%d bytes) hashes to %s, %d bytes", info.Name, info.Size, got, len(file))
	}
	if info.Size*3 > raw {
		t.Errorf("pack of %d bytes for %d raw bytes of repetitive text: not compressed", info.Size, raw)
	}
	// The whole pack is a zstd stream of every blob's bytes.
	dec, _ := zstd.NewReader(nil)
	all, err := dec.DecodeAll(file, nil)
	if err != nil || int64(len(all)) != raw {
		t.Errorf("decoding the whole pack with plain zstd: %d bytes, %v; want %d bytes", len(all), err, raw)
	}
	removeLoose(t, s, contents)
	for b, want := range contents {
		got, err := s.ReadAll(ctx, b)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("ReadAll(%s) from pack = %d bytes, %v; want %d bytes", b, len(got), err, len(want))
		}
		r, err := s.Open(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if r.Pack() != info.Name || r.Size() != int64(len(want)) {
			t.Errorf("Open(%s): pack %q size %d, want %q %d", b, r.Pack(), r.Size(), info.Name, len(want))
		}
		r.Close()
		st, err := s.Stat(ctx, b)
		if err != nil || st.Pack != info.Name || st.Size != int64(len(want)) {
			t.Errorf("Stat(%s) = %+v, %v; want pack %s", b, st, err, info.Name)
		}
		if err := s.Verify(ctx, b); err != nil {
			t.Errorf("Verify(%s) = %v", b, err)
		}
	}
	ok, problems, err := s.VerifyPack(ctx, info.Name)
	if err != nil || len(problems) != 0 || len(ok) != len(contents) {
		t.Errorf("VerifyPack = %d ok, %v, %v", len(ok), problems, err)
	}
	packs, temps, bad, err := s.Packs(ctx)
	if err != nil || len(packs) != 1 || len(temps) != 0 || len(bad) != 0 || packs[0].Name != info.Name {
		t.Errorf("Packs = %v, %v, %v, %v", packs, temps, bad, err)
	}
}

// TestPackCorruption damages packs on purpose: a flipped byte in a frame, a
// truncated file, a table of contents that lies. Reads give errors, never
// wrong bytes, and verify names the damage.
func TestPackCorruption(t *testing.T) {
	damage := map[string]func(t *testing.T, path string, info PackInfo){
		"flipped byte in a frame": func(t *testing.T, path string, info PackInfo) {
			b, _ := os.ReadFile(path)
			b[len(b)/3] ^= 0x40
			os.WriteFile(path, b, 0o644)
		},
		"truncated": func(t *testing.T, path string, info PackInfo) {
			os.Truncate(path, info.Size/2)
		},
		"lying table of contents": func(t *testing.T, path string, info PackInfo) {
			// Every blob is said to be one byte shorter than it is.
			b, _ := os.ReadFile(path)
			toc, err := readTOC(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			entries := toc.entries()
			off := int64(len(b)) - (int64(len(marshalTOC(toc.frames, entries))) + 8 + trailerSize)
			for i := range entries {
				if entries[i].Size > 0 {
					entries[i].Size--
				}
			}
			b = append(b[:off], tocFrame(marshalTOC(toc.frames, entries), off)...)
			os.WriteFile(path, b, 0o644)
		},
	}
	for name, fn := range damage {
		for _, mapped := range []bool{false, true} {
			if mapped {
				name += ", tables mapped"
			}
			t.Run(name, func(t *testing.T) { testPackDamage(t, fn, mapped) })
		}
	}
}

func testPackDamage(t *testing.T, damage func(t *testing.T, path string, info PackInfo), mapped bool) {
	ctx := context.Background()
	s := MustOpen(t)
	contents, _, info := packFixture(t, s)
	removeLoose(t, s, contents)
	path := filepath.Join(s.Dir(), PacksDir, info.Name)
	os.Chmod(path, 0o644)
	damage(t, path, info)
	var opts []Option
	if mapped {
		opts = append(opts, WithMappedTables())
	}
	s2, err := Open(ctx, s.Dir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	failed := 0
	for b, want := range contents {
		got, err := s2.ReadAll(ctx, b)
		if err == nil {
			if !bytes.Equal(got, want) {
				t.Fatalf("ReadAll(%s) returned wrong bytes from a damaged pack", b)
			}
			continue
		}
		failed++
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrPackCorrupt) {
			t.Errorf("ReadAll(%s) = %v, want corrupt or not found", b, err)
		}
	}
	if failed == 0 {
		t.Error("every blob read back whole from a damaged pack")
	}
	_, problems, err := s2.VerifyPack(ctx, info.Name)
	if err != nil || len(problems) == 0 {
		t.Errorf("VerifyPack on a damaged pack = %v, %v; want problems", problems, err)
	}
	if problems[0].Reason == "" || !strings.Contains(problems[0].Pack, "pack-") {
		t.Errorf("problem %+v does not say what is wrong", problems[0])
	}
}

// TestWritePackRefusesCorruptBlob: a damaged loose blob stops the pack, and
// nothing is left in packs/.
func TestWritePackRefusesCorruptBlob(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	a, _ := s.PutBytes(ctx, []byte("fine content"), ".txt")
	b, _ := s.PutBytes(ctx, []byte("content to damage"), ".txt")
	p := s.Path(b.Blob)
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("content to damagE"), 0o644)
	_, err := s.WritePack(ctx, []Blob{a.Blob, b.Blob})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), b.Blob.FileName()) {
		t.Errorf("WritePack with a corrupt blob = %v, want ErrCorrupt naming it", err)
	}
	des, _ := os.ReadDir(filepath.Join(s.Dir(), PacksDir))
	if len(des) != 0 {
		t.Errorf("packs/ after a failed pack holds %v", des)
	}
	if _, err := s.WritePack(ctx, nil); err == nil {
		t.Error("WritePack(no blobs) succeeded")
	}
}

// TestPackSeenByOtherOpeners: a store opened before another one packed and
// removed loose files (and emptied shard directories) finds the blobs in the
// new pack, and a blob written later into a shard made anew.
func TestPackSeenByOtherOpeners(t *testing.T) {
	ctx := context.Background()
	a := MustOpen(t)
	data := []byte("read before and after packing")
	r, err := a.PutBytes(ctx, data, ".txt")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.ReadAll(ctx, r.Blob); err != nil || !bytes.Equal(got, data) {
		t.Fatal(err)
	}
	b, err := Open(ctx, a.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.WritePack(ctx, []Blob{r.Blob}); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(ctx, r.Blob); err != nil {
		t.Fatal(err)
	}
	n, err := b.RemoveEmptyShards(ctx)
	if err != nil || n != 256 {
		t.Fatalf("RemoveEmptyShards = %d, %v; want 256", n, err)
	}
	if got, err := a.ReadAll(ctx, r.Blob); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read through the first opener after packing = %q, %v", got, err)
	}
	// Another process writes into the shard the first opener had cached.
	other := []byte("written after the shard was removed")
	var same Digest
	for i := 0; ; i++ {
		other = fmt.Appendf(other[:35], " %d", i)
		if same = Sum(other); same.Hex()[:2] == r.Blob.Shard() {
			break
		}
	}
	w, err := b.PutBytes(ctx, other, ".txt")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.ReadAll(ctx, w.Blob); err != nil || !bytes.Equal(got, other) {
		t.Fatalf("read of a blob in a shard made anew = %q, %v", got, err)
	}
	if _, err := a.PutBytes(ctx, []byte("first writer writes again"), ".txt"); err != nil {
		t.Fatal(err)
	}
}

func TestParsePackName(t *testing.T) {
	d := Sum([]byte("x"))
	if got, err := ParsePackName(PackName(d)); err != nil || got != d {
		t.Errorf("ParsePackName(PackName) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "pack-.zst", "pack-" + d.Hex(), d.Hex() + ".zst", "pack-" + strings.ToUpper(d.Hex()) + ".zst", "pack-../x.zst"} {
		if _, err := ParsePackName(bad); err == nil {
			t.Errorf("ParsePackName(%q) succeeded", bad)
		}
	}
}

// DecodeFrame, given a buffer too small for a frame of small blobs, makes
// one that holds any such frame: a reader going through frames of
// different sizes makes one buffer, not one for each frame larger than the
// last.
func TestDecodeFrameGrowsTheBufferOnce(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	contents, _, info := packFixture(t, s)
	removeLoose(t, s, contents)
	sizes := map[int]int{} // frame of small blobs → its bytes
	for b, data := range contents {
		if _, e, ok := s.PackPosition(ctx, b); ok && len(data) > 0 && len(data) <= FrameSize/4 {
			data, err := s.DecodeFrame(ctx, info.Name, e.Frame, nil)
			if err != nil {
				t.Fatal(err)
			}
			sizes[e.Frame] = len(data)
		}
	}
	frames := slices.Collect(maps.Keys(sizes))
	slices.SortFunc(frames, func(a, b int) int { return sizes[a] - sizes[b] })
	if len(frames) < 2 || sizes[frames[0]] == sizes[frames[len(frames)-1]] {
		t.Fatalf("the fixture's frames of small blobs are %v bytes; want two of different sizes", sizes)
	}
	buf := make([]byte, 0, 1)
	for _, f := range frames { // the smallest first
		data, err := s.DecodeFrame(ctx, info.Name, f, buf)
		if err != nil {
			t.Fatal(err)
		}
		if cap(buf) > 1 && &data[:1][0] != &buf[:1][0] {
			t.Errorf("DecodeFrame of frame %d (%d bytes) made a new buffer; the one given, made for a smaller frame, held %d", f, len(data), cap(buf))
		}
		buf = data
	}
}

// PackPosition orders a pack's blobs as they are stored, and OpenPacked
// reads each from its pack, checked, without a file of its own; a frame of
// small blobs decoded by DecodeFrame holds each at its entry's place.
func TestPackPositionAndOpenPacked(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	contents, _, info := packFixture(t, s)
	removeLoose(t, s, contents)
	type at struct {
		frame int
		off   int64
	}
	seen := map[at]bool{}
	var buf []byte
	decoded := 0
	for b, data := range contents {
		pack, e, ok := s.PackPosition(ctx, b)
		if !ok || pack != info.Name || e.Blob != b || e.Size != int64(len(data)) {
			t.Fatalf("PackPosition(%s) = %q, %+v, %v; want %q, its entry of %d bytes", b.FileName(), pack, e, ok, info.Name, len(data))
		}
		frame, off := e.Frame, e.Offset
		if len(data) <= FrameSize/4 {
			frameBytes, err := s.DecodeFrame(ctx, pack, frame, buf)
			if err != nil {
				t.Fatalf("DecodeFrame(%s, %d) of %s: %v", pack, frame, b.FileName(), err)
			}
			if got := frameBytes[off : off+e.Size]; !bytes.Equal(got, data) {
				t.Fatalf("DecodeFrame(%s, %d): %s's %d bytes at %d differ", pack, frame, b.FileName(), e.Size, off)
			}
			buf = frameBytes
			decoded++
		} else if len(data) > FrameSize {
			if _, err := s.DecodeFrame(ctx, pack, frame, nil); err == nil || errors.Is(err, ErrNotFound) {
				t.Errorf("DecodeFrame of the frame of one large blob: %v; want an error saying it is not a frame of small blobs", err)
			}
		}
		if len(data) > 0 { // an empty blob takes no room
			if seen[at{frame, off}] {
				t.Errorf("two blobs at frame %d offset %d", frame, off)
			}
			seen[at{frame, off}] = true
		}
		r, err := s.OpenPacked(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("OpenPacked(%s): %d bytes, %v; want its %d bytes", b.FileName(), len(got), err, len(data))
		}
	}
	if decoded == 0 {
		t.Fatal("no blob of the fixture is in a frame of small blobs")
	}
	other := Blob{Digest: Sum([]byte("in no pack")), Ext: ".txt"}
	if _, _, ok := s.PackPosition(ctx, other); ok {
		t.Error("PackPosition found a blob no pack holds")
	}
	if _, err := s.DecodeFrame(ctx, "pack-"+strings.Repeat("0", 64)+".zst", 0, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("DecodeFrame of a pack not there: %v, want ErrNotFound", err)
	}
	if _, err := s.OpenPacked(ctx, other); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenPacked of a blob no pack holds: %v, want ErrNotFound", err)
	}
}

// PackedBytes gives a packed blob's bytes from its decoded frame, shared
// and unchecked, and CheckBytes tells them from anything else.
func TestPackedBytesAndCheckBytes(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	contents, _, _ := packFixture(t, s)
	removeLoose(t, s, contents)
	direct := 0
	for b, data := range contents {
		got, r, err := s.PackedBytes(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if r != nil {
			// A blob in a frame of its own streams.
			all, err := io.ReadAll(r)
			r.Close()
			if err != nil || !bytes.Equal(all, data) {
				t.Fatalf("PackedBytes(%s) as a Reader: %d bytes, %v", b.FileName(), len(all), err)
			}
			continue
		}
		direct++
		if !bytes.Equal(got, data) {
			t.Fatalf("PackedBytes(%s): %d bytes, want its %d", b.FileName(), len(got), len(data))
		}
		if err := CheckBytes(b, got); err != nil {
			t.Errorf("CheckBytes(%s) of its own bytes: %v", b.FileName(), err)
		}
		if len(got) > 0 {
			bad := append([]byte{got[0] ^ 1}, got[1:]...)
			if err := CheckBytes(b, bad); !errors.Is(err, ErrCorrupt) {
				t.Errorf("CheckBytes(%s) of other bytes: %v, want ErrCorrupt", b.FileName(), err)
			}
		}
	}
	if direct == 0 {
		t.Error("no blob came from a decoded frame")
	}
	other := Blob{Digest: Sum([]byte("in no pack")), Ext: ".txt"}
	if _, _, err := s.PackedBytes(ctx, other); !errors.Is(err, ErrNotFound) {
		t.Errorf("PackedBytes of a blob no pack holds: %v, want ErrNotFound", err)
	}
}

// PackPositionIn reads the table of contents of the pack it is told of,
// not every pack's, and finds a blob that pack does not hold as
// PackPosition does.
func TestPackPositionIn(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	first, err := s.PutBytes(ctx, []byte("first pack's blob\n"), ".txt")
	if err != nil {
		t.Fatal(err)
	}
	one, err := s.WritePack(ctx, []Blob{first.Blob})
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.PutBytes(ctx, []byte("second pack's blob\n"), ".txt")
	if err != nil {
		t.Fatal(err)
	}
	two, err := s.WritePack(ctx, []Blob{second.Blob})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := Open(ctx, s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	pack, e, ok := fresh.PackPositionIn(ctx, two.Name, second.Blob)
	if !ok || pack != two.Name || e.Blob != second.Blob {
		t.Fatalf("PackPositionIn(%s) = %q, %+v, %v; want its entry in %s", two.Name, pack, e, ok, two.Name)
	}
	if n := len(fresh.packs.loaded); n != 1 {
		t.Errorf("%d tables of contents read for a blob of a named pack, want 1", n)
	}
	for _, told := range []string{two.Name, "pack-" + strings.Repeat("0", 64) + ".zst", "../index.db", ""} {
		pack, e, ok := fresh.PackPositionIn(ctx, told, first.Blob)
		if !ok || pack != one.Name || e.Blob != first.Blob {
			t.Errorf("PackPositionIn(%q) of a blob of %s = %q, %+v, %v; want it found there", told, one.Name, pack, e, ok)
		}
	}
}

// LoadPackTables loads the named packs' tables of contents, several at
// once, and only theirs; a name that is no pack's, or a pack that is
// gone, is left alone. Loads racing each other keep one table a pack.
func TestLoadPackTables(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	var names []string
	var blobs []Blob
	for i := range 6 {
		b, err := s.PutBytes(ctx, []byte(fmt.Sprintf("blob of pack %d\n", i)), ".txt")
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.WritePack(ctx, []Blob{b.Blob})
		if err != nil {
			t.Fatal(err)
		}
		names, blobs = append(names, p.Name), append(blobs, b.Blob)
	}
	fresh, err := Open(ctx, s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	asked := append(slices.Clone(names[:4]), "pack-"+strings.Repeat("0", 64)+".zst", "../index.db", "")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { fresh.LoadPackTables(ctx, asked) })
	}
	wg.Wait()
	fresh.packs.mu.Lock()
	var loaded []string
	for name := range fresh.packs.loaded {
		loaded = append(loaded, name)
	}
	fresh.packs.mu.Unlock()
	slices.Sort(loaded)
	if want := slices.Sorted(slices.Values(names[:4])); !slices.Equal(loaded, want) {
		t.Errorf("tables loaded %q, want the 4 named packs' %q", loaded, want)
	}
	for i, b := range blobs {
		pack, e, ok := fresh.PackPositionIn(ctx, names[i], b)
		if !ok || pack != names[i] || e.Blob != b {
			t.Errorf("PackPositionIn(%s) = %q, %+v, %v; want its entry", names[i], pack, e, ok)
		}
	}
}

// A read of a packed blob that no loaded table of contents lists reads the
// table of the pack the PackHint names, and no other; a hint that names a
// pack not holding the blob, one not there, or none, costs a look at every
// pack, and the read still finds the blob.
func TestPackHint(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	contents := map[Blob][]byte{}
	var packs []string
	packOf := map[Blob]string{}
	for p := range 3 {
		var blobs []Blob
		for i := range 5 {
			data := []byte(fmt.Sprintf("blob %d of pack %d\n", i, p))
			r, err := s.PutBytes(ctx, data, ".txt")
			if err != nil {
				t.Fatal(err)
			}
			contents[r.Blob] = data
			blobs = append(blobs, r.Blob)
		}
		info, err := s.WritePack(ctx, blobs)
		if err != nil {
			t.Fatal(err)
		}
		packs = append(packs, info.Name)
		for _, b := range blobs {
			packOf[b] = info.Name
		}
	}
	removeLoose(t, s, contents)
	loaded := func(s *Store) []string {
		s.packs.mu.Lock()
		defer s.packs.mu.Unlock()
		return slices.Sorted(maps.Keys(s.packs.loaded))
	}
	for name, hint := range map[string]func(Blob) string{
		"right":        func(b Blob) string { return packOf[b] },
		"another pack": func(b Blob) string { return packs[(slices.Index(packs, packOf[b])+1)%len(packs)] },
		"a pack not there": func(b Blob) string {
			return "pack-" + strings.Repeat("0", 64) + ".zst"
		},
		"not a pack name": func(Blob) string { return "../../etc/passwd" },
		"none":            func(Blob) string { return "" },
	} {
		t.Run(name, func(t *testing.T) {
			for b, data := range contents {
				s2, err := Open(ctx, s.Dir())
				if err != nil {
					t.Fatal(err)
				}
				asked := 0
				s2.SetPackHint(func(_ context.Context, got Blob) string {
					asked++
					if got != b {
						t.Errorf("the hint was asked for %s, want %s", got, b)
					}
					return hint(b)
				})
				got, err := ReadBlob(ctx, s2, b)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("ReadBlob(%s) = %q, %v; want %q", b, got, err, data)
				}
				wantLoaded := packs
				if name == "right" {
					wantLoaded = []string{packOf[b]}
				}
				if l := loaded(s2); asked != 1 || !slices.Equal(l, slices.Sorted(slices.Values(wantLoaded))) {
					t.Errorf("reading %s of %s: the hint asked %d times, packs loaded %v; want once, %v", b, packOf[b], asked, l, wantLoaded)
				}
				s2.Close()
			}
		})
	}
}
