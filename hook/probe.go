package hook

import (
	"mime"
	"strings"
	"unicode/utf8"
)

// sniffLen is how many leading bytes a ContentProbe keeps to sniff a type.
const sniffLen = 3072

// ContentProbe watches content stream past (it is an io.Writer, for an
// io.TeeReader) and decides, once it has all gone by, what part it was: text
// when no MIME type or a text/* one was given and the bytes were UTF-8,
// else an image (image/*) or a file, and which extension it is stored
// under. It holds a few kilobytes whatever the size of the content.
type ContentProbe struct {
	mime, filename string
	head           []byte
	pending        []byte // an incomplete UTF-8 sequence at the end of the last write
	valid          bool
	chars          int64
}

// NewContentProbe returns a probe for content the tool described with a MIME
// type and a file name, either of which may be empty.
func NewContentProbe(mimeType, filename string) *ContentProbe {
	return &ContentProbe{mime: mimeType, filename: filename, valid: true}
}

// CheckMIME reports whether the given MIME type is one the hook accepts.
func (c *ContentProbe) CheckMIME() error {
	return checkParts([]Part{{Kind: KindFile, MIME: c.mime, Filename: c.filename}})
}

// Write observes the next bytes; it never fails.
func (c *ContentProbe) Write(p []byte) (int, error) {
	n := len(p)
	if len(c.head) < sniffLen {
		c.head = append(c.head, p[:min(len(p), sniffLen-len(c.head))]...)
	}
	if !c.valid {
		return n, nil
	}
	if len(c.pending) > 0 {
		need := seqLen(c.pending[0])
		take := min(need-len(c.pending), len(p))
		c.pending = append(c.pending, p[:take]...)
		p = p[take:]
		if len(c.pending) < need {
			return n, nil
		}
		if !utf8.Valid(c.pending) {
			c.valid = false
			return n, nil
		}
		c.chars++
		c.pending = c.pending[:0]
	}
	tail := incompleteTail(p)
	body := p[:len(p)-tail]
	if !utf8.Valid(body) {
		c.valid = false
		return n, nil
	}
	c.chars += int64(utf8.RuneCount(body))
	c.pending = append(c.pending, p[len(p)-tail:]...)
	return n, nil
}

// seqLen is the length of the UTF-8 sequence a leading byte starts, 1 for
// a byte that cannot start one (which makes it invalid).
func seqLen(b byte) int {
	switch {
	case b >= 0xF0 && b <= 0xF7:
		return 4
	case b >= 0xE0:
		return 3
	case b >= 0xC0:
		return 2
	}
	return 1
}

// incompleteTail returns how many bytes at the end of p start a UTF-8
// sequence that continues in the next write.
func incompleteTail(p []byte) int {
	for i := 1; i <= 3 && i <= len(p); i++ {
		b := p[len(p)-i]
		if b < 0x80 {
			return 0
		}
		if b >= 0xC0 {
			if seqLen(b) > i {
				return i
			}
			return 0
		}
	}
	return 0
}

// isText reports whether the content was text: UTF-8, with no MIME type or a
// text one.
func (c *ContentProbe) isText() bool {
	if !c.valid || len(c.pending) > 0 {
		return false
	}
	if c.mime == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(c.mime)
	return err == nil && strings.HasPrefix(mt, "text/")
}

// Part returns the part the content was, holding only its first bytes.
func (c *ContentProbe) Part() Part {
	if c.isText() {
		return Part{Kind: KindText, MIME: c.mime, Filename: c.filename}
	}
	kind := KindFile
	if mt, _, err := mime.ParseMediaType(c.mime); err == nil && strings.HasPrefix(mt, "image/") {
		kind = KindImage
	}
	return Part{Kind: kind, MIME: c.mime, Filename: c.filename, Data: c.head}
}

// Ext returns the extension the content is stored under (see ChooseExt).
func (c *ContentProbe) Ext() string {
	return ChooseExt(c.Part())
}

// Info returns what a pointer says about the content, which was size bytes.
func (c *ContentProbe) Info(size int64) PartInfo {
	p := c.Part()
	i := PartInfo{Kind: p.Kind, MIME: p.MIME, Filename: p.Filename, Size: size}
	if p.Kind == KindText {
		i.Chars = int(c.chars)
		// The kept head may end inside a character; a preview stops before it.
		i.Start = strings.ToValidUTF8(string(c.head[:validPrefix(c.head)]), "")
	}
	return i
}

// validPrefix returns the length of b without an incomplete UTF-8 sequence
// at its end.
func validPrefix(b []byte) int {
	return len(b) - incompleteTail(b)
}

// Chars returns the content's code points when it was text, else 0.
func (c *ContentProbe) Chars() int64 {
	if c.isText() {
		return c.chars
	}
	return 0
}
