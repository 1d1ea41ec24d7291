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
	// as the preview shows (all of it, for a hook). When it is shorter than
	// Size, it is only the beginning.
	Start string
	// End is the end of a text part, at least as many code points as a
	// head_tail preview shows (all of it, for a hook), or "" when unknown.
	End string
	// Preview is how the pointer previews a text part: policy.PreviewHead
	// when empty.
	Preview policy.PreviewMode
}

// InfoOf returns what a pointer says about p.
func InfoOf(p Part) PartInfo { return infoOf(p, 0) }

// infoOf is InfoOf for a part whose code points, when it is in-memory
// text, were counted already: chars, or 0 when not.
func infoOf(p Part, chars int) PartInfo {
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
			tail := p.Source.Tail
			for len(tail) > 0 && !utf8.Valid(tail) {
				tail = tail[1:] // cut a code point the tail split
			}
			i.End = string(tail)
		}
		return i
	}
	if p.Kind == KindText {
		i.Chars = CharsOf(Item{Part: p, Chars: chars})
		i.Start = p.Text
		i.End = p.Text
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
		return fmt.Sprintf("text (%d characters) %s. %s", p.Chars, where, textPreview(p, previewChars))
	case KindImage:
		return fmt.Sprintf("%s (%d bytes) %s", or(p.MIME, "image"), p.Size, where)
	}
	named := ""
	if p.Filename != "" {
		named = fmt.Sprintf(" named '%s'", p.Filename)
	}
	return fmt.Sprintf("%s%s (%d bytes) %s", or(p.MIME, "file"), named, p.Size, where)
}

// textPreview returns a text part's preview, with its label, in the part's
// preview mode. A mode that cannot apply falls back to the head, Haystack's
// preview: json_shape to text that is not a JSON object or array (or
// whose shape does not fit), head_tail to a text whose end is unknown or
// to a preview too short to hold both ends.
func textPreview(p PartInfo, max int) string {
	switch p.Preview {
	case policy.PreviewJSONShape:
		more := int64(len(p.Start)) < p.Size
		if shape, ok := JSONShape(p.Start, more, max); ok {
			if more {
				return fmt.Sprintf("JSON shape of the first %d bytes: %s", min(len(p.Start), MaxShapeScan), shape)
			}
			return "JSON shape: " + shape
		}
	case policy.PreviewHeadTail:
		if s, ok := headTail(p, max); ok {
			return "Preview: " + s
		}
	}
	return "Preview: " + preview(p.Start, p.Chars, max)
}

// headTail returns the beginning and the end of a text, with a marker
// saying how many code points were cut between them, in at most max code
// points; a text no longer than max whole. It returns false when the text's
// end is unknown, or max is too short for both ends and the marker.
func headTail(p PartInfo, max int) (string, bool) {
	if p.Chars <= max {
		return preview(p.Start, p.Chars, max), true
	}
	if p.End == "" {
		return "", false
	}
	// The marker's length with the most digits it can have.
	room := max - len(cutMarker(p.Chars))
	if room < 2 {
		return "", false
	}
	head := prefixRunes(p.Start, room-room/2)
	tail := suffixRunes(p.End, room/2)
	cut := p.Chars - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail)
	return head + cutMarker(cut) + tail, true
}

// cutMarker is what head_tail puts between the two ends of a text.
func cutMarker(n int) string {
	return fmt.Sprintf(" [... %d characters cut ...] ", n)
}

// prefixRunes returns the first n code points of s, or all of it.
func prefixRunes(s string, n int) string {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}

// suffixRunes returns the last n code points of s, or all of it.
func suffixRunes(s string, n int) string {
	i := len(s)
	for ; n > 0 && i > 0; n-- {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
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

// ShortPointer is a pointer that names each part's size and key only, with
// no path and no preview: a fraction of Pointer's tokens, for the results a
// compactor offloads once the model has read them. The read tool reads
// them back by key. At most MaxPointerParts parts are listed; the rest are
// counted.
func ShortPointer(parts []PartInfo, stored []Stored) string {
	var b strings.Builder
	b.WriteString("Tool result offloaded (")
	n := min(len(parts), MaxPointerParts)
	for i, p := range parts[:n] {
		if i > 0 {
			b.WriteString("; ")
		}
		switch p.Kind {
		case KindText:
			fmt.Fprintf(&b, "%d characters", p.Chars)
		default:
			fmt.Fprintf(&b, "%s, %d bytes", or(p.MIME, string(p.Kind)), p.Size)
		}
		fmt.Fprintf(&b, ", key '%s'", stored[i].Key)
	}
	if len(parts) > n {
		fmt.Fprintf(&b, "; %d more parts, keys '%s' to '%s'", len(parts)-n, stored[n].Key, stored[len(parts)-1].Key)
	}
	b.WriteString(").")
	return b.String()
}
