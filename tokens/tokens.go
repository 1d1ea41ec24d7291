// Package tokens counts the tokens a model reads in a text: exactly, with
// the byte-pair encodings of OpenAI's models (o200k_base, cl100k_base),
// whose ranks are compiled into the module's dependency and never
// downloaded; or approximately, by characters, with no tables at all.
//
// Start at NewExact, or Approximate{} where a rough count will do.
package tokens

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// A Counter counts the tokens of a text. Implementations are safe for
// concurrent use.
type Counter interface {
	// CountText returns the tokens text takes.
	CountText(text string) int
	// Name names the counting, as configuration writes it:
	// "approximate" or an encoding's name.
	Name() string
}

// The encodings Exact knows.
const (
	O200kBase  = "o200k_base"  // GPT-4o, GPT-4.1, GPT-5, o-series
	Cl100kBase = "cl100k_base" // GPT-4, GPT-3.5
)

// ApproximateName is the Name of an Approximate counter.
const ApproximateName = "approximate"

// ErrUnknownEncoding is returned by NewExact and ByName for a name they do
// not know.
var ErrUnknownEncoding = errors.New("unknown token encoding")

// Encodings lists the encodings NewExact knows.
func Encodings() []string { return []string{O200kBase, Cl100kBase} }

// Exact counts tokens as one of OpenAI's encodings splits a text, as
// tiktoken's encode_ordinary does: a special token's text (such as
// "<|endoftext|>") counts as ordinary text, never as the special token.
// Invalid UTF-8 counts as U+FFFD, as in a text decoded with replacement.
type Exact struct {
	name  string
	ranks ranks
	next  func(s string, i int) int
}

var _ Counter = (*Exact)(nil)

var (
	exactMu sync.Mutex
	exacts  = map[string]*Exact{}
)

// NewExact returns the counter of an encoding, O200kBase or Cl100kBase.
// An encoding's ranks are read once per process, on first use, from the
// copy compiled into the program; later calls share them.
func NewExact(encoding string) (*Exact, error) {
	exactMu.Lock()
	defer exactMu.Unlock()
	if e, ok := exacts[encoding]; ok {
		return e, nil
	}
	var next func(string, int) int
	switch encoding {
	case O200kBase:
		next = nextO200k
	case Cl100kBase:
		next = nextCl100k
	default:
		return nil, fmt.Errorf("%w %q: want one of %s", ErrUnknownEncoding, encoding, strings.Join(Encodings(), ", "))
	}
	r, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(encoding + ".tiktoken")
	if err != nil {
		return nil, fmt.Errorf("tokens: load %s: %w", encoding, err)
	}
	e := &Exact{name: encoding, ranks: newRanks(r), next: next}
	exacts[encoding] = e
	return e, nil
}

// Name returns the encoding's name.
func (e *Exact) Name() string { return e.name }

// CountText returns the tokens of text under the encoding.
func (e *Exact) CountText(text string) int { return e.countUpTo(text, math.MaxInt) }

// countUpTo counts as CountText does but stops once the count passes
// limit, returning a count over it.
func (e *Exact) countUpTo(text string, limit int) int {
	c := caches.Get().(*pieceCache)
	defer caches.Put(c)
	return e.countWith(c, text, limit)
}

// countWith is countUpTo with the cache it uses, emptied first.
func (e *Exact) countWith(c *pieceCache, text string, limit int) int {
	c.empty()
	text = validUTF8(text)
	n := 0
	for i := 0; i < len(text) && n <= limit; {
		j := e.next(text, i)
		n += c.count(&e.ranks, text[i:j])
		i = j
	}
	return n
}

// validUTF8 returns text with each run of invalid bytes replaced by
// U+FFFD, as CountText always has.
func validUTF8(text string) string {
	if utf8.ValidString(text) { // most text, checked faster than rewritten
		return text
	}
	return strings.ToValidUTF8(text, "\uFFFD")
}

// CountUpTo returns c's count of text when it is at most limit, and some
// count over limit otherwise: an exact counter stops reading there, so
// that asking whether a long text passes a threshold costs what the
// threshold does, not what the text does.
func CountUpTo(c Counter, text string, limit int) int {
	if e, ok := c.(*Exact); ok && limit >= 0 {
		return e.countUpTo(text, limit)
	}
	return c.CountText(text)
}

// Tokens returns the token ids of text under the encoding, as tiktoken's
// encode_ordinary returns them.
func (e *Exact) Tokens(text string) []uint {
	text = validUTF8(text)
	var ids []uint
	for i := 0; i < len(text); {
		j := e.next(text, i)
		ids = e.ranks.appendPiece(ids, text[i:j])
		i = j
	}
	return ids
}

// Approximate counts a token per CharsPerToken code points (default 4), as
// Haystack's ApproximateTokenCounter does: the count of a text is the
// whole part of its code points divided by CharsPerToken.
type Approximate struct {
	CharsPerToken float64
}

var _ Counter = Approximate{}

// DefaultCharsPerToken is Approximate's ratio when CharsPerToken is 0.
const DefaultCharsPerToken = 4.0

// CountText returns the code points of text over CharsPerToken, rounded
// down.
func (a Approximate) CountText(text string) int {
	return int(float64(utf8.RuneCountInString(text)) / a.ratio())
}

func (a Approximate) ratio() float64 {
	if a.CharsPerToken > 0 {
		return a.CharsPerToken
	}
	return DefaultCharsPerToken
}

// Name returns ApproximateName.
func (Approximate) Name() string { return ApproximateName }

// ByName returns the counter configuration names: ApproximateName (with the
// default ratio) or an encoding NewExact knows.
func ByName(name string) (Counter, error) {
	if name == ApproximateName {
		return Approximate{}, nil
	}
	if !slices.Contains(Encodings(), name) {
		return nil, fmt.Errorf("%w %q: want %s or one of %s", ErrUnknownEncoding, name, ApproximateName, strings.Join(Encodings(), ", "))
	}
	return NewExact(name)
}

// NameOf returns the name configuration saves c under, which ByName reads
// back: an error for a counter ByName cannot make again (an Approximate of
// another ratio than the default, or a counter of another package).
func NameOf(c Counter) (string, error) {
	switch c := c.(type) {
	case nil:
		return ApproximateName, nil
	case *Exact:
		return c.name, nil
	case Approximate:
		if c.CharsPerToken == 0 || c.CharsPerToken == DefaultCharsPerToken {
			return ApproximateName, nil
		}
		return "", fmt.Errorf("tokens: an approximate counter of %v characters a token cannot be saved by name: only the default, %v, can", c.CharsPerToken, DefaultCharsPerToken)
	}
	return "", fmt.Errorf("tokens: a %T counter cannot be saved by name", c)
}
