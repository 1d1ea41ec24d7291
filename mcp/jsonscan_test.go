package mcp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecodeString: the scanner decodes any JSON string as encoding/json
// does (escapes, surrogate pairs, bytes that are not UTF-8), and refuses
// what encoding/json refuses; read in small buffers, as it is from a spool.
func FuzzDecodeString(f *testing.F) {
	for _, s := range []string{`"plain"`, `"esc \" \\ \/ \b \f \n \r \t"`, `"\u00e9\u20ac\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`,
		`"\ud800\ud800\udc00"`, `"\udc00\ud800"`, "\"\xff\xfe bad\"", "\"cut \xe2\x82\"", `"é ∑ 😀"`, `"ctl ` + "\x01" + `"`, `"\x"`, `"\u12"`, `"open`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want string
		werr := json.Unmarshal(in, &want)
		if werr == nil && (len(bytes.TrimSpace(in)) == 0 || bytes.TrimSpace(in)[0] != '"') {
			return // not a string
		}
		var got bytes.Buffer
		s := newScanner(bytes.NewReader(in), 0)
		err := s.decodeString(&got)
		if err == nil {
			if c, perr := s.peek(); perr == nil {
				// Something after the string: encoding/json refuses it.
				_ = c
				if werr == nil {
					t.Fatalf("%q: trailing bytes but encoding/json took it", in)
				}
				return
			}
		}
		switch {
		case werr != nil && err == nil:
			t.Fatalf("%q: decoded %q, encoding/json refuses it: %v", in, got.String(), werr)
		case werr == nil && err != nil:
			t.Fatalf("%q: %v, encoding/json decodes %q", in, err, want)
		case werr == nil && got.String() != want:
			t.Fatalf("%q: decoded %q, encoding/json %q", in, got.String(), want)
		}
	})
}

// TestWalk: the scanner walks objects and arrays of any nesting, capturing
// small values compact, skipping large ones, knowing where each starts.
func TestWalk(t *testing.T) {
	in := `{ "id" : 7, "result": {"content": [ {"type":"text","text":"` + strings.Repeat("x", 1000) + `"}, {"type": "image", "data": "AAAA", "n": [1, {"a": "}]"}, -2.5e3, true, null]} ],
	  "isError" : false }, "tail": "end" }`
	s := newScanner(strings.NewReader(in), 0)
	var keys []string
	var starts []int64
	err := s.object(func(k string) error {
		keys = append(keys, k)
		starts = append(starts, s.off)
		if k != "result" {
			return s.copyValue(&bytes.Buffer{})
		}
		return s.object(func(k string) error {
			keys = append(keys, k)
			if k != "content" {
				return s.copyValue(&bytes.Buffer{})
			}
			return s.array(func(i int) error {
				raw, over, err := s.capture(100)
				if i == 0 && (!over || raw != nil) || i == 1 && (over || !json.Valid(raw) || bytes.Contains(raw, []byte(" "))) {
					t.Errorf("item %d: %q, over %v", i, raw, over)
				}
				return err
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys, ","); got != "id,result,content,isError,tail" {
		t.Errorf("keys %s", got)
	}
	if c, err := newScanner(strings.NewReader(in[starts[0]:]), 0).peek(); err != nil || c != '7' {
		t.Errorf("id starts at %d: %q", starts[0], in[starts[0]:starts[0]+3])
	}
	for _, bad := range []string{`{"a" 1}`, `{"a":1,}`, `[1 2]`, `{"a":`, `{"a":"x`, `}`} {
		s := newScanner(strings.NewReader(bad), 0)
		if err := s.object(func(string) error { return s.copyValue(&bytes.Buffer{}) }); err == nil {
			if err := s.array(func(int) error { return s.copyValue(&bytes.Buffer{}) }); err == nil {
				t.Errorf("%s walked without an error", bad)
			}
		}
	}
}
