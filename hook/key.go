package hook

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolcas/toolcas/cas"
)

// DefaultRun is the run of results offloaded without one.
const DefaultRun = "default"

// Limits that keep a rendered key one short line.
const (
	// MaxRunLen is the longest run name, in bytes.
	MaxRunLen   = 256
	MaxStep     = 999_999_999
	MaxPart     = 9_999
	MaxIndex    = 99_999
	maxToolLen  = 48 // escaped bytes before shortening
	maxCallLen  = 64 // escaped bytes before shortening
	shortKeep   = 16 // escaped bytes kept by shortening
	shortHexLen = 8
	maxRunElem  = 128 // escaped bytes of a run before shortening
	runKeep     = 64  // escaped bytes kept by shortening a run
	runHexLen   = 16
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

// CheckRun reports whether a run name can be part of keys: 1 to MaxRunLen
// bytes of UTF-8 without NUL. Anything else goes, ':' and '/' included
// (LangGraph thread ids, "user:42/chat:7"): EscapeRun makes it safe in a key.
func CheckRun(run string) error {
	switch {
	case run == "" || len(run) > MaxRunLen:
		return fmt.Errorf("%w: run name %q has %d bytes, want 1 to %d", ErrInvalidKey, clip(run), len(run), MaxRunLen)
	case !utf8.ValidString(run):
		return fmt.Errorf("%w: run name %q is not valid UTF-8", ErrInvalidKey, clip(run))
	case strings.IndexByte(run, 0) >= 0:
		return fmt.Errorf("%w: run name %q contains a NUL byte", ErrInvalidKey, clip(run))
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

// String renders the key as Haystack names its files, under the run:
// {run}/{step}_{tool}_{call}[_{part}]{ext}. The call is the call id, or
// call{index} when the id is empty. Call ids and tool names made of letters,
// digits, '-', '_' and '.' appear as they are ("2_search_call_00_yjs8KtEk.txt").
// Only what cannot stand in a one-line key is percent-escaped: '/', '\',
// quotes, '`', '%', '~', control characters and every byte of a non-ASCII
// character. A tool name over 48 escaped bytes, or a call id over 64, is
// shortened to its first 16 escaped bytes, '~' and 8 hex digits of the
// BLAKE3 hash of the original. The run is escaped the same way (see
// EscapeRun).
//
// Different calls can render alike (tool "a_b" with call "c", tool "a" with
// call "b_c"): a store that keeps an index tells them apart by giving the
// later one Render(2), Render(3) and so on.
func (k Key) String() string { return k.Render(1) }

// Render renders the key with a collision suffix: n < 2 renders String's
// key; n ≥ 2 puts "~n" before the extension ("2_a_b_c~2.txt"), so the
// suffix stays visible and the extension last.
func (k Key) Render(n int) string {
	var b strings.Builder
	b.Grow(64)
	b.WriteString(EscapeRun(k.Run))
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
	if n >= 2 {
		b.WriteByte('~')
		b.WriteString(strconv.Itoa(n))
	}
	b.WriteString(k.Ext)
	return b.String()
}

// SameCall reports whether two keys name the same part of the same call:
// writing one after the other adds a version rather than a new key.
func (k Key) SameCall(o Key) bool {
	return k.Run == o.Run && k.Step == o.Step && k.Tool == o.Tool && k.CallID == o.CallID &&
		k.Part == o.Part && (k.CallID != "" || k.Index == o.Index)
}

// EscapeRun returns a run name as it appears in keys: percent-escaped as
// tool names are, and "." and ".." escaped entirely, so that the first '/'
// of a key always ends its run and no key names a parent directory. A run
// over 128 escaped bytes is shortened to its first 64, '~' and 16 hex
// digits of its hash, so that the run stays one file name on every file
// system; the index keeps the whole name.
func EscapeRun(run string) string {
	if run == "." || run == ".." {
		return strings.Repeat("%2E", len(run))
	}
	e := escape(run)
	if len(e) <= maxRunElem {
		return e
	}
	return shortenTo(run, e, runKeep, runHexLen)
}

func renderTool(tool string) string {
	return shorten(tool, escape(tool), maxToolLen)
}

func renderCall(id string) string {
	return shorten(id, escape(id), maxCallLen)
}

// escape percent-escapes what may not appear in a key.
func escape(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); i++ {
		if c := s[i]; needsEscape(c) {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// needsEscape reports whether a byte cannot stand in a key as it is:
// control characters, non-ASCII bytes (so no line separator, bidi override
// or invalid UTF-8 gets through), the path and quoting characters, '%'
// (the escape itself) and '~' (which marks shortening and suffixes).
func needsEscape(c byte) bool {
	switch c {
	case '/', '\\', '\'', '"', '`', '%', '~':
		return true
	}
	return c < 0x20 || c >= 0x7f
}

// shorten cuts an escaped name over limit bytes to its first shortKeep bytes
// (never splitting an escape), '~' and a hash of the original.
func shorten(raw, escaped string, limit int) string {
	if len(escaped) <= limit {
		return escaped
	}
	return shortenTo(raw, escaped, shortKeep, shortHexLen)
}

// shortenTo cuts escaped to its first keep bytes, never splitting an
// escape, and adds '~' and hexLen hex digits of the BLAKE3 hash of raw.
func shortenTo(raw, escaped string, keep, hexLen int) string {
	cut := 0
	for cut < len(escaped) {
		n := 1
		if escaped[cut] == '%' {
			n = 3 * escapedRuneLen(escaped[cut:])
		}
		if cut+n > keep {
			break
		}
		cut += n
	}
	return escaped[:cut] + "~" + cas.Sum([]byte(raw)).Hex()[:hexLen]
}

// escapedRuneLen returns how many escapes, starting at the one s begins
// with, spell one character: 2 to 4 for the escaped bytes of a UTF-8
// sequence, else 1.
func escapedRuneLen(s string) int {
	lead, err := strconv.ParseUint(s[1:3], 16, 8)
	if err != nil {
		return 1
	}
	n := 1
	switch {
	case lead >= 0xF0 && lead < 0xF8:
		n = 4
	case lead >= 0xE0:
		n = 3
	case lead >= 0xC0:
		n = 2
	}
	if n*3 > len(s) {
		return 1
	}
	for i := 1; i < n; i++ {
		if s[i*3] != '%' || s[i*3+1] < '8' || s[i*3+1] > 'B' {
			return 1 // not followed by its continuation bytes
		}
	}
	return n
}

func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// ShortID returns a short name that stands for b: the first 16 hex digits
// of its BLAKE3 digest. Adapters name with it the runs and calls that
// have no usable name of their own, the same for the same bytes.
func ShortID(b []byte) string {
	d := cas.Sum(b)
	return hex.EncodeToString(d[:8])
}
