package hook

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolcas/toolcas/cas"
)

// DefaultRun is the run of results offloaded without one.
const DefaultRun = "default"

// Limits that keep a rendered key one short line.
const (
	MaxRunLen   = 40
	MaxStep     = 999_999_999
	MaxPart     = 9_999
	MaxIndex    = 99_999
	maxToolLen  = 48 // escaped bytes before shortening
	maxCallLen  = 64 // escaped bytes before shortening
	shortKeep   = 16 // escaped bytes kept by shortening
	shortHexLen = 8
)

// ErrInvalidKey is returned by Key.Check for a key that cannot be stored.
var ErrInvalidKey = errors.New("invalid key")

// A Key names one part of one tool result: which run, step, tool, call and
// part it was. The columns are kept as given; String renders them.
type Key struct {
	Run  string
	Step int
	Tool string
	// CallID is the call's id; when it is empty, Index stands in for it.
	CallID string
	// Index is the result's position among the step's tool results.
	Index int
	// Part is the part's position in the result, or -1 when the result has
	// one part.
	Part int
	// Ext is the extension of the part's type, dot included.
	Ext string
}

// CheckRun reports whether a run name can be part of keys: 1 to 40 ASCII
// letters, digits, '.', '_' or '-', starting with a letter or digit.
func CheckRun(run string) error {
	if run == "" || len(run) > MaxRunLen {
		return fmt.Errorf("%w: run name %q must have 1 to %d characters", ErrInvalidKey, clip(run), MaxRunLen)
	}
	for i := 0; i < len(run); i++ {
		c := run[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !ok && (i == 0 || strings.IndexByte("._-", c) < 0) {
			return fmt.Errorf("%w: run name %q: %q at offset %d (want letters, digits, '.', '_', '-', starting with a letter or digit)",
				ErrInvalidKey, clip(run), c, i)
		}
	}
	return nil
}

// Check reports whether the key can be stored.
func (k Key) Check() error {
	if err := CheckRun(k.Run); err != nil {
		return err
	}
	switch {
	case k.Step < 0 || k.Step > MaxStep:
		return fmt.Errorf("%w: step %d out of range 0..%d", ErrInvalidKey, k.Step, MaxStep)
	case k.Part < -1 || k.Part > MaxPart:
		return fmt.Errorf("%w: part %d out of range -1..%d", ErrInvalidKey, k.Part, MaxPart)
	case k.CallID == "" && (k.Index < 0 || k.Index > MaxIndex):
		return fmt.Errorf("%w: result index %d out of range 0..%d", ErrInvalidKey, k.Index, MaxIndex)
	}
	if err := cas.CheckExt(k.Ext); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return nil
}

// String renders the key: {run}/{step}_{tool}_{call}[_{part}]{ext}. The
// call is the call id, or call{index} when the id is empty. In the tool
// name and call id, '/', '\', quotes, '%', '~', control and format
// characters, line separators and invalid UTF-8 are percent-escaped; in the
// call id '_' is escaped too, so that the key can be split again, and an id
// that could be taken for a part number or for call{index} has its first
// byte escaped. A tool name over 48 escaped bytes, or a call id over 64, is
// shortened to its first 16 escaped bytes, '~' and 8 hex digits of the
// BLAKE3 hash of the original. The result is one line of at most 200 bytes.
func (k Key) String() string {
	var b strings.Builder
	b.Grow(64)
	b.WriteString(k.Run)
	b.WriteByte('/')
	b.WriteString(strconv.Itoa(k.Step))
	b.WriteByte('_')
	b.WriteString(renderTool(k.Tool))
	b.WriteByte('_')
	if k.CallID == "" {
		b.WriteString("call")
		b.WriteString(strconv.Itoa(k.Index))
	} else {
		b.WriteString(renderCall(k.CallID))
	}
	if k.Part >= 0 {
		b.WriteByte('_')
		b.WriteString(strconv.Itoa(k.Part))
	}
	b.WriteString(k.Ext)
	return b.String()
}

func renderTool(tool string) string {
	return shorten(tool, escape(tool, false), maxToolLen)
}

func renderCall(id string) string {
	e := escape(id, true)
	if e == id && (isDigits(id) || isCallIndex(id)) {
		// "0" would read as a part number, "call0" as an id-less call.
		e = fmt.Sprintf("%%%02X", id[0]) + id[1:]
	}
	return shorten(id, e, maxCallLen)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isCallIndex(s string) bool {
	rest, ok := strings.CutPrefix(s, "call")
	return ok && isDigits(rest)
}

// escape percent-escapes what may not appear in a key.
func escape(s string, underscore bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size <= 1) || needsEscape(r) || (underscore && r == '_') {
			for j := i; j < i+max(size, 1); j++ {
				fmt.Fprintf(&b, "%%%02X", s[j])
			}
		} else {
			b.WriteString(s[i : i+size])
		}
		i += max(size, 1)
	}
	return b.String()
}

func needsEscape(r rune) bool {
	switch r {
	case '/', '\\', '\'', '"', '`', '%', '~':
		return true
	}
	return r < 0x20 || r == 0x7f || unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) ||
		r == utf8.RuneError
}

// shorten cuts an escaped name over limit bytes to its first shortKeep bytes
// (never splitting an escape or a character), '~' and a hash of the
// original.
func shorten(raw, escaped string, limit int) string {
	if len(escaped) <= limit {
		return escaped
	}
	cut := 0
	for cut < len(escaped) {
		n := 1
		if escaped[cut] == '%' {
			n = 3
		} else if _, size := utf8.DecodeRuneInString(escaped[cut:]); size > 1 {
			n = size
		}
		if cut+n > shortKeep {
			break
		}
		cut += n
	}
	return escaped[:cut] + "~" + cas.Sum([]byte(raw)).Hex()[:shortHexLen]
}

func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
