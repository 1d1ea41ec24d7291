package search

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"unicode/utf8"
)

// A Pattern is what to look for in each line.
type Pattern struct {
	// Expr is a regular expression (RE2 syntax), or with Fixed a string.
	Expr string
	// Fixed takes Expr as it is, not as a regular expression.
	Fixed bool
	// IgnoreCase matches letters in any case (Unicode simple folding).
	IgnoreCase bool
}

// MaxPattern is the longest pattern Compile takes, in bytes.
const MaxPattern = 4 << 10

// ErrPattern is returned by Compile for a pattern it cannot use.
var ErrPattern = errors.New("bad pattern")

// A Matcher finds the lines that match a Pattern. It is safe for
// concurrent use.
type Matcher struct {
	re *regexp.Regexp
	// lit is the literal a line must contain, folded when foldLit; with
	// re nil, containing it is the match.
	lit     []byte
	foldLit bool
	query   *Query
}

// Compile returns a Matcher for p.
func Compile(p Pattern) (*Matcher, error) {
	if p.Expr == "" {
		return nil, fmt.Errorf("%w: empty", ErrPattern)
	}
	if len(p.Expr) > MaxPattern {
		return nil, fmt.Errorf("%w: %d bytes, the most is %d", ErrPattern, len(p.Expr), MaxPattern)
	}
	if !utf8.ValidString(p.Expr) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrPattern)
	}
	if bytes.IndexByte([]byte(p.Expr), '\n') >= 0 {
		return nil, fmt.Errorf("%w: a line break never matches within a line", ErrPattern)
	}
	if p.Fixed {
		m := &Matcher{lit: []byte(p.Expr), query: LiteralQuery(p.Expr, p.IgnoreCase)}
		if !p.IgnoreCase {
			return m, nil
		}
		if asciiNoFoldAway(p.Expr) {
			m.lit, m.foldLit = []byte(foldString(p.Expr)), true
			return m, nil
		}
		p.Expr, p.Fixed = regexp.QuoteMeta(p.Expr), false
	}
	flags := syntax.Perl
	if p.IgnoreCase {
		flags |= syntax.FoldCase
	}
	parsed, err := syntax.Parse(p.Expr, flags)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPattern, err)
	}
	expr := p.Expr
	if p.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPattern, err)
	}
	return &Matcher{re: re, lit: requiredLiteral(parsed.Simplify()), query: RegexpQuery(parsed)}, nil
}

// asciiNoFoldAway reports whether s is ASCII without a letter whose case
// variants leave ASCII, so that folding ASCII letters is all (?i) does.
func asciiNoFoldAway(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf || foldsAway(s[i]) {
			return false
		}
	}
	return true
}

// requiredLiteral returns the longest case-sensitive literal that every
// match of re contains, or nil.
func requiredLiteral(re *syntax.Regexp) []byte {
	var best []rune
	consider := func(r *syntax.Regexp) {
		if r.Op == syntax.OpLiteral && r.Flags&syntax.FoldCase == 0 && len(r.Rune) > len(best) {
			best = r.Rune
		}
	}
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	if re.Op == syntax.OpConcat {
		for _, s := range re.Sub {
			consider(s)
		}
	} else {
		consider(re)
	}
	if len(best) < 2 {
		return nil
	}
	return []byte(string(best))
}

// Query returns the trigram query that the blob of every matching line
// satisfies.
func (m *Matcher) Query() *Query { return m.query }

// Lines calls fn with each line of data (split at '\n', the '\n' not
// included) that matches: its number counted from first, the line and
// the byte in it where the match starts. fn returns false to stop. Lines
// returns the number of the line after data's last; fold is scratch space
// for case-insensitive literals, reused across calls.
func (m *Matcher) Lines(data []byte, first int64, fold *[]byte, fn func(n int64, line []byte, col int) bool) int64 {
	hay := data
	if m.foldLit {
		*fold = foldInto((*fold)[:0], data)
		hay = *fold
	}
	n := first
	counted := 0 // data[:counted] has been counted into n
	if m.lit == nil {
		for start := 0; start < len(data); {
			end := bytes.IndexByte(data[start:], '\n')
			if end < 0 {
				end = len(data)
			} else {
				end += start
			}
			if loc := m.re.FindIndex(data[start:end]); loc != nil && !fn(n, data[start:end], loc[0]) {
				return n
			}
			n++
			start = end + 1
		}
		return n
	}
	for off := 0; off < len(data); {
		i := bytes.Index(hay[off:], m.lit)
		if i < 0 {
			break
		}
		pos := off + i
		start := bytes.LastIndexByte(data[:pos], '\n') + 1
		end := bytes.IndexByte(data[pos:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += pos
		}
		n += int64(bytes.Count(data[counted:start], []byte{'\n'}))
		counted = start
		col := pos - start
		matched := m.re == nil
		if !matched {
			if loc := m.re.FindIndex(data[start:end]); loc != nil {
				matched, col = true, loc[0]
			}
		}
		if matched && !fn(n, data[start:end], col) {
			return n
		}
		off = end + 1
	}
	return n + int64(bytes.Count(data[counted:], []byte{'\n'}))
}

func foldInto(dst, src []byte) []byte {
	dst = append(dst, src...)
	for i, c := range dst {
		if 'A' <= c && c <= 'Z' {
			dst[i] = c + 'a' - 'A'
		}
	}
	return dst
}

// ChunkSize is how much of a blob Scan holds at once: a longer line is
// matched a ChunkSize piece at a time, and a match across two pieces is
// not seen.
const ChunkSize = 1 << 20

// Scan reads r and calls fn with each matching line, as Lines does, holding
// at most about 2 × ChunkSize bytes whatever r's size. It stops at the
// first error of r or when fn returns false.
func (m *Matcher) Scan(r io.Reader, fn func(n int64, line []byte, col int) bool) error {
	buf := make([]byte, 0, ChunkSize)
	var fold []byte
	n := int64(1)
	stopped := false
	visit := func(ln int64, line []byte, col int) bool {
		if !fn(ln, line, col) {
			stopped = true
			return false
		}
		return true
	}
	for !stopped {
		k, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		eof := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !eof {
			return err
		}
		cut := bytes.LastIndexByte(buf, '\n') + 1
		switch {
		case eof:
			cut = len(buf)
		case cut == 0:
			// A line longer than the buffer: match this piece of it, and
			// count the line once its end comes.
			m.Lines(buf, n, &fold, visit)
			buf = buf[:0]
			continue
		}
		n = m.Lines(buf[:cut], n, &fold, visit)
		if eof {
			return nil
		}
		buf = buf[:copy(buf, buf[cut:])]
	}
	return nil
}

// Cut returns line cut to about width bytes around col, with a marker
// where it was cut, and whether it was cut. The cut falls between code
// points.
func Cut(line []byte, col, width int) (string, bool) {
	if width <= 0 || len(line) <= width {
		return string(line), false
	}
	start := max(0, min(col-width/4, len(line)-width))
	for start > 0 && !utf8.RuneStart(line[start]) {
		start--
	}
	end := min(len(line), start+width)
	for end < len(line) && !utf8.RuneStart(line[end]) {
		end--
	}
	var b bytes.Buffer
	if start > 0 {
		fmt.Fprintf(&b, "[…%d bytes] ", start)
	}
	b.Write(line[start:end])
	if end < len(line) {
		fmt.Fprintf(&b, " [%d bytes…]", len(line)-end)
	}
	return b.String(), true
}
