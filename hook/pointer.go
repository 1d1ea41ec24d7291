package hook

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// DefaultPreviewChars is how many code points of a text part the pointer
// shows.
const DefaultPreviewChars = 200

// pointer returns the text that replaces an offloaded result: one line for
// one part, a numbered list for several.
func pointer(parts []Part, stored []Stored, previewChars int) string {
	if len(parts) == 1 {
		return "Tool result offloaded to " + describe(parts[0], stored[0], previewChars)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Tool result offloaded to %d files:", len(parts))
	for i := range parts {
		fmt.Fprintf(&b, "\n%d. %s", i+1, describe(parts[i], stored[i], previewChars))
	}
	return b.String()
}

// describe says what one part is and where it went.
func describe(p Part, s Stored, previewChars int) string {
	where := fmt.Sprintf("at '%s' (key '%s'", s.Path, s.Key)
	if s.SameAs != "" {
		where += fmt.Sprintf(", same content as '%s'", s.SameAs)
	}
	where += ")"
	switch p.Kind {
	case KindText:
		n := utf8.RuneCountInString(p.Text)
		return fmt.Sprintf("text (%d characters) %s. Preview: %s", n, where, preview(p.Text, n, previewChars))
	case KindImage:
		return fmt.Sprintf("%s (%d bytes) %s", or(p.MIME, "image"), len(p.Data), where)
	}
	named := ""
	if p.Filename != "" {
		named = fmt.Sprintf(" named '%s'", p.Filename)
	}
	return fmt.Sprintf("%s%s (%d bytes) %s", or(p.MIME, "file"), named, len(p.Data), where)
}

// preview returns the first max code points of text, and "..." when that
// cut it short.
func preview(text string, runes, max int) string {
	if runes <= max {
		return text
	}
	i, n := 0, 0
	for n < max && i < len(text) {
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
		n++
	}
	return text[:i] + "..."
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
