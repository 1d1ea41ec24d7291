package compact_test

import (
	"strings"
	"testing"

	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/tokens"
)

// TestPythonJSON: arguments written as Python's json.dumps(args,
// sort_keys=True) writes them (the expected strings are Python's own).
func TestPythonJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"b":1,"a":[1.0,2.5e-7,1e16,"é\u0001x"]}`, `{"a": [1.0, 2.5e-07, 1e+16, "\u00e9\u0001x"], "b": 1}`},
		{`{"q":"naïve 😀","n":null,"t":true,"f":false,"z":-0,"x":1.5e300,"y":0.0001,"w":1e15,"v":123456789012345678901234567890,"u":-0.0,"s":"tab\tq\"bs\\ del\u007f"}`,
			`{"f": false, "n": null, "q": "na\u00efve \ud83d\ude00", "s": "tab\tq\"bs\\ del\u007f", "t": true, "u": -0.0, "v": 123456789012345678901234567890, "w": 1000000000000000.0, "x": 1.5e+300, "y": 0.0001, "z": 0}`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{``, `{}`},
		{`{"k":{"z":1,"a":{"c":[1,2],"b":"x/y"}}}`, `{"k": {"a": {"b": "x/y", "c": [1, 2]}, "z": 1}}`},
		{`3.14`, `3.14`},
		{`"plain"`, `"plain"`},
		{`not json`, `not json`},
		{`{"a":1} {"b":2}`, `{"a":1} {"b":2}`},
	} {
		if got := compact.PythonJSON(tc.in); got != tc.want {
			t.Errorf("PythonJSON(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// conversationOfEveryKind has a message of every shape Haystack renders.
func conversationOfEveryKind() []compact.Message {
	return []compact.Message{
		{Role: compact.RoleSystem, Text: "rules"},
		{Role: compact.RoleUser, Text: "find it"},
		{Role: compact.RoleAssistant, Text: "looking", ToolCalls: []compact.ToolCall{
			{Tool: "search", ID: "c1", Arguments: `{"q":"x","n":2}`},
			{Tool: "fetch", ID: "c2"},
		}},
		{Role: compact.RoleTool, Result: &hook.Result{Tool: "search", CallID: "c1", Parts: []hook.Part{hook.Text("found "), hook.Image("image/png", []byte{1, 2}), hook.Text(" and "), hook.File("application/pdf", "q3.pdf", []byte{3}), hook.File("", "", []byte{4})}}},
		{Role: compact.RoleTool, Result: &hook.Result{Tool: "fetch", CallID: "c2", Error: true, Parts: []hook.Part{hook.Text("timeout")}}},
		{Role: compact.RoleAssistant},
	}
}

// TestRender: line for line as Haystack's _rendered_conversation.
func TestRender(t *testing.T) {
	want := strings.Join([]string{
		"[system] rules",
		"[user] find it",
		"[assistant] looking",
		`[assistant -> tool_call] search({"n": 2, "q": "x"})`,
		"[assistant -> tool_call] fetch({})",
		"[tool:search] found <image> and <file: q3.pdf><file: unnamed>",
		"[tool:fetch (error)] timeout",
		"[assistant] <no content>",
	}, "\n")
	if got := compact.Render(conversationOfEveryKind()); got != want {
		t.Errorf("Render =\n%s\nwant\n%s", got, want)
	}
}

// TestCounter: the rendered text counted once, then a flat charge a
// media part, as Haystack's counters count.
func TestCounter(t *testing.T) {
	msgs := conversationOfEveryKind()
	text := compact.Render(msgs)
	chars := len([]rune(text))
	if got, want := compact.Approximate().Count(msgs), chars/4+85+2*1000; got != want {
		t.Errorf("Approximate().Count = %d, want %d (%d code points / 4, an image, two files)", got, want, chars)
	}
	c := compact.Counter{Text: tokens.Approximate{CharsPerToken: 2.5}, TokensPerImage: 10, TokensPerFile: 20}
	if got, want := c.Count(msgs), int(float64(chars)/2.5)+10+2*20; got != want {
		t.Errorf("Count with 2.5 chars a token = %d, want %d", got, want)
	}
	c.NoMediaTokens = true
	if got, want := c.Count(msgs), int(float64(chars)/2.5); got != want {
		t.Errorf("Count without media = %d, want %d", got, want)
	}
	if got := compact.Approximate().Count(nil); got != 0 {
		t.Errorf("Count(nil) = %d, want 0", got)
	}
	exact, err := compact.NewCounter(tokens.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := tokens.NewExact(tokens.O200kBase)
	if got, want := exact.Count(msgs), enc.CountText(text)+85+2000; got != want {
		t.Errorf("o200k_base Count = %d, want %d", got, want)
	}
	if _, err := compact.NewCounter("gpt2"); err == nil || !strings.Contains(err.Error(), "gpt2") {
		t.Errorf("NewCounter(gpt2) = %v, want an error naming it", err)
	}
}
