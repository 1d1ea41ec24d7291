package policy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func subj(size int) *Subject {
	return NewSubject("t", "r", 1, []Part{{Kind: KindText, Size: size}}, func() string { return strings.Repeat("x", size) })
}

func TestH8Policies(t *testing.T) {
	const _ = Always // a constant, as Haystack's policies are singletons
	if !Always.ShouldOffload(subj(0)) || Never.ShouldOffload(subj(1<<20)) {
		t.Error("fixed policies do not answer as named")
	}
	for _, tc := range []struct {
		threshold, size int
		want            bool
	}{{3, 2, false}, {3, 3, false}, {3, 4, true}, {0, 0, false}, {0, 1, true}, {-1, 0, true}} {
		if got := OverChars(tc.threshold).ShouldOffload(subj(tc.size)); got != tc.want {
			t.Errorf("OverChars(%d) on %d characters = %v, want %v", tc.threshold, tc.size, got, tc.want)
		}
	}
}

func TestSubjectContentIsLazy(t *testing.T) {
	calls := 0
	s := NewSubject("t", "r", 1, []Part{{Size: 5}, {Size: 8}}, func() string { calls++; return "abc" })
	if s.Size != 13 {
		t.Errorf("Size = %d, want the sum of the parts, 13", s.Size)
	}
	OverChars(3).ShouldOffload(s)
	if calls != 0 {
		t.Error("OverChars built the content")
	}
	s.Content()
	s.Content()
	if calls != 1 {
		t.Errorf("content built %d times, want once", calls)
	}
	if TextSize("héllo") != 5 || BinarySize(4) != 8 || BinarySize(3) != 4 || BinarySize(0) != 0 {
		t.Error("size helpers do not count as Haystack does")
	}
}

func TestH6Strategies(t *testing.T) {
	s := MustStrategies(
		For("web_search", Always),
		For("get_time", Never),
		ForGroup([]string{"read_file", "list_dir"}, OverChars(4000)),
		ForGroup([]string{"list_dir", "grep"}, OverChars(1)),
		ForGroup([]string{"*"}, Never),
		Default(OverChars(8000)),
		ForGroup([]string{"web_search"}, Never),
	)
	for _, tc := range []struct {
		tool string
		want Policy
		ok   bool
	}{
		{"web_search", Always, true},         // exact beats a later group
		{"get_time", Never, true},            // exact
		{"read_file", OverChars(4000), true}, // first group
		{"list_dir", OverChars(4000), true},  // the first group containing it
		{"grep", OverChars(1), true},
		{"other", OverChars(8000), true}, // wildcard; the group holding "*" is no wildcard
		{"*", OverChars(8000), true},
	} {
		p, ok := s.For(tc.tool)
		if ok != tc.ok || p != tc.want {
			t.Errorf("For(%q) = %v, %v; want %v, %v", tc.tool, p, ok, tc.want, tc.ok)
		}
	}
	none := MustStrategies(For("a", Always), ForGroup([]string{"*", "b"}, Always))
	if p, ok := none.For("c"); ok {
		t.Errorf("without a wildcard For(c) = %v, want no policy", p)
	}
	var nilS *Strategies
	if _, ok := nilS.For("x"); ok {
		t.Error("nil strategies matched")
	}
}

func TestNewStrategiesRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []Entry
	}{
		{"nil policy", []Entry{For("a", nil)}},
		{"single entry naming no tool", []Entry{{Policy: Always}}},
		{"tool twice", []Entry{For("a", Always), For("a", Never)}},
		{"wildcard twice", []Entry{Default(Always), Default(Never)}},
		{"several tools not a group", []Entry{{Tools: []string{"a", "b"}, Policy: Always}}},
	} {
		if _, err := NewStrategies(tc.entries...); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

func TestH20StrategiesRoundTrip(t *testing.T) {
	s := MustStrategies(
		For("web_search", Always),
		For("get_time", Never),
		ForGroup([]string{"read_file", "list_dir"}, OverChars(4000)),
		Default(OverChars(8000)),
	)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"web_search":{"type":"toolcas.policy.Always","init_parameters":{}},` +
		`"get_time":{"type":"toolcas.policy.Never","init_parameters":{}},` +
		`"[\"read_file\", \"list_dir\"]":{"type":"toolcas.policy.OverChars","init_parameters":{"threshold":4000}},` +
		`"*":{"type":"toolcas.policy.OverChars","init_parameters":{"threshold":8000}}}`
	var compact bytes.Buffer
	json.Compact(&compact, b)
	if compact.String() != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", compact.String(), want)
	}
	var back Strategies
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"web_search", "get_time", "read_file", "list_dir", "other"} {
		p1, _ := s.For(tool)
		p2, _ := back.For(tool)
		if p1 != p2 {
			t.Errorf("after a round trip, %s gets %v, want %v", tool, p2, p1)
		}
	}
}

// haystackStrategies is offload_strategies as Haystack's to_dict writes it.
const haystackStrategies = `{
  "web_search": {"type": "haystack.hooks.tool_result_offloading.policies.AlwaysOffload", "init_parameters": {}},
  "get_time": {"type": "haystack.hooks.tool_result_offloading.policies.NeverOffload", "init_parameters": {}},
  "[\"read_file\", \"list_dir\"]": {"type": "haystack.hooks.tool_result_offloading.policies.OffloadOverChars", "init_parameters": {"threshold": 4000}},
  "[\"*\", \"grep\"]": {"type": "haystack.hooks.tool_result_offloading.policies.AlwaysOffload", "init_parameters": {}},
  "*": {"type": "haystack.hooks.tool_result_offloading.policies.OffloadOverChars", "init_parameters": {"threshold": 8000}}
}`

func TestH20LoadsHaystackStrategies(t *testing.T) {
	var s Strategies
	if err := json.Unmarshal([]byte(haystackStrategies), &s); err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]Policy{"web_search": Always, "get_time": Never, "list_dir": OverChars(4000), "grep": Always, "x": OverChars(8000)} {
		if p, _ := s.For(tool); p != want {
			t.Errorf("For(%q) = %v, want %v", tool, p, want)
		}
	}
	// Group order decides, and survives loading.
	if e := s.Entries(); len(e) != 5 || !e[2].Group || e[2].Tools[1] != "list_dir" || e[3].Tools[0] != "*" || !e[3].Group {
		t.Errorf("entries = %+v", e)
	}
}

// TestEmptyGroupMatchesNothing: a configuration whose strategies hold an
// empty group ("[]", which Haystack loads as a group naming no tool) loads,
// the group applies to no tool, and it is saved as it came.
func TestEmptyGroupMatchesNothing(t *testing.T) {
	in := `{"[]": {"type": "toolcas.policy.Always"}, "*": {"type": "toolcas.policy.Never"}}`
	var s Strategies
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatalf("Unmarshal(%s): %v", in, err)
	}
	for _, tool := range []string{"a", "", "[]"} {
		if p, ok := s.For(tool); !ok || p != Never {
			t.Errorf("For(%q) = %v, %v; want the wildcard's Never", tool, p, ok)
		}
	}
	out, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	var again Strategies
	if err := json.Unmarshal(out, &again); err != nil || len(again.Entries()) != 2 || !again.Entries()[0].Group || len(again.Entries()[0].Tools) != 0 {
		t.Errorf("saved as %s, loaded again as %+v, %v", out, again.Entries(), err)
	}
	if _, err := NewStrategies(Entry{Policy: Always}); err == nil {
		t.Error("a single entry naming no tool was accepted")
	}
}

func TestLoadRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a": {"type": "haystack.hooks.tool_result_offloading.policies.CallableOffloadPolicy", "init_parameters": {"condition": "m.f"}}}`, "Python function"},
		{`{"a": {"type": "toolcas.policy.Sometimes", "init_parameters": {}}}`, "unknown policy type"},
		{`{"a": {"type": "toolcas.policy.OverChars", "init_parameters": {}}}`, "no threshold"},
		{`{"a": {"type": "toolcas.policy.OverChars", "init_parameters": {"threshold": "10"}}}`, "threshold"},
		{`{"a": {"type": "toolcas.policy.OverChars", "init_parameters": {"threshold": 1.5}}}`, "threshold"},
		{`{"a": {"type": "toolcas.policy.Always", "init_parameters": {"x": 1}}}`, "unknown field"},
		{`{"a": {"init_parameters": {}}}`, "no \"type\""},
		{`{"[\"a\", 1]": {"type": "toolcas.policy.Always"}}`, "not a JSON array of names"},
		{`{"a": {"type": "toolcas.policy.Always"}, "a": {"type": "toolcas.policy.Never"}}`, "twice"},
		{`["a"]`, "want an object"},
		{`{"a": {"type": "toolcas.policy.Always"}} x`, "after top-level value"},
	} {
		var s Strategies
		err := json.Unmarshal([]byte(tc.in), &s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Unmarshal(%s) = %v, want an error saying %q", tc.in, err, tc.want)
		}
	}
	if _, err := Marshal(Func(func(*Subject) bool { return true })); err == nil {
		t.Error("a Func policy was saved")
	}
}

func FuzzLoadStrategies(f *testing.F) {
	f.Add(haystackStrategies)
	f.Add(`{"*": {"type": "toolcas.policy.OverChars", "init_parameters": {"threshold": -5}}}`)
	f.Add(`{"[\"a\",\"b\"]": {"type": "toolcas.policy.Never", "init_parameters": null}}`)
	f.Add(`{}`)
	f.Add(`{"a": {"type": "toolcas.policy.OverChars", "init_parameters": {"threshold": 9, "preview": "json_shape"}}}`)
	f.Add(`{"*": {"type": "toolcas.policy.Always", "init_parameters": {"preview": "head_tail"}}}`)
	f.Fuzz(func(t *testing.T, in string) {
		var s Strategies
		if err := json.Unmarshal([]byte(in), &s); err != nil {
			return
		}
		// Whatever loads saves, and loads back to the same decisions.
		b, err := json.Marshal(&s)
		if err != nil {
			t.Fatalf("loaded %q but cannot save it: %v", in, err)
		}
		var back Strategies
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("saved %s does not load: %v", b, err)
		}
		for _, e := range s.Entries() {
			for _, tool := range append(e.Tools, "unlisted-tool") {
				p1, ok1 := s.For(tool)
				p2, ok2 := back.For(tool)
				if p1 != p2 || ok1 != ok2 || PreviewOf(p1) != PreviewOf(p2) {
					t.Fatalf("tool %q: %v/%v before, %v/%v after a round trip of %s", tool, p1, ok1, p2, ok2, b)
				}
			}
		}
	})
}

func TestTextSizeCountsAsRuneCount(t *testing.T) {
	for _, s := range []string{"", "a", "abcdefgh", "abcdefghi", "héllo wörld, ünïcode", strings.Repeat("x", 1000) + "é" + strings.Repeat("y", 13),
		"\xff\xfe\xfd invalid", strings.Repeat("abcdefg\x80", 9), "日本語のテキスト"} {
		if got, want := TextSize(s), utf8.RuneCountInString(s); got != want {
			t.Errorf("TextSize(%q) = %d, want %d", s, got, want)
		}
	}
}
