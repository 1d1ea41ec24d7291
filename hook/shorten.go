package hook

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"

	"github.com/toolcas/toolcas/policy"
)

// Shorten returns the pointer r in this hook's short form (WithShortPointers):
// the same references and metadata, its text naming each part's size and key
// where the full form gives a path and a preview. It is for a pointer whose
// preview the model has read already, which a compactor can then shrink
// without writing anything: the parts stay where they are, and every
// reference still reads them back.
//
// What each part is (kind, size) comes from the store the hook writes to
// (WithStore's, else the hook's), read in run. ok is false, with no error,
// when the hook leaves full pointers, r is not a pointer or records no
// references, the short form is the text r has already, or the store does
// not hold one of the parts in run (another store's or another run's
// pointer): r is then best left as it is. Any other failure to read is an
// error.
func (h *Hook) Shorten(ctx context.Context, run string, r Result) (Result, bool, error) {
	if !h.short || !IsPointer(r) {
		return r, false, nil
	}
	refs := References(r)
	if len(refs) == 0 {
		return r, false, nil
	}
	store := StoreFrom(ctx)
	if store == nil {
		store = h.store
	}
	if store == nil {
		return r, false, errors.New("no store: build the hook with one or pass one with WithStore")
	}
	infos := make([]PartInfo, len(refs))
	stored := make([]Stored, len(refs))
	for i, ref := range refs {
		name := ref.Key
		if name == "" {
			name = ref.Path
		}
		if name == "" {
			return r, false, nil
		}
		info, key, err := storedInfo(ctx, store, run, name)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrRefused) {
			return r, false, nil
		}
		if err != nil {
			return r, false, fmt.Errorf("shorten pointer: %w", err)
		}
		infos[i] = info
		// A reference recorded by path alone is named by the key the
		// store gives it.
		stored[i] = Stored{Key: cmp.Or(ref.Key, key, name)}
	}
	text := ShortPointer(infos, stored)
	if len(r.Parts) == 1 && r.Parts[0].Kind == KindText && r.Parts[0].Text == text {
		return r, false, nil
	}
	c := r
	c.Parts = []Part{Text(text)}
	c.Meta = maps.Clone(r.Meta)
	return c, true, nil
}

// storedInfo returns what a short pointer says of a stored part, and the
// part's key. A store that streams gives it without the bytes when it knows
// a text part's length in code points (Content.Chars); otherwise they are
// counted as they are read, in bounded memory.
func storedInfo(ctx context.Context, store Store, run, ref string) (PartInfo, string, error) {
	ss, ok := store.(StreamStore)
	if !ok {
		c, err := store.Read(ctx, run, ref)
		if err != nil {
			return PartInfo{}, "", err
		}
		info := PartInfo{Kind: c.Kind, MIME: c.MIME, Filename: c.Filename, Size: int64(len(c.Data))}
		if c.Kind == KindText {
			info.Chars = policy.TextSize(string(c.Data))
		}
		return info, c.Key, nil
	}
	c, rc, err := ss.OpenRead(ctx, run, ref)
	if err != nil {
		return PartInfo{}, "", err
	}
	defer rc.Close()
	info := PartInfo{Kind: c.Kind, MIME: c.MIME, Filename: c.Filename, Size: c.Size, Chars: int(c.Chars)}
	if c.Kind == KindText && c.Chars == 0 && c.Size > 0 {
		n, err := countRunes(rc)
		if err != nil {
			return PartInfo{}, "", fmt.Errorf("read %s: %w", ref, err)
		}
		info.Chars = n
	}
	return info, c.Key, nil
}

// countRunes counts the code points of r's bytes as policy.TextSize counts
// those of a string: an invalid byte counts as one.
func countRunes(r io.Reader) (int, error) {
	br := bufio.NewReaderSize(r, 32<<10)
	n := 0
	for {
		_, _, err := br.ReadRune()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}
