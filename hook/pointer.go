package hook

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/toolcas/toolcas/policy"
)

// DefaultPreviewChars is how many code points of a text part the pointer
// shows.
const DefaultPreviewChars = 200

// PartInfo is what a pointer says about a part.
type PartInfo struct {
	Kind     Kind
	MIME     string
	Filename string
	// Chars counts the code points of a text part.
	Chars int
	// Size counts the bytes of an image or file part.
	Size int64
	// Start is the beginning of a text part, at least as many code points
	// as the preview shows (all of it, for a hook).
	Start string
}

// InfoOf returns what a pointer says about p.
func InfoOf(p Part) PartInfo {
	i := PartInfo{Kind: p.Kind, MIME: p.MIME, Filename: p.Filename, Size: int64(len(p.Data))}
	if p.Source != nil {
		i.Size = p.Source.Size
		if p.Kind == KindText {
			i.Chars = int(p.Source.Chars)
			head := p.Source.Head
			for len(head) > 0 && !utf8.Valid(head) {
				head = head[:len(head)-1] // cut a code point the head split
			}
			i.Start = string(head)
		}
		return i
	}
	if p.Kind == KindText {
		i.Chars = policy.TextSize(p.Text)
		i.Start = p.Text
		i.Size = int64(len(p.Text))
	}
	return i
}

// MaxPointerParts is how many parts a pointer lists one by one; the rest
// are summed up in one line.
const MaxPointerParts = 20

// Pointer returns the text that replaces an offloaded result: "Tool result
// offloaded to" and one description for one part, a numbered list of them
// for several, as Haystack's hook writes them. A longer list is bounded:
// the first MaxPointerParts parts (fewer, when that would make the pointer
// larger than the parts it replaces), then a line summing up the others.
func Pointer(parts []PartInfo, stored []Stored, previewChars int) string {
	if len(parts) == 1 {
		return "Tool result offloaded to " + Describe(parts[0], stored[0], previewChars)
	}
	var content int64
	for _, p := range parts {
		content += p.Size
	}
	n := min(len(parts), MaxPointerParts)
	text := pointerList(parts, stored, previewChars, n)
	for n < len(parts) && n > 1 && int64(len(text)) > content {
		n /= 2
		text = pointerList(parts, stored, previewChars, n)
	}
	return text
}

// pointerList lists the first n parts and sums up the others.
func pointerList(parts []PartInfo, stored []Stored, previewChars, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tool result offloaded to %d files:", len(parts))
	for i := range parts[:n] {
		fmt.Fprintf(&b, "\n%d. %s", i+1, Describe(parts[i], stored[i], previewChars))
	}
	if rest := parts[n:]; len(rest) > 0 {
		var chars, bytes int64
		kinds := map[Kind]int{}
		for _, p := range rest {
			kinds[p.Kind]++
			if p.Kind == KindText {
				chars += int64(p.Chars)
			} else {
				bytes += p.Size
			}
		}
		var what []string
		for _, k := range []Kind{KindText, KindImage, KindFile} {
			if kinds[k] > 0 {
				what = append(what, fmt.Sprintf("%d %s", kinds[k], k))
			}
		}
		fmt.Fprintf(&b, "\n%d-%d. %d more parts (%s; %d characters of text, %d bytes of images and files), keys '%s' to '%s'; read any of them by key.",
			n+1, len(parts), len(rest), strings.Join(what, ", "), chars, bytes, stored[n].Key, stored[len(parts)-1].Key)
	}
	return b.String()
}

// Describe says what one part is and where it went: for text, its length in
// code points, path, key and a preview; for an image or a file, its MIME
// type (and file name), size, path and key.
func Describe(p PartInfo, s Stored, previewChars int) string {
	where := fmt.Sprintf("at '%s' (key '%s'", s.Path, s.Key)
	if s.SameAs != "" {
		where += fmt.Sprintf(", same content as '%s'", s.SameAs)
	}
	where += ")"
	switch p.Kind {
	case KindText:
		return fmt.Sprintf("text (%d characters) %s. Preview: %s", p.Chars, where, preview(p.Start, p.Chars, previewChars))
	case KindImage:
		return fmt.Sprintf("%s (%d bytes) %s", or(p.MIME, "image"), p.Size, where)
	}
	named := ""
	if p.Filename != "" {
		named = fmt.Sprintf(" named '%s'", p.Filename)
	}
	return fmt.Sprintf("%s%s (%d bytes) %s", or(p.MIME, "file"), named, p.Size, where)
}

// preview returns the first max code points of a text of the given length,
// and "..." when that cut it short.
func preview(start string, runes, max int) string {
	i, n := 0, 0
	for n < max && i < len(start) {
		_, size := utf8.DecodeRuneInString(start[i:])
		i += size
		n++
	}
	if runes <= max {
		return start[:i]
	}
	return start[:i] + "..."
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
