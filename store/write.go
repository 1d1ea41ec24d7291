package store

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unsafe"

	"github.com/gabriel-vasile/mimetype"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
)

// Write stores a step's parts: every blob durably, then every row in one
// transaction. A key that the same call wrote before gets a new version; a
// key that another call of the run wrote is not reused, the part gets
// key~2 (see index.Record). It implements hook.Store.
func (s *Store) Write(ctx context.Context, items []hook.Item) ([]hook.Stored, error) {
	e, err := s.writer("write")
	if err != nil {
		return nil, err
	}
	parts := make([]index.NewPart, len(items))
	data := make([][]byte, len(items))
	streamed := false
	for i, it := range items {
		if parts[i], data[i], err = newPart(it); err != nil {
			return nil, err
		}
		streamed = streamed || it.Part.Source != nil
	}
	var (
		puts []cas.PutResult
		recs []index.Recorded
	)
	if streamed {
		puts, recs, err = s.writeStreamed(ctx, e, items, parts, data)
	} else {
		puts, recs, err = e.write(ctx, parts, data)
	}
	if err != nil {
		return nil, err
	}
	out := make([]hook.Stored, len(items))
	for i := range items {
		out[i] = s.stored(puts[i], recs[i])
	}
	s.afterWrite()
	return out, nil
}

// newPart describes an item to the index, its blob's digest still unset,
// and returns its content; what the index would refuse is refused here,
// before any blob is written.
func newPart(it hook.Item) (index.NewPart, []byte, error) {
	k, p := it.Key, it.Part
	if err := k.Check(); err != nil {
		return index.NewPart{}, nil, err
	}
	data := p.Data
	var chars int64
	if p.Kind == hook.KindText {
		data = textBytes(p.Text)
		chars = int64(hook.CharsOf(it))
	}
	size := int64(len(data))
	if p.Source != nil {
		data, size, chars = nil, p.Source.Size, 0
		if p.Kind == hook.KindText {
			chars = p.Source.Chars
		}
	}
	np := keyPart(k, p.Kind, p.MIME, p.Filename)
	np.Bytes, np.Chars, np.Blob.Ext, np.RunTTL = size, chars, k.Ext, it.RunTTL
	if err := index.CheckPart(np); err != nil {
		return index.NewPart{}, nil, err
	}
	return np, data, nil
}

// writeStreamed is Write for a step with a part whose content comes from a
// Source: every part is staged first (a Source read in bounded memory,
// checked against its size), then, under the engine's guard, every blob is
// put and every row recorded in one transaction, as Write does.
func (s *Store) writeStreamed(ctx context.Context, e engine, items []hook.Item, parts []index.NewPart, data [][]byte) ([]cas.PutResult, []index.Recorded, error) {
	sts := make([]staged, 0, len(items))
	defer func() {
		for _, st := range sts {
			st.discard()
		}
	}()
	for i, it := range items {
		st, err := stagePart(ctx, e, it, data[i])
		if err != nil {
			return nil, nil, err
		}
		sts = append(sts, st)
	}
	var (
		puts []cas.PutResult
		recs []index.Recorded
	)
	err := e.guard(ctx, func(ctx context.Context) ([]cas.PutResult, error) {
		for _, st := range sts {
			put, err := st.put(ctx)
			if err != nil {
				return puts, err
			}
			puts = append(puts, put)
		}
		return puts, nil
	}, func(ctx context.Context) (err error) {
		for i := range parts {
			parts[i].Blob = puts[i].Blob
		}
		recs, err = s.ix.Record(ctx, parts)
		return err
	})
	return puts, recs, err
}

// stagePart stages one part of a streamed write: its Source, or data.
func stagePart(ctx context.Context, e engine, it hook.Item, data []byte) (staged, error) {
	ext := func() (string, error) { return it.Key.Ext, nil }
	src := it.Part.Source
	if src == nil {
		return e.stage(ctx, bytes.NewReader(data), ext)
	}
	rc, err := src.Open()
	if err != nil {
		return nil, fmt.Errorf("key %s: open its content: %w", it.Key, err)
	}
	defer rc.Close()
	cr := &countingReader{r: rc}
	st, err := e.stage(ctx, cr, ext)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", it.Key, err)
	}
	if cr.n != src.Size {
		st.discard()
		return nil, fmt.Errorf("key %s: its source said %d bytes and gave %d", it.Key, src.Size, cr.n)
	}
	return st, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// keyPart describes a part of key k to the index, without its sizes and
// blob.
func keyPart(k hook.Key, kind hook.Kind, mime, filename string) index.NewPart {
	return index.NewPart{
		Key: k.String(), Run: k.Run, Step: k.Step, Tool: k.Tool, CallID: k.CallID, Part: k.Part,
		Kind: kindOf(kind), MIME: mime, Filename: filename,
	}
}

// kindOf is the index's kind of a part: text unless an image or a file.
func kindOf(k hook.Kind) catalog.Kind {
	switch k {
	case hook.KindImage:
		return catalog.KindImage
	case hook.KindFile:
		return catalog.KindFile
	}
	return catalog.KindText
}

// stored says where a write put a part.
func (s *Store) stored(put cas.PutResult, rec index.Recorded) hook.Stored {
	return hook.Stored{
		Key: rec.Key, Path: s.Path(put.Blob), Digest: put.Blob.Digest,
		Version: rec.Version, SameAs: rec.SameAs, Dedup: put.Existed,
	}
}

// textBytes returns the bytes of text without copying them. Nothing that
// a write hands them to (hashing, a file's or an object's write, a
// comparison with stored bytes) writes into them, and nothing may: they
// are the string's own memory.
func textBytes(text string) []byte {
	return unsafe.Slice(unsafe.StringData(text), len(text))
}

// StreamPart describes a part that Put reads from a stream.
type StreamPart struct {
	// Key is the part's key; its Ext is ignored and chosen from the content.
	Key hook.Key
	// MIME and Filename are as the tool gave them, either may be empty.
	MIME     string
	Filename string
	// RunTTL is the run's own retention, as hook.Step.TTL gives it; 0
	// leaves the run's as it is.
	RunTTL time.Duration
}

// PutResult says what Put stored.
type PutResult struct {
	hook.Stored
	// Blob is the blob the part is stored in.
	Blob cas.Blob
	// Info is what a pointer says about the part.
	Info  hook.PartInfo
	Kind  hook.Kind
	MIME  string
	Size  int64
	Chars int64
}

// Put stores one part read from r, streaming, in bounded memory whatever its
// size. The part is text when no MIME type, or a text/* one, is given and
// the bytes are UTF-8; otherwise an image (image/*) or a file.
//
// Without a MIME type, Put sniffs the first bytes: content with a known
// signature that is not text, such as a PNG or a PDF, gets the type it
// shows, so a PNG is an image.
//
// The content arrives at the producer's pace, staged where gc leaves it
// alone; the write is guarded from gc only once every byte is there.
func (s *Store) Put(ctx context.Context, sp StreamPart, r io.Reader) (PutResult, error) {
	e, err := s.writer("put")
	if err != nil {
		return PutResult{}, err
	}
	if sp.MIME == "" {
		br := bufio.NewReaderSize(r, sniffLen)
		head, _ := br.Peek(sniffLen) // a short read sniffs what there is; Put sees any error again
		sp.MIME = SniffMIME(head)
		r = br
	}
	probe := hook.NewContentProbe(sp.MIME, sp.Filename)
	k := sp.Key
	k.Ext = ".txt" // checked now; the real one is chosen from the content
	if err := k.Check(); err != nil {
		return PutResult{}, err
	}
	if err := probe.CheckMIME(); err != nil {
		return PutResult{}, err
	}
	if sp.RunTTL < 0 {
		return PutResult{}, fmt.Errorf("put: negative run ttl %v", sp.RunTTL)
	}
	st, err := e.stage(ctx, io.TeeReader(r, probe), func() (string, error) { return probe.Ext(), nil })
	if err != nil {
		return PutResult{}, err
	}
	defer st.discard()
	part := probe.Part()
	var (
		res cas.PutResult
		rec []index.Recorded
	)
	err = e.guard(ctx, func(ctx context.Context) ([]cas.PutResult, error) {
		res, err = st.put(ctx)
		return []cas.PutResult{res}, err
	}, func(ctx context.Context) error {
		k.Ext = res.Blob.Ext
		np := keyPart(k, part.Kind, part.MIME, part.Filename)
		np.Bytes, np.Chars, np.Blob, np.RunTTL = res.Size, probe.Chars(), res.Blob, sp.RunTTL
		rec, err = s.ix.Record(ctx, []index.NewPart{np})
		return err
	})
	if err != nil {
		return PutResult{}, err
	}
	s.afterWrite()
	return PutResult{
		Stored: s.stored(res, rec[0]), Blob: res.Blob,
		Info: probe.Info(res.Size), Kind: part.Kind, MIME: part.MIME, Size: res.Size, Chars: probe.Chars(),
	}, nil
}

// sniffLen is how many first bytes SniffMIME looks at.
const sniffLen = 3072

// SniffMIME returns the MIME type the first bytes of some content show when
// they show one that is not text, else "": text stays text, and content of
// no known type stays a file with no type.
func SniffMIME(head []byte) string {
	if len(head) == 0 {
		return ""
	}
	m := mimetype.Detect(head)
	for t := m; t != nil; t = t.Parent() {
		if t.Is("text/plain") {
			return ""
		}
	}
	if m.Is("application/octet-stream") {
		return ""
	}
	mt, _, _ := strings.Cut(m.String(), ";")
	return mt
}
