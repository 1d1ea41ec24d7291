package hook

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// renderShape writes a node's shape, showing depth levels of containers
// and at most nested keys of an object below the top. With limit >= 0, the
// top level shows only the keys that fit in limit code points, then a count
// of the others; it returns "" when none fits.
func renderShape(n *shapeNode, depth, nested, limit int) string {
	var b strings.Builder
	if limit < 0 || n.kind != shapeObject || depth == 0 {
		writeShape(&b, n, depth, -1)
		return b.String()
	}
	// The top level, key by key, each with its value's shape, while the
	// closing note still fits.
	b.WriteByte('{')
	used := 1
	shown := 0
	for _, f := range n.fields {
		var fb strings.Builder
		if shown > 0 {
			fb.WriteString(", ")
		}
		writeField(&fb, f, depth-1, nested)
		w := utf8.RuneCountInString(fb.String())
		rest := n.count - shown - 1
		if used+w+utf8.RuneCountInString(moreKeys(rest, n.open))+1 > limit {
			break
		}
		b.WriteString(fb.String())
		used += w
		shown++
	}
	if shown == 0 {
		return ""
	}
	b.WriteString(moreKeys(n.count-shown, n.open))
	b.WriteByte('}')
	return b.String()
}

// moreKeys is the note after an object's shown keys: how many are not
// shown, and "…" for an object the text ended inside.
func moreKeys(rest int, open bool) string {
	switch {
	case rest > 0 && open:
		return ", …" + strconv.Itoa(rest) + "+ more keys"
	case rest == 1:
		return ", …1 more key"
	case rest > 0:
		return ", …" + strconv.Itoa(rest) + " more keys"
	case open:
		return ", …"
	}
	return ""
}

func writeField(b *strings.Builder, f shapeField, depth, nested int) {
	writeKey(b, f.key, f.cut)
	b.WriteString(": ")
	if f.val == nil {
		b.WriteString("…")
		return
	}
	writeShape(b, f.val, depth, nested)
}

// writeShape writes n's shape, showing depth more levels of containers and
// at most nested keys of each object (all that were kept, with -1).
func writeShape(b *strings.Builder, n *shapeNode, depth, nested int) {
	count := strconv.Itoa(n.count)
	if n.open {
		count += "+"
	}
	switch n.kind {
	case shapeString:
		b.WriteString("string")
	case shapeNumber:
		b.WriteString("number")
	case shapeBool:
		b.WriteString("bool")
	case shapeNull:
		b.WriteString("null")
	case shapeArray:
		b.WriteString("array[" + count + "]")
		if depth > 0 && n.elem != nil {
			b.WriteString(" of ")
			writeShape(b, n.elem, depth-1, nested)
			for k := shapeObject; k <= shapeNull; k <<= 1 {
				if n.others&k != 0 {
					b.WriteString(" | " + kindName(k))
				}
			}
		}
	case shapeObject:
		switch {
		case n.count == 0 && !n.open:
			b.WriteString("{}")
		case depth == 0 || len(n.fields) == 0:
			if count == "1" {
				b.WriteString("{…1 key}")
			} else {
				b.WriteString("{…" + count + " keys}")
			}
		default:
			shown := len(n.fields)
			if nested >= 0 {
				shown = min(shown, nested)
			}
			b.WriteByte('{')
			for i, f := range n.fields[:shown] {
				if i > 0 {
					b.WriteString(", ")
				}
				writeField(b, f, depth-1, maxNestedFields)
			}
			b.WriteString(moreKeys(n.count-shown, n.open))
			b.WriteByte('}')
		}
	}
}

func kindName(k byte) string {
	switch k {
	case shapeObject:
		return "object"
	case shapeArray:
		return "array"
	case shapeString:
		return "string"
	case shapeNumber:
		return "number"
	case shapeBool:
		return "bool"
	}
	return "null"
}

// writeKey writes a key as a JSON string, valid UTF-8 whatever it holds,
// "…" inside the quotes when it was cut.
func writeKey(b *strings.Builder, key string, cut bool) {
	b.WriteByte('"')
	if cut {
		key = key[:len(key)-incompleteTail([]byte(key))] // a character the cut split
	}
	for i := 0; i < len(key); {
		r, size := utf8.DecodeRuneInString(key[i:])
		i += size
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	if cut {
		b.WriteString("…")
	}
	b.WriteByte('"')
}
