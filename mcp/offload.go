package mcp

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// toolResult is a tool result as the proxy reads it to offload, without
// decoding what it does not need: where each content item and each other
// field is, what each item holds.
type toolResult struct {
	items   []contentItem
	fields  []rawField // fields but content and _meta, in order
	meta    json.RawMessage
	isError bool
}

// rawField is a field of the result kept as it came.
type rawField struct {
	name  string
	at, n int64
}

// contentItem is one content block.
type contentItem struct {
	at, n int64 // the whole block
	typ   string
	mime  string
	uri   string
	// payload is the string literal of its text or base64 payload, and
	// text says which.
	payload    span
	text, blob bool
}

type span struct{ at, n int64 }

// metaMax bounds a result's _meta, which the proxy decodes to add its own.
const metaMax = 1 << 20

// walkResult reads a result's structure, the n bytes at off of src.
func walkResult(src io.ReaderAt, off, n int64) (*toolResult, error) {
	r := &toolResult{}
	s := newScanner(io.NewSectionReader(src, off, n), off)
	err := s.object(func(k string) error {
		switch k {
		case "content":
			return s.array(func(int) error {
				it, err := walkItem(s)
				r.items = append(r.items, it)
				return err
			})
		case "_meta":
			raw, over, err := s.capture(metaMax)
			if over {
				return fmt.Errorf("a _meta of more than %d bytes", metaMax)
			}
			r.meta = raw
			return err
		case "isError":
			raw, _, err := s.capture(16)
			r.isError = string(raw) == "true"
			return err
		}
		if _, err := s.peek(); err != nil {
			return s.eof(err)
		}
		at := s.off
		err := s.copyValue(io.Discard)
		r.fields = append(r.fields, rawField{name: k, at: at, n: s.off - at})
		return err
	})
	return r, err
}

// walkItem reads one content block.
func walkItem(s *scanner) (contentItem, error) {
	var it contentItem
	if _, err := s.peek(); err != nil {
		return it, s.eof(err)
	}
	it.at = s.off
	str := func(max int, into *string) error {
		raw, over, err := s.capture(max)
		if err == nil && !over {
			json.Unmarshal(raw, into)
		}
		return err
	}
	payload := func(text bool) error {
		c, err := s.peek()
		if err != nil {
			return s.eof(err)
		}
		at := s.off
		if err := s.copyValue(io.Discard); err != nil {
			return err
		}
		if c == '"' {
			it.payload, it.text, it.blob = span{at, s.off - at}, text, !text
		}
		return nil
	}
	err := s.object(func(k string) error {
		switch k {
		case "type":
			return str(256, &it.typ)
		case "mimeType":
			return str(hook.MaxMIMEBytes+64, &it.mime)
		case "text":
			return payload(true)
		case "data":
			return payload(false)
		case "resource":
			if c, err := s.peek(); err != nil || c != '{' {
				return s.copyValue(io.Discard)
			}
			return s.object(func(k string) error {
				switch k {
				case "uri":
					return str(64<<10, &it.uri)
				case "mimeType":
					return str(hook.MaxMIMEBytes+64, &it.mime)
				case "text":
					return payload(true)
				case "blob":
					return payload(false)
				}
				return s.copyValue(io.Discard)
			})
		}
		return s.copyValue(io.Discard)
	})
	it.n = s.off - it.at
	return it, err
}

// stored reports whether the hook stores the block, and as what kind.
func (it *contentItem) stored() (hook.Kind, bool) {
	switch {
	case it.payload.n == 0:
		return "", false
	case it.typ == "text" && it.text:
		return hook.KindText, true
	case it.typ == "image" && it.blob:
		return hook.KindImage, true
	case it.typ == "audio" && it.blob:
		return hook.KindFile, true
	case it.typ == "resource" && it.text:
		return hook.KindText, true
	case it.typ == "resource" && it.blob:
		return hook.KindFile, true
	}
	return "", false
}

// offload sends a tool result through the hook: the client gets a pointer
// for one its policy picks, else the result as it came. An error result, a
// result with nothing to store, and one the proxy cannot read pass
// untouched, as does every field but content. If the store fails, the
// client gets the result as it came, and the failure is logged: losing a
// tool's answer would be worse than a long one.
func (l *link) offload(m *message, c *call) *message {
	// src holds the result: the message's bytes in memory, or its spool.
	var src io.ReaderAt
	var off, n int64
	if m.pieces == nil {
		src, off, n = bytes.NewReader(m.env.Result), 0, int64(len(m.env.Result))
	} else {
		src, off, n = m.spool.f, m.env.valueAt, m.env.valueLen
	}
	leave := func(why string, args ...any) *message {
		if why != "" {
			l.p.log.Warn(fmt.Sprintf("toolcas: %s: result of %s left in the conversation: %s", l.run, c.tool, fmt.Sprintf(why, args...)))
		}
		return m
	}
	res, err := walkResult(src, off, n)
	if err != nil {
		return leave("it is not a tool result the proxy can read: %v", err)
	}
	if res.isError {
		return m
	}
	var meta map[string]any
	if len(res.meta) > 0 && json.Unmarshal(res.meta, &meta) != nil {
		return leave("its _meta is not an object")
	}
	var parts []hook.Part
	var partOf []int // the block each part comes from
	for i := range res.items {
		it := &res.items[i]
		kind, ok := it.stored()
		if !ok {
			continue
		}
		p, err := l.part(src, it, kind, m.pieces != nil)
		if err != nil {
			return leave("content block %d: %v", i, err)
		}
		parts = append(parts, p)
		partOf = append(partOf, i)
	}
	if len(parts) == 0 {
		return m
	}
	r := hook.Result{Tool: c.tool, CallID: l.callID, Arguments: c.args, Parts: parts, Meta: meta}
	out, err := l.p.hook.Offload(hook.WithStore(l.ctx, l.p.store), hook.Step{Run: l.run, Number: c.step}, []hook.Result{r})
	if err != nil {
		l.p.log.Error(fmt.Sprintf("toolcas: %s: result of %s left in the conversation: %v", l.run, c.tool, err))
		return m
	}
	if !hook.IsPointer(out[0]) {
		return m
	}
	return l.pointer(m, c, src, res, parts, partOf, out[0])
}

// part returns a block's content as a part to store: decoded in memory for
// a message held in memory, else a Source that decodes it from the spool
// as the store reads it.
func (l *link) part(src io.ReaderAt, it *contentItem, kind hook.Kind, spooled bool) (hook.Part, error) {
	p := hook.Part{Kind: kind, MIME: it.mime}
	if it.typ == "resource" {
		p.Filename = uriBase(it.uri)
	}
	if p.Kind == hook.KindText && it.typ == "text" {
		p.MIME = ""
	}
	if !spooled {
		var b bytes.Buffer
		s := newScanner(io.NewSectionReader(src, it.payload.at, it.payload.n), it.payload.at)
		if err := s.decodeString(&b); err != nil {
			return p, err
		}
		if p.Kind == hook.KindText {
			p.Text = b.String()
			return p, nil
		}
		data, err := base64.StdEncoding.DecodeString(b.String())
		if err != nil {
			return p, fmt.Errorf("its %s payload is not valid base64: %v", it.typ, err)
		}
		p.Data = data
		return p, nil
	}
	srcOf := &spanSource{src: src, span: it.payload, b64: p.Kind != hook.KindText}
	if err := srcOf.measure(); err != nil {
		if srcOf.b64 {
			return p, fmt.Errorf("its %s payload is not valid base64: %v", it.typ, err)
		}
		return p, err
	}
	p.Source = &hook.Source{Open: srcOf.open, Size: srcOf.size, Chars: srcOf.chars, Head: srcOf.head, Tail: srcOf.tail}
	return p, nil
}

// spanSource is a string of a spooled message, decoded as it is read: the
// text itself, or, with b64, the bytes its base64 stands for.
type spanSource struct {
	src   io.ReaderAt
	span  span
	b64   bool
	size  int64
	chars int64
	head  []byte
	tail  []byte // the last hook.HeadLen bytes of a text, for head_tail previews
}

func (s *spanSource) open() (io.ReadCloser, error) {
	pr, pw := io.Pipe()
	go func() {
		sc := newScanner(io.NewSectionReader(s.src, s.span.at, s.span.n), s.span.at)
		// Decoded text comes in short runs between escapes: gather them.
		bw := bufio.NewWriterSize(pw, 64<<10)
		err := sc.decodeString(bw)
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	if !s.b64 {
		return pr, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{base64.NewDecoder(base64.StdEncoding, pr), pr}, nil
}

// measure reads the content once for its size, code points, head and (of
// a text) tail.
func (s *spanSource) measure() error {
	rc, err := s.open()
	if err != nil {
		return err
	}
	defer rc.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := rc.Read(buf)
		chunk := buf[:n]
		if room := hook.HeadLen - len(s.head); room > 0 {
			s.head = append(s.head, chunk[:min(room, n)]...)
		}
		s.size += int64(n)
		if !s.b64 {
			s.tail = append(s.tail, chunk...)
			if len(s.tail) > 2*hook.HeadLen {
				s.tail = append(s.tail[:0], s.tail[len(s.tail)-hook.HeadLen:]...)
			}
			for _, c := range chunk {
				if c&0xC0 != 0x80 { // decoded text is UTF-8: count the starts
					s.chars++
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if s.b64 {
		s.chars = int64(policy.BinarySize(int(s.size)))
	}
	if len(s.tail) > hook.HeadLen {
		s.tail = s.tail[len(s.tail)-hook.HeadLen:]
	}
	return nil
}

// pointer builds the answer that replaces an offloaded result: the
// pointer's text, a resource link for each part it lists, the blocks kept
// as they came, every other field as it came, and _meta with the records
// of the parts it lists. However many parts, it stays small: the pointer
// lists at most hook.MaxPointerParts and sums up the rest.
func (l *link) pointer(m *message, c *call, src io.ReaderAt, res *toolResult, parts []hook.Part, partOf []int, out hook.Result) *message {
	refs := hook.References(out)
	listed := min(len(refs), hook.MaxPointerParts)
	for {
		msg, small := l.pointerListing(m, c, res, parts, partOf, out, refs, listed)
		if small || listed <= 1 || msg == m {
			if msg != m {
				m.release()
			}
			return msg
		}
		msg.release()
		listed /= 2
	}
}

// MaxPointerBytes bounds a pointer with its links and _meta, whatever the
// number of parts: past it, links and records go to fewer parts.
const MaxPointerBytes = 16 << 10

// pointerListing builds the pointer with links and records for the first
// listed parts, and reports whether it is within MaxPointerBytes (or would
// be, but for the kept blocks and fields, which are the upstream's).
func (l *link) pointerListing(m *message, c *call, res *toolResult, parts []hook.Part, partOf []int, out hook.Result, refs []hook.Reference, listed int) (*message, bool) {
	meta := maps.Clone(out.Meta)
	recs := make([]map[string]any, listed)
	for i, ref := range refs[:listed] {
		recs[i] = map[string]any{"key": ref.Key, "path": ref.Path, "digest": ref.Digest, "uri": ResourceURI(ref.Key)}
	}
	meta[hook.MetaKey] = recs
	if len(refs) > listed {
		meta[MetaPartsKey] = len(refs)
	}
	// Pieces of the new message: what is built here, and what is kept,
	// from the message's memory or its spool.
	var ps []piece
	add := func(b []byte) { ps = append(ps, piece{data: b}) }
	kept := 0
	keep := func(at, n int64) {
		if m.pieces == nil {
			ps = append(ps, piece{data: m.env.Result[at : at+n]})
			kept += int(n)
		} else {
			ps = append(ps, piece{sp: m.spool, off: at, n: n})
		}
	}
	mustJSON := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return b
	}
	own := 0 // bytes of the pointer's own making
	add([]byte(`{"jsonrpc":"2.0","id":`))
	add(bytes.TrimSpace(m.env.ID))
	add([]byte(`,"result":{"content":[`))
	add(mustJSON(&sdk.TextContent{Text: out.Parts[0].Text}))
	if l.p.links {
		for i, ref := range refs[:listed] {
			p := parts[i]
			size := int64(len(p.Data)) + int64(len(p.Text))
			if p.Source != nil {
				size = p.Source.Size
			}
			add([]byte(","))
			add(mustJSON(&sdk.ResourceLink{URI: ResourceURI(ref.Key), Name: ref.Key, MIMEType: mimeOf(p.Kind, p.MIME), Size: &size,
				Description: "offloaded part; read it with the read-back tool or resources/read"}))
		}
	}
	stored := map[int]bool{}
	for _, i := range partOf {
		stored[i] = true
	}
	for i, it := range res.items {
		if !stored[i] {
			add([]byte(","))
			keep(it.at, it.n)
		}
	}
	add([]byte("]"))
	for _, f := range res.fields {
		add([]byte(","))
		add(mustJSON(f.name))
		add([]byte(":"))
		keep(f.at, f.n)
	}
	add([]byte(`,"_meta":`))
	add(mustJSON(meta))
	add([]byte("}}"))
	for _, p := range ps {
		if p.sp == nil {
			own += len(p.data)
		}
	}
	var msg *message
	if m.pieces == nil {
		var b bytes.Buffer
		for _, p := range ps {
			b.Write(p.data)
		}
		var err error
		if msg, err = memMessage(b.Bytes()); err != nil {
			l.p.log.Error(fmt.Sprintf("toolcas: %s: the pointer to %s's result is not valid JSON-RPC: %v", l.run, c.tool, err))
			return m, true
		}
	} else {
		msg = &message{pieces: ps, spool: m.spool, env: envelope{ID: m.env.ID, Result: json.RawMessage("{}")}}
		for _, p := range ps {
			msg.size += p.len()
		}
		m.spool.retain()
	}
	msg.related = m.related
	return msg, own-kept <= MaxPointerBytes
}

// MetaPartsKey is the _meta key under which a pointer to a result of more
// parts than it lists gives how many parts were offloaded in all.
const MetaPartsKey = "tool_result_offloaded_parts"
