package tokens

import (
	"unicode"
	"unicode/utf8"
)

// The two encodings split text into pieces before merging bytes, each by
// its regular expression (cl100k_base's, then o200k_base's):
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//	\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// matched leftmost-first with backtracking, as tiktoken's regex engine
// does. The splitters below are those expressions written out by hand:
// a general engine spends most of the time of counting, and a generated
// one was seen to split "\n \n" wrongly.

// class is what the expressions ask of a character.
type class uint8

const (
	cLetter  class = 1 << iota // \p{L}
	cNumber                    // \p{N}
	cSpace                     // \s
	cUpper                     // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cLower                     // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	cNewline                   // [\r\n]
)

// ascii holds the classes of the ASCII characters.
var ascii = func() (t [utf8.RuneSelf]class) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = classOfRune(r)
	}
	return t
}()

func classOfRune(r rune) class {
	var c class
	switch {
	case unicode.IsLetter(r):
		c |= cLetter
		if unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo) {
			c |= cUpper
		}
		if unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo) {
			c |= cLower
		}
	case unicode.IsNumber(r):
		c |= cNumber
	case unicode.IsSpace(r):
		c |= cSpace
		if r == '\r' || r == '\n' {
			c |= cNewline
		}
	case unicode.Is(unicode.M, r):
		c |= cUpper | cLower
	}
	return c
}

// at returns the class and width of the character at s[i].
func at(s string, i int) (class, int) {
	if b := s[i]; b < utf8.RuneSelf {
		return ascii[b], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return classOfRune(r), w
}

// isPrefix reports whether a character may stand before a word: [^\r\n\p{L}\p{N}].
func isPrefix(c class) bool { return c&(cLetter|cNumber|cNewline) == 0 }

// isPunct reports whether a character is [^\s\p{L}\p{N}].
func isPunct(c class) bool { return c&(cLetter|cNumber|cSpace) == 0 }

// run returns the end of the run of characters from i that have a class
// in want.
func run(s string, i int, want class) int {
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf { // most text: no decoding
			if ascii[b]&want == 0 {
				break
			}
			i++
			continue
		}
		c, w := at(s, i)
		if c&want == 0 {
			break
		}
		i += w
	}
	return i
}

// contraction returns the length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i],
// or 0. Under Unicode case folding, s also matches ſ (U+017F).
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return 0
	}
	lower := func(j int) (byte, int) {
		if j >= len(s) {
			return 0, 0
		}
		if s[j] < utf8.RuneSelf {
			b := s[j]
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			return b, 1
		}
		if r, w := utf8.DecodeRuneInString(s[j:]); r == 'ſ' {
			return 's', w
		}
		return 0, 0
	}
	b1, w1 := lower(i + 1)
	switch b1 {
	case 's', 't', 'm', 'd':
		return 1 + w1
	case 'r', 'v', 'l':
		b2, w2 := lower(i + 1 + w1)
		if b1 == 'r' && b2 == 'e' || b1 == 'v' && b2 == 'e' || b1 == 'l' && b2 == 'l' {
			return 1 + w1 + w2
		}
	}
	return 0
}

// spaces matches the three whitespace alternatives at s[i], a space:
// \s*[\r\n]+ (to just past the last newline of the run), then \s+(?!\S)
// (the run but its last character when a non-space follows it), then \s+.
func spaces(s string, i int) int {
	end := i
	lastNewline := -1
	for end < len(s) {
		c, w := at(s, end)
		if c&cSpace == 0 {
			break
		}
		if c&cNewline != 0 {
			lastNewline = end
		}
		end += w
	}
	if lastNewline >= 0 {
		// [\r\n]+ then runs on over the newlines after it, of which,
		// being the last, it has none.
		return lastNewline + 1
	}
	if end == len(s) {
		return end
	}
	// Leave the last character of the run for the word after it.
	_, w := utf8.DecodeLastRuneInString(s[i:end])
	if end-w > i {
		return end - w
	}
	return end
}

// digits matches \p{N}{1,3} at s[i], a number.
func digits(s string, i int) int {
	for n := 0; n < 3 && i < len(s); n++ {
		c, w := at(s, i)
		if c&cNumber == 0 {
			break
		}
		i += w
	}
	return i
}

// punct matches ` ?[^\s\p{L}\p{N}]+` then the run of trailing characters
// in tail at s[i], or returns i.
func punct(s string, i int, tail func(byte) bool) int {
	j := i
	if s[j] == ' ' {
		j++
	}
	if j >= len(s) {
		return i
	}
	if c, _ := at(s, j); !isPunct(c) {
		return i
	}
	for j < len(s) {
		c, w := at(s, j)
		if !isPunct(c) {
			break
		}
		j += w
	}
	for j < len(s) && tail(s[j]) {
		j++
	}
	return j
}

func newlineOrSlash(b byte) bool { return b == '\r' || b == '\n' || b == '/' }
func newline(b byte) bool        { return b == '\r' || b == '\n' }

// nextCl100k returns the end of the piece that starts at s[i] under
// cl100k_base's expression.
func nextCl100k(s string, i int) int {
	if n := contraction(s, i); n > 0 {
		return i + n
	}
	c, w := at(s, i)
	if c&cLetter != 0 {
		return run(s, i, cLetter)
	}
	if isPrefix(c) && i+w < len(s) {
		if c2, _ := at(s, i+w); c2&cLetter != 0 {
			return run(s, i+w, cLetter)
		}
	}
	return notWord(s, i, c, w, newline)
}

// notWord returns the end of the piece at s[i], of class c and width w,
// that no word alternative took: digits, punctuation followed by the
// characters tail accepts, or spaces, in the order both expressions try
// them.
func notWord(s string, i int, c class, w int, tail func(byte) bool) int {
	if c&cNumber != 0 {
		return digits(s, i)
	}
	if j := punct(s, i, tail); j > i {
		return j
	}
	if c&cSpace != 0 {
		return spaces(s, i)
	}
	return i + w // unreachable: every character is one of the above
}

// nextO200k returns the end of the piece that starts at s[i] under
// o200k_base's expression.
func nextO200k(s string, i int) int {
	c, w := at(s, i)
	prefixed := isPrefix(c) && i+w < len(s)
	// The two word alternatives, each tried with the prefix, then
	// without.
	if prefixed {
		if j := wordLower(s, i+w); j > 0 {
			return j
		}
	}
	if j := wordLower(s, i); j > 0 {
		return j
	}
	if prefixed {
		if j := wordUpper(s, i+w); j > 0 {
			return j
		}
	}
	if j := wordUpper(s, i); j > 0 {
		return j
	}
	return notWord(s, i, c, w, newlineOrSlash)
}

// wordLower matches [U]*[W]+(contraction)? at s[i] and returns its end, or
// 0. U* takes its whole run first; when no W follows it, U* gives back
// characters from its end until one that is also a W, which W+ then takes
// alone: the characters after it in the run are not Ws.
func wordLower(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	u := run(s, i, cUpper)
	end := 0
	if u < len(s) {
		if c, _ := at(s, u); c&cLower != 0 {
			end = run(s, u, cLower)
		}
	}
	if end == 0 {
		for k := u; k > i; {
			r, w := utf8.DecodeLastRuneInString(s[i:k])
			k -= w
			if classOfRune(r)&cLower != 0 {
				end = k + w
				break
			}
		}
	}
	if end == 0 {
		return 0
	}
	return end + contraction(s, end)
}

// wordUpper matches [U]+[W]*(contraction)? at s[i] and returns its end, or
// 0.
func wordUpper(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	u := run(s, i, cUpper)
	if u == i {
		return 0
	}
	end := run(s, u, cLower)
	return end + contraction(s, end)
}
