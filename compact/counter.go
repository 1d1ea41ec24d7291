package compact

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/tokens"
)

// TokenCounter measures messages as the model would.
type TokenCounter interface {
	// Count returns the tokens the messages take together.
	Count(msgs []Message) int
}

// Counter counts a conversation as Haystack's token counters do: the
// messages rendered as one plain text (Render), counted by Text, plus a
// flat charge per image and per file, which have no text to count. With
// Text an Approximate, it is Haystack's ApproximateTokenCounter; with
// Text an exact encoding (tokens.NewExact), its TiktokenCounter.
type Counter struct {
	// Text counts the rendered text (tokens.Approximate{} when nil).
	Text tokens.Counter
	// TokensPerImage and TokensPerFile are charged for each image and
	// file part (DefaultTokensPerImage and DefaultTokensPerFile when 0;
	// NoMediaTokens charges nothing).
	TokensPerImage int
	TokensPerFile  int
	NoMediaTokens  bool
}

// Haystack's charges for content with no text.
const (
	DefaultTokensPerImage = 85
	DefaultTokensPerFile  = 1000
)

// Approximate returns Haystack's ApproximateTokenCounter with its
// defaults: a token per 4 code points of the rendered conversation, 85 an
// image, 1000 a file.
func Approximate() Counter { return Counter{Text: tokens.Approximate{}} }

var _ TokenCounter = Counter{}

// NewCounter returns the counter of a text counter name (tokens.ByName:
// "approximate", "o200k_base", "cl100k_base") with Haystack's charges for
// images and files.
func NewCounter(name string) (Counter, error) {
	t, err := tokens.ByName(name)
	if err != nil {
		return Counter{}, fmt.Errorf("compact: %w", err)
	}
	return Counter{Text: t}, nil
}

// Count implements TokenCounter.
func (c Counter) Count(msgs []Message) int {
	if len(msgs) == 0 {
		return 0
	}
	text := c.Text
	if text == nil {
		text = tokens.Approximate{}
	}
	n := text.CountText(Render(msgs))
	if c.NoMediaTokens {
		return n
	}
	perImage, perFile := cmp.Or(c.TokensPerImage, DefaultTokensPerImage), cmp.Or(c.TokensPerFile, DefaultTokensPerFile)
	for _, m := range msgs {
		if m.Result == nil {
			continue
		}
		for _, p := range m.Result.Parts {
			switch p.Kind {
			case hook.KindImage:
				n += perImage
			case hook.KindFile:
				n += perFile
			}
		}
	}
	return n
}

// Render writes the conversation as the one plain text a counter measures,
// line for line as Haystack renders it: a tool result as
// "[tool:NAME] TEXT" ("[tool:NAME (error)] …" for a failed call), images
// and files in it as "<image>" and "<file: NAME>"; other messages as
// "[ROLE] TEXT" and one "[ROLE -> tool_call] TOOL(ARGUMENTS)" a call, the
// arguments as Python's json.dumps(sort_keys=True) writes them; a message
// with nothing as "[ROLE] <no content>". Messages are joined by newlines.
func Render(msgs []Message) string {
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte('\n')
		}
		renderMessage(&b, m, renderOptions{})
	}
	return b.String()
}

// renderOptions change how renderMessage writes a message for a reader
// rather than a counter: with the tool call ids, and images and files
// described by their type and name.
type renderOptions struct {
	ids      bool
	describe bool
}

// placeholder stands for an image or file part.
func (o renderOptions) placeholder(p hook.Part) string {
	switch {
	case p.Kind == hook.KindImage && o.describe:
		return "<image: " + cmp.Or(p.MIME, "unknown type") + ">"
	case p.Kind == hook.KindImage:
		return "<image>"
	case o.describe:
		return "<file: " + cmp.Or(p.Filename, "unnamed") + ", " + cmp.Or(p.MIME, "unknown type") + ">"
	}
	return "<file: " + cmp.Or(p.Filename, "unnamed") + ">"
}

func renderMessage(b *strings.Builder, m Message, o renderOptions) {
	if m.Result != nil {
		b.WriteString("[tool:")
		b.WriteString(m.Result.Tool)
		if o.ids && m.Result.CallID != "" {
			b.WriteString(" id=" + m.Result.CallID)
		}
		if m.Result.Error {
			b.WriteString(" (error)")
		}
		b.WriteString("] ")
		for _, p := range m.Result.Parts {
			if p.Kind == hook.KindText {
				b.WriteString(p.Text)
			} else {
				b.WriteString(o.placeholder(p))
			}
		}
		return
	}
	role := string(m.Role)
	lines := 0
	if m.Text != "" {
		b.WriteString("[" + role + "] ")
		b.WriteString(m.Text)
		lines++
	}
	for _, c := range m.ToolCalls {
		if lines > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("[" + role + " -> tool_call")
		if o.ids && c.ID != "" {
			b.WriteString(" id=" + c.ID)
		}
		b.WriteString("] ")
		b.WriteString(c.Tool)
		b.WriteByte('(')
		b.WriteString(PythonJSON(c.Arguments))
		b.WriteByte(')')
		lines++
	}
	if lines == 0 {
		b.WriteString("[" + role + "] <no content>")
	}
}

// PythonJSON rewrites a call's JSON arguments as Python's
// json.dumps(args, sort_keys=True) writes the object they decode to: keys
// sorted, ", " and ": " between items, non-ASCII escaped as \uXXXX, floats
// as Python prints them. Empty arguments are the empty object. Arguments
// that are not JSON are returned as they are.
func PythonJSON(args string) string {
	if strings.TrimSpace(args) == "" {
		return "{}"
	}
	d := json.NewDecoder(strings.NewReader(args))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return args
	}
	var b bytes.Buffer
	writePython(&b, v)
	return b.String()
}

func writePython(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		b.WriteString(pythonNumber(string(v)))
	case string:
		writePythonString(b, v)
	case []any:
		writeJoined(b, '[', ']', len(v), func(i int) { writePython(b, v[i]) })
	case map[string]any:
		// Go's strings compare as Python's do: by code point.
		keys := slices.Sorted(maps.Keys(v))
		writeJoined(b, '{', '}', len(keys), func(i int) {
			writePythonString(b, keys[i])
			b.WriteString(": ")
			writePython(b, v[keys[i]])
		})
	}
}

// writeJoined writes n items between opener and closer, ", " between them,
// as Python prints a list or a dict.
func writeJoined(b *bytes.Buffer, opener, closer byte, n int, item func(i int)) {
	b.WriteByte(opener)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		item(i)
	}
	b.WriteByte(closer)
}

// pythonNumber writes a JSON number as Python prints what json.loads makes
// of it: an integer as it is, a float by repr.
func pythonNumber(s string) string {
	if !strings.ContainsAny(s, ".eE") {
		if s == "-0" {
			return "0"
		}
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		// json.loads reads an overflowing float as infinity.
		if strings.HasPrefix(s, "-") {
			return "-Infinity"
		}
		return "Infinity"
	}
	return pythonFloat(f)
}

// pythonFloat is Python's repr of a float: the shortest digits that read
// back the same, fixed-point with a ".0" when 1e-4 <= |f| < 1e16,
// scientific with a two-digit exponent otherwise.
func pythonFloat(f float64) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// writePythonString writes s as json.dumps does with ensure_ascii.
func writePythonString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || r > 0x7e:
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
