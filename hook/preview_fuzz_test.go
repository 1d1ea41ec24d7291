package hook_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolcas/toolcas/hook"
)

// FuzzJSONShape: whatever the text, JSONShape never panics, and its shape
// is valid UTF-8 within the limit. It finds a shape for every valid JSON
// object or array and for every beginning of one, and for no other
// complete text.
func FuzzJSONShape(f *testing.F) {
	f.Add(apiResult[:2000], 200, 700)
	f.Add(`{"a": [1, "x", null, {"b": true}], "c": {}}`, 40, 10)
	f.Add(`[{"k\u00e9y\"": -1.5e3}, [], "\ud83d\ude00"]`, 12, 3)
	f.Add(`{"a": 1,}`, 200, 5)
	f.Add("[\"\xff\xfe\"]", 5, 2)
	f.Add(strings.Repeat("[", 200), 100, 50)
	f.Fuzz(func(t *testing.T, in string, limit, cut int) {
		limit = int(uint(limit) % 2000)
		for _, more := range []bool{false, true} {
			got, ok := hook.JSONShape(in, more, limit)
			if !ok && got != "" {
				t.Fatalf("JSONShape(%q, %v, %d) = %q without a shape", in, more, limit, got)
			}
			if n := utf8.RuneCountInString(got); n > limit {
				t.Fatalf("JSONShape(%q, %v, %d) = %q, %d code points", in, more, limit, got, n)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("JSONShape(%q, %v, %d) = %q, not UTF-8", in, more, limit, got)
			}
			if ok && !more && !json.Valid([]byte(in)) {
				t.Fatalf("JSONShape(%q) = %q for invalid JSON", in, got)
			}
		}
		trimmed := strings.TrimLeft(in, " \t\r\n")
		if !json.Valid([]byte(in)) || trimmed == "" || trimmed[0] != '{' && trimmed[0] != '[' || nesting(in) > hook.MaxShapeNesting || limit < 20 {
			return
		}
		if got, ok := hook.JSONShape(in, false, limit); !ok {
			t.Fatalf("JSONShape(%q, false, %d) found no shape of valid JSON (%q)", in, limit, got)
		}
		// Any beginning of it that starts the object or array has a shape.
		start := len(in) - len(trimmed)
		if cut < 0 {
			cut = -cut
		}
		k := start + 1 + cut%(len(trimmed))
		if got, ok := hook.JSONShape(in[:k], true, limit); !ok {
			t.Fatalf("JSONShape(%q, true, %d) found no shape of the beginning of valid JSON (%q)", in[:k], limit, got)
		}
	})
}

// nesting returns the deepest nesting of brackets in JSON text, outside
// strings.
func nesting(s string) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
