package mcp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner reads JSON from a stream a token at a time, knowing the offset
// of every byte, so that a message too large to hold can be walked, its
// small values captured, its large ones skipped or decoded as they stream.
// It checks the syntax only as far as walking needs: what it captures is
// checked again when decoded.
type scanner struct {
	r   *bufio.Reader
	off int64 // offset of the next byte, from where the scanner started
}

func newScanner(r io.Reader, off int64) *scanner {
	return &scanner{r: bufio.NewReaderSize(r, 64<<10), off: off}
}

// errSyntax is wrapped by every error of malformed JSON.
var errSyntax = errors.New("malformed JSON")

func (s *scanner) syntax(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", errSyntax, s.off, fmt.Sprintf(format, args...))
}

// eof turns the end of the stream inside a value into a syntax error.
func (s *scanner) eof(err error) error {
	if err == io.EOF {
		return s.syntax("unexpected end")
	}
	return err
}

// peek returns the next byte that is not white space, without taking it.
func (s *scanner) peek() (byte, error) {
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			s.r.UnreadByte()
			return c, nil
		}
		s.off++
	}
}

// take takes the next byte, which peek returned.
func (s *scanner) take() {
	s.r.ReadByte()
	s.off++
}

// expect takes the next byte that is not white space, which must be c.
func (s *scanner) expect(c byte) error {
	got, err := s.peek()
	if err != nil {
		return s.eof(err)
	}
	if got != c {
		return s.syntax("%q where %q belongs", got, c)
	}
	s.take()
	return nil
}

// copyValue copies the next value to w, as it is but for the white space
// between its tokens. w may be io.Discard to skip it.
func (s *scanner) copyValue(w io.Writer) error {
	depth := 0
	for {
		c, err := s.peek()
		if err != nil {
			return s.eof(err)
		}
		switch c {
		case '{', '[':
			s.take()
			w.Write([]byte{c})
			depth++
			continue
		case '}', ']':
			if depth == 0 {
				return s.syntax("%q where a value belongs", c)
			}
			s.take()
			w.Write([]byte{c})
			depth--
		case ',', ':':
			if depth == 0 {
				return s.syntax("%q where a value belongs", c)
			}
			s.take()
			w.Write([]byte{c})
			continue
		case '"':
			if err := s.copyString(w); err != nil {
				return err
			}
		default:
			if err := s.copyLiteral(w); err != nil {
				return err
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// copyLiteral copies a number, true, false or null.
func (s *scanner) copyLiteral(w io.Writer) error {
	n := 0
	for {
		c, err := s.r.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '+' || c == '.') {
			s.r.UnreadByte()
			break
		}
		s.off++
		n++
		w.Write([]byte{c})
	}
	if n == 0 {
		c, _ := s.r.ReadByte()
		return s.syntax("unexpected %q", c)
	}
	return nil
}

// copyString copies a string, quotes and escapes as they are.
func (s *scanner) copyString(w io.Writer) error {
	if err := s.expect('"'); err != nil {
		return err
	}
	w.Write([]byte{'"'})
	escaped := false
	for {
		buf, err := s.r.Peek(max(1, s.r.Buffered()))
		if len(buf) == 0 {
			return s.eof(err)
		}
		for i, c := range buf {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				w.Write(buf[:i+1])
				s.r.Discard(i + 1)
				s.off += int64(i + 1)
				return nil
			}
		}
		w.Write(buf)
		s.r.Discard(len(buf))
		s.off += int64(len(buf))
	}
}

// capture returns the next value's bytes if they are at most max long,
// else skips it and reports it too long.
func (s *scanner) capture(max int) ([]byte, bool, error) {
	w := &capped{max: max}
	err := s.copyValue(w)
	return w.buf, w.over, err
}

// capped keeps what is written to it up to max bytes, and notes more.
type capped struct {
	buf  []byte
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if !c.over {
		if len(c.buf)+len(p) > c.max {
			c.over, c.buf = true, nil
		} else {
			c.buf = append(c.buf, p...)
		}
	}
	return len(p), nil
}

// key reads an object's key and its colon. A key over 4 KiB is returned
// cut short: no key this package looks for is that long.
func (s *scanner) key() (string, error) {
	c, err := s.peek()
	if err != nil {
		return "", s.eof(err)
	}
	if c != '"' {
		return "", s.syntax("%q where a key belongs", c)
	}
	w := &capped{max: 4 << 10}
	if err := s.decodeString(w); err != nil {
		return "", err
	}
	return string(w.buf), s.expect(':')
}

// object walks an object, calling fn with each key, the scanner placed at
// the key's value, which fn must take (copyValue to io.Discard, say).
func (s *scanner) object(fn func(key string) error) error {
	return s.sequence('{', '}', func(int) error {
		k, err := s.key()
		if err != nil {
			return err
		}
		return fn(k)
	})
}

// array walks an array, calling fn with the scanner placed at each item,
// which fn must take.
func (s *scanner) array(fn func(i int) error) error {
	return s.sequence('[', ']', fn)
}

// sequence walks what lies between open and end, items separated by
// commas, calling item for each, which must take it.
func (s *scanner) sequence(open, end byte, item func(i int) error) error {
	if err := s.expect(open); err != nil {
		return err
	}
	if c, err := s.peek(); err != nil {
		return s.eof(err)
	} else if c == end {
		s.take()
		return nil
	}
	for i := 0; ; i++ {
		if err := item(i); err != nil {
			return err
		}
		c, err := s.peek()
		if err != nil {
			return s.eof(err)
		}
		s.take()
		switch c {
		case ',':
		case end:
			return nil
		default:
			return s.syntax("%q where ',' or '%c' belongs", c, end)
		}
	}
}

// decodeString decodes the next value, which must be a string, writing its
// text to w as UTF-8: escapes resolved, and each byte that is not UTF-8 (or
// half a surrogate pair) replaced by U+FFFD, as encoding/json does.
func (s *scanner) decodeString(w io.Writer) error {
	if err := s.expect('"'); err != nil {
		return err
	}
	var utf [utf8.UTFMax]byte
	for {
		buf, err := s.r.Peek(max(1, s.r.Buffered()))
		if len(buf) == 0 {
			return s.eof(err)
		}
		// The longest run of bytes that stand for themselves.
		i := 0
		for i < len(buf) {
			c := buf[i]
			if c < utf8.RuneSelf {
				if c == '"' || c == '\\' || c < 0x20 {
					break
				}
				i++
				continue
			}
			r, size := utf8.DecodeRune(buf[i:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			i += size
		}
		if i > 0 {
			if _, err := w.Write(buf[:i]); err != nil {
				return err
			}
			s.r.Discard(i)
			s.off += int64(i)
			continue
		}
		c := buf[0]
		switch {
		case c == '"':
			s.take()
			return nil
		case c < 0x20:
			return s.syntax("control character %#x in a string", c)
		case c == '\\':
			r, err := s.escape()
			if err != nil {
				return err
			}
			n := utf8.EncodeRune(utf[:], r)
			if _, err := w.Write(utf[:n]); err != nil {
				return err
			}
		default:
			// Not UTF-8, or a code point the buffer cut: look at enough.
			more, _ := s.r.Peek(utf8.UTFMax)
			if _, size := utf8.DecodeRune(more); size > 1 {
				continue // whole now: the next pass takes it
			}
			s.take()
			n := utf8.EncodeRune(utf[:], utf8.RuneError)
			if _, err := w.Write(utf[:n]); err != nil {
				return err
			}
		}
	}
}

// escape reads one escape sequence, the backslash included, and the low
// half of a surrogate pair that follows a high one.
func (s *scanner) escape() (rune, error) {
	s.take()
	c, err := s.r.ReadByte()
	if err != nil {
		return 0, s.eof(err)
	}
	s.off++
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
	default:
		return 0, s.syntax("invalid escape \\%c", c)
	}
	r, err := s.hex4()
	if err != nil {
		return 0, err
	}
	if !utf16.IsSurrogate(r) {
		return r, nil
	}
	// A high half takes the low half that follows it; anything else is
	// left to be read on its own, as encoding/json leaves it.
	if next, _ := s.r.Peek(6); len(next) == 6 && next[0] == '\\' && next[1] == 'u' {
		if lo, ok := parseHex4(next[2:]); ok {
			if dec := utf16.DecodeRune(r, lo); dec != utf8.RuneError {
				s.r.Discard(6)
				s.off += 6
				return dec, nil
			}
		}
	}
	return utf8.RuneError, nil
}

func (s *scanner) hex4() (rune, error) {
	b, err := s.r.Peek(4)
	if len(b) < 4 {
		return 0, s.eof(err)
	}
	r, ok := parseHex4(b)
	if !ok {
		return 0, s.syntax("invalid \\u escape")
	}
	s.r.Discard(4)
	s.off += 4
	return r, nil
}

// parseHex4 parses four hex digits.
func parseHex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
