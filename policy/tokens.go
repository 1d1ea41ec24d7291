package policy

import (
	"fmt"
	"unicode/utf8"

	"github.com/toolcas/toolcas/tokens"
)

// Haystack's token counters charge content with no text by the piece.
const (
	TokensPerImage = 85
	TokensPerFile  = 1000
)

// OverTokens offloads a result that takes more than Max tokens as Counter
// counts its text (tokens.Approximate{} when nil), each image counting
// TokensPerImage and each file TokensPerFile: a threshold in the unit a
// model's budget is in. A result whose text has at most Max bytes is not
// counted with an encoding: it cannot make more tokens than bytes.
type OverTokens struct {
	Max     int
	Counter tokens.Counter
}

// ShouldOffload reports whether the result takes more than o.Max tokens.
func (o OverTokens) ShouldOffload(s *Subject) bool {
	return SubjectTokens(s, o.Counter, o.Max) > o.Max
}

// String returns "OverTokens(n, counter)".
func (o OverTokens) String() string {
	return fmt.Sprintf("OverTokens(%d, %s)", o.Max, counterName(o.Counter))
}

func counterName(c tokens.Counter) string {
	if c == nil {
		return tokens.ApproximateName
	}
	return c.Name()
}

// SubjectTokens returns the tokens a result takes in context: its text
// parts counted by c (tokens.Approximate{} when nil), each image
// TokensPerImage, each file TokensPerFile. With a limit of 0 or more, only
// whether the result passes it is sure: once the images, files and the
// text's bytes are known to come to at most limit, the text is not counted
// and that sum, an upper bound, is returned, since no encoding makes more
// tokens than bytes (atMostBytes); and an exact count stops once it passes
// the limit (tokens.CountUpTo). A negative limit counts everything.
func SubjectTokens(s *Subject, c tokens.Counter, limit int) int {
	if c == nil {
		c = tokens.Approximate{}
	}
	media, textParts := 0, 0
	for _, p := range s.Parts {
		switch p.Kind {
		case KindText:
			textParts++
		case KindImage:
			media += TokensPerImage
		default:
			media += TokensPerFile
		}
	}
	if textParts == 0 {
		return media
	}
	text := s.texts()
	if limit < 0 {
		return media + c.CountText(text)
	}
	if atMostBytes(c) && media+len(text) <= limit {
		return media + len(text)
	}
	return media + tokens.CountUpTo(c, text, max(limit-media, 0))
}

// atMostBytes reports whether c never counts more tokens than a text has
// bytes: a byte-pair encoding's tokens are one byte or more, and an
// approximate count of at least a code point a token is no more than one
// a byte. Other counters are not assumed to.
func atMostBytes(c tokens.Counter) bool {
	switch c := c.(type) {
	case *tokens.Exact:
		return true
	case tokens.Approximate:
		return c.CharsPerToken == 0 || c.CharsPerToken >= 1
	}
	return false
}

// texts returns the text parts of the result, concatenated: Content with
// the base64 payloads of its binary parts left out, found by their sizes.
func (s *Subject) texts() string {
	all := s.Content()
	binary := false
	for _, p := range s.Parts {
		binary = binary || p.Kind != KindText
	}
	if !binary {
		return all
	}
	var out []byte
	rest := all
	for _, p := range s.Parts {
		if p.Kind != KindText {
			rest = rest[min(p.Size, len(rest)):]
			continue
		}
		// A text part's Size counts its code points.
		n := 0
		for range p.Size {
			if n >= len(rest) {
				break
			}
			_, w := utf8.DecodeRuneInString(rest[n:])
			n += w
		}
		out = append(out, rest[:n]...)
		rest = rest[n:]
	}
	return string(out)
}
