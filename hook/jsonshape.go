package hook

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Bounds on the work of JSONShape, whatever the document: it reads at most
// MaxShapeScan bytes once, keeps a bounded summary of them, and renders
// that summary a few times.
const (
	// MaxShapeScan is how many bytes of a text JSONShape reads: a longer
	// text is described as far as these show, as a prefix is.
	MaxShapeScan = 8 << 20
	// MaxShapeNesting is the deepest nesting JSONShape follows (that of
	// encoding/json): a deeper document has no shape, and is previewed by
	// its head.
	MaxShapeNesting = 10000
	// maxShapeDepth is how many levels of containers a shape can show.
	maxShapeDepth = 6
	// maxShapeNodes bounds the containers and values a scan keeps.
	maxShapeNodes = 2048
	// maxShapeFields is how many keys of one object a scan keeps, and
	// maxNestedFields how many of a nested object a shape shows.
	maxShapeFields  = 512
	maxNestedFields = 12
	// maxShapeKey is how many bytes of a key a shape shows.
	maxShapeKey = 64
)

// Value kinds of a shape, which are also bits of shapeNode.others.
const (
	shapeObject byte = 1 << iota
	shapeArray
	shapeString
	shapeNumber
	shapeBool
	shapeNull
)

// shapeNode is what a scan keeps of one JSON value.
type shapeNode struct {
	kind  byte
	count int  // keys of an object, elements of an array
	open  bool // the text ended inside it
	// fields are an object's first keys and their values, in order.
	fields []shapeField
	// elem is an array's first element; others the kinds of the later ones
	// that differ from its kind.
	elem   *shapeNode
	others byte
}

type shapeField struct {
	key string
	cut bool // the key was longer than maxShapeKey
	val *shapeNode
}

// JSONShape describes the JSON object or array that text holds in at most
// limit code points: its keys in document order, array lengths, value
// types, nested a few levels, as
//
//	{"items": array[250] of {"id": number, "name": string}, "total": number, "next": null}
//
// It returns false when text is not a JSON object or array (a bare scalar,
// malformed JSON, nesting deeper than MaxShapeNesting) or when no shape fits
// in limit. With more set, text is only the beginning of a longer document
// (the head of a streamed part): the text may end anywhere, and what it
// shows is described, each container it ends inside marked as open: an
// array's count as a lower bound, "array[120+]", an object's keys followed
// by "…". A text longer than MaxShapeScan is described the same way, by its
// first MaxShapeScan bytes. Key order, and so the output, is deterministic;
// the output is valid UTF-8 whatever the input.
func JSONShape(text string, more bool, limit int) (string, bool) {
	if len(text) > MaxShapeScan {
		text, more = text[:MaxShapeScan], true
	}
	root, ok := scanShape(text, more)
	if !ok || limit <= 0 {
		return "", false
	}
	for d := maxShapeDepth; d >= 1; d-- {
		if s := renderShape(root, d, maxNestedFields, -1); utf8.RuneCountInString(s) <= limit {
			return s, true
		}
	}
	// Too wide to show whole: show the top level's first keys, then a count
	// of the others.
	for d := 3; d >= 1; d-- {
		if s := renderShape(root, d, maxNestedFields, limit); s != "" && utf8.RuneCountInString(s) <= limit {
			return s, true
		}
	}
	if s := renderShape(root, 0, 0, -1); utf8.RuneCountInString(s) <= limit {
		return s, true
	}
	return "", false
}

// shapeScanner walks JSON text once, checking its syntax and keeping a
// bounded summary of it.
type shapeScanner struct {
	s     string
	i     int
	more  bool
	nodes int
}

// shapeFrame is a container the scan is inside.
type shapeFrame struct {
	node  *shapeNode // nil when the scan keeps nothing of it
	kind  byte
	state int
	depth int // of the container: the root is 0
	// kept is set while the value of an object's newest key is to be
	// kept in its last field.
	kept bool
}

// Scan states inside a container.
const (
	stFirst = iota // after { or [
	stKey          // after a comma in an object
	stColon        // after a key
	stValue        // after a colon, or a comma in an array
	stNext         // after a value
)

// scanShape returns the summary of the JSON object or array s holds, or
// false when it holds none. With more, s may end anywhere inside it.
func scanShape(s string, more bool) (*shapeNode, bool) {
	sc := &shapeScanner{s: s, more: more}
	sc.space()
	if sc.i >= len(s) || s[sc.i] != '{' && s[sc.i] != '[' {
		return nil, false
	}
	root := sc.newNode(kindOf(s[sc.i]), 0)
	stack := []shapeFrame{{node: root, kind: root.kind}}
	sc.i++
	for len(stack) > 0 {
		sc.space()
		if sc.i >= len(s) {
			if !more {
				return nil, false
			}
			for _, f := range stack {
				if f.node != nil {
					f.node.open = true
				}
			}
			return root, true
		}
		top := &stack[len(stack)-1]
		c := s[sc.i]
		switch {
		case top.state == stNext && c == ',':
			sc.i++
			top.state = stValue
			if top.kind == shapeObject {
				top.state = stKey
			}
		case (top.state == stNext || top.state == stFirst) && (c == '}' && top.kind == shapeObject || c == ']' && top.kind == shapeArray):
			sc.i++
			stack = stack[:len(stack)-1]
		case top.kind == shapeObject && (top.state == stFirst || top.state == stKey):
			if c != '"' {
				return nil, false
			}
			key, cut, ok := sc.str(top.node != nil && len(top.node.fields) < maxShapeFields)
			if !ok {
				return sc.cutShort(root, stack)
			}
			if top.node != nil {
				top.node.count++
				if len(top.node.fields) < maxShapeFields {
					top.node.fields = append(top.node.fields, shapeField{key: key, cut: cut})
					top.kept = true
				}
			}
			top.state = stColon
		case top.state == stColon:
			if c != ':' {
				return nil, false
			}
			sc.i++
			top.state = stValue
		case top.state == stValue || top.kind == shapeArray && top.state == stFirst:
			k := kindOf(c)
			if k == 0 {
				return nil, false
			}
			top.state = stNext
			// Where the value is kept, if anywhere: an object's newest
			// field, an array's first element.
			var slot **shapeNode
			if n := top.node; n != nil {
				if top.kept {
					slot = &n.fields[len(n.fields)-1].val
					top.kept = false
				}
				if n.kind == shapeArray {
					n.count++
					if n.elem == nil {
						slot = &n.elem
					} else if k != n.elem.kind {
						n.others |= k
					}
				}
			}
			var node *shapeNode
			if slot != nil {
				node = sc.newNode(k, top.depth+1)
				*slot = node
			}
			if k == shapeObject || k == shapeArray {
				if len(stack) >= MaxShapeNesting {
					return nil, false
				}
				sc.i++
				stack = append(stack, shapeFrame{node: node, kind: k, depth: top.depth + 1})
				continue
			}
			if !sc.scalar(k) {
				return sc.cutShort(root, stack)
			}
		default:
			return nil, false
		}
	}
	sc.space()
	if sc.i < len(s) {
		return nil, false // more than one value
	}
	return root, true
}

// cutShort ends a scan whose last value did not end: the end of a prefix,
// or malformed JSON.
func (sc *shapeScanner) cutShort(root *shapeNode, stack []shapeFrame) (*shapeNode, bool) {
	if !sc.more || sc.i < len(sc.s) {
		return nil, false
	}
	for _, f := range stack {
		if f.node != nil {
			f.node.open = true
		}
	}
	return root, true
}

// newNode returns a node for a value at the given depth, or nil when the
// scan keeps no more.
func (sc *shapeScanner) newNode(kind byte, depth int) *shapeNode {
	if depth > maxShapeDepth || sc.nodes >= maxShapeNodes {
		return nil
	}
	sc.nodes++
	return &shapeNode{kind: kind}
}

func kindOf(c byte) byte {
	switch {
	case c == '{':
		return shapeObject
	case c == '[':
		return shapeArray
	case c == '"':
		return shapeString
	case c == '-' || c >= '0' && c <= '9':
		return shapeNumber
	case c == 't' || c == 'f':
		return shapeBool
	case c == 'n':
		return shapeNull
	}
	return 0
}

func (sc *shapeScanner) space() {
	for sc.i < len(sc.s) {
		switch sc.s[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// scalar scans a string, number, true, false or null. It returns false at
// malformed JSON, and at the end of the text before the value ended, with
// sc.i then at the end.
func (sc *shapeScanner) scalar(k byte) bool {
	switch k {
	case shapeString:
		_, _, ok := sc.str(false)
		return ok
	case shapeNumber:
		return sc.number()
	}
	var lit string
	switch sc.s[sc.i] {
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	default:
		lit = "null"
	}
	rest := sc.s[sc.i:]
	if len(rest) < len(lit) {
		if strings.HasPrefix(lit, rest) {
			sc.i = len(sc.s)
		}
		return false
	}
	if rest[:len(lit)] != lit {
		return false
	}
	sc.i += len(lit)
	return true
}

// number scans a JSON number.
func (sc *shapeScanner) number() bool {
	s, i := sc.s, sc.i
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	end := func() bool { // the text ended inside the number
		sc.i = i
		return false
	}
	if s[i] == '-' {
		i++
	}
	if i == len(s) {
		return end()
	}
	if s[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			if i == len(s) {
				return end()
			}
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			if i == len(s) {
				return end()
			}
			return false
		}
	}
	if i == len(s) && sc.more {
		// The number may go on past the text; the value is a number anyway.
		return end()
	}
	sc.i = i
	return true
}

// str scans a string at sc.i, decoding its first maxShapeKey bytes when
// keep is set. It returns false at malformed JSON and at the end of the
// text before the closing quote, with sc.i then at the end.
func (sc *shapeScanner) str(keep bool) (string, bool, bool) {
	s := sc.s
	i := sc.i + 1
	var b []byte
	cut := false
	add := func(p ...byte) {
		if !keep || cut {
			return
		}
		if len(b)+len(p) > maxShapeKey {
			cut = true
			return
		}
		b = append(b, p...)
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			sc.i = i + 1
			return string(b), cut, true
		case c < 0x20:
			return "", false, false
		case c != '\\':
			add(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			i = len(s) // the text ends inside the escape
			continue
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			add(e)
		case 'b':
			add('\b')
		case 'f':
			add('\f')
		case 'n':
			add('\n')
		case 'r':
			add('\r')
		case 't':
			add('\t')
		case 'u':
			if i+6 > len(s) {
				if !isHex(s[i+2:]) {
					return "", false, false
				}
				i = len(s)
				continue
			}
			if !isHex(s[i+2 : i+6]) {
				return "", false, false
			}
			r, _ := strconv.ParseUint(s[i+2:i+6], 16, 32)
			rr := rune(r)
			if utf16.IsSurrogate(rr) && i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' && isHex(s[i+8:i+12]) {
				r2, _ := strconv.ParseUint(s[i+8:i+12], 16, 32)
				if d := utf16.DecodeRune(rr, rune(r2)); d != utf8.RuneError {
					rr = d
					i += 6
				}
			}
			add(utf8.AppendRune(nil, rr)...)
			i += 6
			continue
		default:
			return "", false, false
		}
		i += 2
	}
	sc.i = len(s)
	return "", false, false
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
