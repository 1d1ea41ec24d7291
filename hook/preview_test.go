package hook_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// apiResult is a JSON document as an API tool returns it: 250 items, a
// total, a null cursor.
var apiResult = func() string {
	var b strings.Builder
	b.WriteString(`{"items": [`)
	for i := range 250 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"id": %d, "name": "item %d", "tags": ["a", "b"], "price": {"amount": %d.5, "currency": "EUR"}, "active": %v}`, i, i, i, i%2 == 0)
	}
	b.WriteString(`], "total": 250, "next": null}`)
	return b.String()
}()

// logText is 300 numbered log lines.
var logText = func() string {
	var b strings.Builder
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&b, "%03d ok\n", i)
	}
	b.WriteString("FAIL: TestX (0.01s)")
	return b.String()
}()

func modeHook(t *testing.T) *hook.Hook {
	t.Helper()
	return mustHook(t, hook.NewMemStore(),
		policy.For("api", policy.MustPreview(policy.Always, policy.PreviewJSONShape)),
		policy.For("logs", policy.MustPreview(policy.Always, policy.PreviewHeadTail)),
		policy.For("plain", policy.MustPreview(policy.Always, policy.PreviewHead)),
		policy.Default(policy.Always))
}

// TestPreviewModePointers: each mode's pointer, golden. head, the default,
// is exactly Haystack's preview (H1) whether or not it was named.
func TestPreviewModePointers(t *testing.T) {
	h := modeHook(t)
	for _, tc := range []struct {
		name, tool string
		part       hook.Part
		want       []string // in the pointer
	}{
		{"json_shape", "api", hook.Text(apiResult), []string{`. JSON shape: {"items": array[250] of {"id": number, "name": string, "tags": array[2] of string, "price": {"amount": number, "currency": string}, "active": bool}, "total": number, "next": null}`}},
		{"json_shape_pretty", "api", hook.Text("{\n  \"ok\": true,\n  \"rows\": [\n    [1, \"a\"],\n    [2, \"b\"]\n  ]\n}\n"), []string{`. JSON shape: {"ok": bool, "rows": array[2] of array[2] of number | string}`}},
		{"json_shape_not_json", "api", hook.Text(longText), []string{". Preview: Fusion startups", "..."}},
		{"json_shape_scalar", "api", hook.Text(`"just a string"`), []string{`. Preview: "just a string"`}},
		{"json_shape_head_only", "api", headOnly(apiResult, 700, true), []string{`. JSON shape of the first 700 bytes: {"items": array[7+] of {"id": number, "name": string, "tags": array[2] of string, "price": {"amount": number, "currency": string}, "active": bool}, …}`}},
		{"head_tail", "logs", hook.Text(logText), []string{". Preview: 001 ok\n", " [... 1950 characters cut ...] ", "\nFAIL: TestX (0.01s)"}},
		{"head_tail_short", "logs", hook.Text("short log\n"), []string{". Preview: short log\n"}},
		{"head_tail_source", "logs", headOnly(logText, 120, true), []string{"[... 1950 characters cut ...]", "FAIL: TestX (0.01s)"}},
		{"head_tail_no_tail", "logs", headOnly(logText, 120, false), []string{". Preview: 001 ok", "..."}},
		{"head_named", "plain", hook.Text(longText), []string{". Preview: Fusion startups"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pointerText(t, offload(t, h, step, result(tc.tool, "call-1", tc.part))[0])
			golden(t, tc.name, got)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("pointer does not say %q:\n%s", w, got)
				}
			}
			_, preview, _ := strings.Cut(got, "). ")
			_, preview, _ = strings.Cut(preview, ": ")
			if n := utf8.RuneCountInString(strings.TrimSuffix(preview, "...")); n > hook.DefaultPreviewChars {
				t.Errorf("preview of %d code points, more than %d: %q", n, hook.DefaultPreviewChars, preview)
			}
		})
	}
	// head, named or not, is the preview every pointer had before modes.
	named := pointerText(t, offload(t, modeHook(t), step, result("plain", "call-123", hook.Text(longText)))[0])
	unnamed := pointerText(t, offload(t, mustHook(t, hook.NewMemStore()), step, result("plain", "call-123", hook.Text(longText)))[0])
	if named != unnamed {
		t.Errorf("head named:\n%s\nwant, as without a mode:\n%s", named, unnamed)
	}
}

// headOnly is a text part's Source that keeps only the first n bytes of s
// as its head, and its last n as its tail when tail is set: what the hook
// knows of a part too large to hold.
func headOnly(s string, n int, tail bool) hook.Part {
	p := textSource(s)
	p.Source.Head = []byte(s[:n])
	if tail {
		p.Source.Tail = []byte(s[len(s)-n:])
	}
	return p
}

// TestOffloadPickedUsesPolicyPreview: a result offloaded by
// OffloadPicked is previewed in its tool's mode too, and in head for a
// tool without a policy.
func TestOffloadPickedUsesPolicyPreview(t *testing.T) {
	h := mustHook(t, hook.NewMemStore(), policy.For("api", policy.MustPreview(policy.Never, policy.PreviewJSONShape)))
	out, err := h.OffloadPicked(t.Context(), step, []hook.Result{
		result("api", "c1", hook.Text(`{"a": [1, 2]}`)),
		result("other", "c2", hook.Text(`{"a": [1, 2]}`)),
	}, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{`JSON shape: {"a": array[2] of number}`, `Preview: {"a": [1, 2]}`} {
		if got := pointerText(t, out[i]); !strings.HasSuffix(got, want) {
			t.Errorf("pointer %d = %q, want it to end %q", i, got, want)
		}
	}
}

func TestJSONShape(t *testing.T) {
	for _, tc := range []struct {
		in    string
		more  bool
		limit int
		want  string // "" for no shape
	}{
		{`{"items": [{"id": 1, "name": "a"}], "total": 2, "next": null}`, false, 200, `{"items": array[1] of {"id": number, "name": string}, "total": number, "next": null}`},
		{`[1, "a", null, 2, true, {}]`, false, 200, `array[6] of number | object | string | bool | null`},
		{`{}`, false, 200, `{}`},
		{` [ ] `, false, 200, `array[0]`},
		{`{"a": {"b": {"c": {"d": {"e": {"f": {"g": 1}}}}}}}`, false, 200, `{"a": {"b": {"c": {"d": {"e": {"f": {…1 key}}}}}}}`},
		{`{"a": {"b": {"c": {"d": {"e": {"f": {"g": 1}}}}}}}`, false, 30, `{"a": {"b": {"c": {…1 key}}}}`}, {`{"a": {"b": {"c": {"d": {"e": {"f": {"g": 1}}}}}}}`, false, 28, `{"a": {"b": {…1 key}}}`},
		{`{"k\u00e9y\"\n": 1, "x": [[]]}`, false, 200, `{"kéy\"\u000a": number, "x": array[1] of array[0]}`},
		{`{"` + strings.Repeat("é", 40) + `": 1}`, false, 200, `{"` + strings.Repeat("é", 32) + `…": number}`},
		{`{"a": 1, "b": 2, "c": 3, "d": 4}`, false, 28, `{"a": number, …3 more keys}`},
		{`{"a": 1, "b": 2}`, false, 10, `{…2 keys}`},
		{`{"a": 1, "b": 2}`, false, 5, ""},
		// A prefix: what it shows, open containers marked.
		{`{"items": [{"id": 1, "na`, true, 200, `{"items": array[1+] of {"id": number, …}, …}`},
		{`[1, 2, 3`, true, 200, `array[3+] of number`},
		{`{"a": tr`, true, 200, `{"a": bool, …}`},
		{`{"a": "x\u00`, true, 200, `{"a": string, …}`},
		{`{"a": 1} trailing`, true, 200, ""},
		{`{"a": 1}`, true, 200, `{"a": number}`},
		// Not a JSON object or array.
		{`{"items": [{"id": 1, "na`, false, 200, ""},
		{`42`, false, 200, ""},
		{`"text"`, false, 200, ""},
		{`{"a": 1,}`, false, 200, ""},
		{`{"a" 1}`, false, 200, ""},
		{`[01]`, false, 200, ""},
		{`[1.]`, false, 200, ""},
		{`[-]`, false, 200, ""},
		{`[nul]`, false, 200, ""},
		{`["a\x"]`, false, 200, ""},
		{"[\"a\tb\"]", false, 200, ""},
		{`{"a": 1}{}`, false, 200, ""},
		{`{"a": 1]`, false, 200, ""},
		{"", false, 200, ""},
		{"Fusion startups reported", true, 200, ""},
		{strings.Repeat("[", hook.MaxShapeNesting+1) + strings.Repeat("]", hook.MaxShapeNesting+1), false, 200, ""},
	} {
		got, ok := hook.JSONShape(tc.in, tc.more, tc.limit)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("JSONShape(%.60q, %v, %d) = %q, %v; want %q", tc.in, tc.more, tc.limit, got, ok, tc.want)
		}
	}
}

// TestJSONShapeWide: however wide the document, the shape fits the limit,
// showing the top level's first keys and counting the others.
func TestJSONShapeWide(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 5000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"field_%d": {"x": [1], "y": "z"}`, i)
	}
	b.WriteString("}")
	if got, ok := hook.JSONShape(b.String(), false, 20); got != "{…5000 keys}" || !ok {
		t.Errorf("JSONShape(5000 keys, 20) = %q, %v; want the count alone", got, ok)
	}
	for _, limit := range []int{40, 80, 200, 1000, 5000} {
		got, ok := hook.JSONShape(b.String(), false, limit)
		if !ok || utf8.RuneCountInString(got) > limit || !strings.HasPrefix(got, `{"field_0": `) || !strings.Contains(got, " more keys}") {
			t.Errorf("JSONShape(5000 keys, %d) = %q, %v", limit, got, ok)
		}
	}
}

// TestJSONShapeBounded: a huge array is described by its first
// MaxShapeScan bytes, in memory that does not grow with it; deep nesting
// is given up on, not recursed into.
func TestJSONShapeBounded(t *testing.T) {
	n := hook.MaxShapeScan/2 + 1000
	huge := "[" + strings.Repeat("1,", n) + "1]"
	got, ok := hook.JSONShape(huge, false, 200)
	if want := fmt.Sprintf("array[%d+] of number", hook.MaxShapeScan/2); !ok || got != want {
		t.Errorf("JSONShape(%d bytes) = %q, %v; want %q", len(huge), got, ok, want)
	}
	if allocs := testing.AllocsPerRun(3, func() { hook.JSONShape(huge, false, 200) }); allocs > 100 {
		t.Errorf("JSONShape of %d bytes made %.0f allocations, want a few", len(huge), allocs)
	}
	deep := strings.Repeat(`{"a":[`, 1<<20)
	if got, ok := hook.JSONShape(deep, true, 200); ok {
		t.Errorf("JSONShape of nesting %d = %q, want none", 2<<20, got)
	}
}

// BenchmarkJSONShape measures the scan of MaxShapeScan bytes of an array
// of records, the most a pointer's shape reads.
func BenchmarkJSONShape(b *testing.B) {
	doc := strings.Repeat(apiResult[len(`{"items": [`):len(apiResult)-len(`], "total": 250, "next": null}`)]+", ", hook.MaxShapeScan/len(apiResult)+1)
	doc = `{"items": [` + doc
	b.SetBytes(int64(min(len(doc), hook.MaxShapeScan)))
	for b.Loop() {
		hook.JSONShape(doc, false, hook.DefaultPreviewChars)
	}
}
