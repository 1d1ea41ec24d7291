package hook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"unicode/utf8"
)

// Bounds on a pattern's cost: the size of its compiled program, and how
// much of a line it runs on. Matching costs at most their product per line,
// and stops as soon as the context ends.
const (
	// MaxPatternProgram is the most instructions a compiled pattern may
	// have: "a{1000}b" has about a thousand, and is refused.
	MaxPatternProgram = 500
	// MatchWindow is how much of a line a pattern is matched against: a
	// longer line is searched in its first MatchWindow bytes.
	MatchWindow = 256 << 10
)

// ErrPatternTooCostly is returned by CompilePattern for a pattern whose
// program is larger than MaxPatternProgram.
var ErrPatternTooCostly = errors.New("pattern too costly")

// CompilePattern compiles a regular expression (RE2 syntax) for matching
// lines, refusing one whose program would cost too much per byte.
func CompilePattern(pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, err
	}
	if n := len(prog.Inst); n > MaxPatternProgram {
		return nil, fmt.Errorf("%w: it compiles to %d instructions, more than %d (write a{1000} as a+ or split the search)",
			ErrPatternTooCostly, n, MaxPatternProgram)
	}
	return re, nil
}

// MatchLine reports whether re matches line, or the first MatchWindow bytes
// of it, checking ctx as it goes: a canceled context stops it at once, and
// it returns ctx's error.
func MatchLine(ctx context.Context, re *regexp.Regexp, line []byte) (bool, error) {
	if len(line) > MatchWindow {
		line = line[:MatchWindow]
	}
	if len(line) <= 4<<10 {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		return re.Match(line), nil
	}
	rr := &ctxRunes{ctx: ctx, b: line}
	ok := re.MatchReader(rr)
	if rr.err != nil {
		return false, rr.err
	}
	return ok, nil
}

// ctxRunes feeds a line to the matcher rune by rune, ending the input when
// the context ends.
type ctxRunes struct {
	ctx context.Context
	b   []byte
	n   int
	err error
}

func (r *ctxRunes) ReadRune() (rune, int, error) {
	if r.n++; r.n&1023 == 0 {
		if r.err = r.ctx.Err(); r.err != nil {
			return 0, 0, io.EOF
		}
	}
	if r.err != nil || len(r.b) == 0 {
		return 0, 0, io.EOF
	}
	c, size := utf8.DecodeRune(r.b)
	r.b = r.b[size:]
	return c, size, nil
}

// LineReader reads text a line at a time in bounded memory, whatever the
// length of the lines: it keeps the first bytes of each line (its head)
// and streams the rest, on demand, through Rest. It checks its context as
// it reads, inside long lines too.
type LineReader struct {
	ctx     context.Context
	r       io.Reader
	buf     []byte
	start   int
	end     int
	headCap int
	head    []byte
	num     int
	length  int64 // bytes of the current line read so far
	ended   bool  // the current line's last byte has been read
	eof     bool  // r has no more bytes
	err     error
}

// NewLineReader returns a reader of r's lines keeping at most headCap bytes
// of each.
func NewLineReader(ctx context.Context, r io.Reader, headCap int) *LineReader {
	return &LineReader{ctx: ctx, r: r, buf: make([]byte, 64<<10), headCap: max(headCap, 0), ended: true}
}

// fill reads more bytes into an empty buffer.
func (l *LineReader) fill() bool {
	if l.err != nil || l.eof {
		return false
	}
	if err := l.ctx.Err(); err != nil {
		l.err = err
		return false
	}
	l.start, l.end = 0, 0
	for l.end == 0 {
		n, err := l.r.Read(l.buf)
		l.end = n
		if err == io.EOF {
			l.eof = true
			return n > 0
		}
		if err != nil {
			l.err = err
			return n > 0
		}
	}
	return true
}

// part returns up to max bytes of the current line, and consumes them.
func (l *LineReader) part(max int) []byte {
	if l.ended || max <= 0 {
		return nil
	}
	if l.start == l.end && !l.fill() {
		l.ended = true
		return nil
	}
	avail := l.buf[l.start:min(l.end, l.start+max)]
	if i := bytes.IndexByte(avail, '\n'); i >= 0 {
		l.start += i + 1
		l.ended = true
		l.length += int64(i)
		return avail[:i]
	}
	l.start += len(avail)
	l.length += int64(len(avail))
	if l.start == l.end && l.eof {
		l.ended = true
	}
	return avail
}

// Next moves to the next line, skipping what is left of the current one.
// It returns false at the end of the text or on an error (see Err).
func (l *LineReader) Next() bool {
	for !l.ended {
		l.part(len(l.buf))
	}
	if l.err != nil {
		return false
	}
	if l.start == l.end && !l.fill() {
		return false
	}
	l.num++
	l.ended = false
	l.length = 0
	l.head = l.head[:0]
	for len(l.head) < l.headCap && !l.ended {
		l.head = append(l.head, l.part(l.headCap-len(l.head))...)
	}
	return l.err == nil
}

// Num returns the current line's number, from 1.
func (l *LineReader) Num() int { return l.num }

// Head returns the first bytes of the current line, without its line
// break; valid until the next call to Next.
func (l *LineReader) Head() []byte { return l.head }

// Whole reports whether Head is all of the current line.
func (l *LineReader) Whole() bool { return l.ended }

// Rest returns a reader of the current line's bytes after Head (and after
// what earlier reads of Rest took), without the line break.
func (l *LineReader) Rest() io.Reader { return restReader{l} }

// Len returns the current line's length in bytes, reading (and dropping)
// what is left of it.
func (l *LineReader) Len() int64 {
	for !l.ended {
		l.part(len(l.buf))
	}
	return l.length
}

// Err returns the error that stopped the reader: the context's, or the
// underlying reader's (such as a blob found corrupt at its end).
func (l *LineReader) Err() error { return l.err }

type restReader struct{ l *LineReader }

func (r restReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	b := r.l.part(len(p))
	if len(b) == 0 {
		if r.l.err != nil {
			return 0, r.l.err
		}
		return 0, io.EOF
	}
	return copy(p, b), nil
}
