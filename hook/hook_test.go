package hook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/pointer/<name>.golden.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "pointer", name+".golden")
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./hook -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("pointer %s:\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func mustHook(t *testing.T, s hook.Store, entries ...policy.Entry) *hook.Hook {
	t.Helper()
	if len(entries) == 0 {
		entries = []policy.Entry{policy.Default(policy.Always)}
	}
	h, err := hook.New(s, policy.MustStrategies(entries...))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func offload(t *testing.T, h *hook.Hook, step hook.Step, results ...hook.Result) []hook.Result {
	t.Helper()
	out, err := h.Offload(context.Background(), step, results)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(results) {
		t.Fatalf("Offload returned %d results for %d", len(out), len(results))
	}
	return out
}

func pointerText(t *testing.T, r hook.Result) string {
	t.Helper()
	if !hook.IsPointer(r) || len(r.Parts) != 1 || r.Parts[0].Kind != hook.KindText {
		t.Fatalf("result is not a pointer: %+v", r)
	}
	return r.Parts[0].Text
}

var step = hook.Step{Run: "run-7", Number: 2}

func result(tool, call string, parts ...hook.Part) hook.Result {
	return hook.Result{Tool: tool, CallID: call, Parts: parts}
}

// longText is 250 code points, 28 of them two bytes long.
var longText = "Fusion startups reported record funding: " + strings.Repeat("é", 28) + " " + strings.Repeat("lorem ipsum ", 15)[:180]

func TestH1SingleTextPointer(t *testing.T) {
	h := mustHook(t, hook.NewMemStore())
	if n := utf8.RuneCountInString(longText); n != 250 {
		t.Fatalf("fixture has %d code points", n)
	}
	out := offload(t, h, step, result("search", "call-123", hook.Text(longText)))
	got := pointerText(t, out[0])
	golden(t, "single_text", got)
	if !strings.Contains(got, "(250 characters)") {
		t.Errorf("pointer does not count code points: %q", got)
	}
	if !strings.HasSuffix(got, "...") {
		t.Errorf("cut preview without ...: %q", got)
	}
	preview := got[strings.Index(got, "Preview: ")+len("Preview: "):]
	if n := utf8.RuneCountInString(strings.TrimSuffix(preview, "...")); n != 200 {
		t.Errorf("preview has %d code points, want 200", n)
	}
	// A text no longer than the preview is shown whole, without "...", and
	// nothing in it is quoted or escaped.
	short := "it's \"quoted\"\nand on two lines"
	out = offload(t, h, step, result("search", "call-124", hook.Text(short)))
	got = pointerText(t, out[0])
	golden(t, "single_text_short", got)
	if !strings.HasSuffix(got, "Preview: "+short) {
		t.Errorf("short preview altered: %q", got)
	}
	exact := strings.Repeat("x", 200)
	out = offload(t, h, step, result("search", "call-125", hook.Text(exact)))
	if got := pointerText(t, out[0]); !strings.HasSuffix(got, "Preview: "+exact) {
		t.Errorf("a 200-character text got a cut preview: %q", got[len(got)-20:])
	}
}

func TestH1PreviewChars(t *testing.T) {
	h, err := hook.New(hook.NewMemStore(), policy.MustStrategies(policy.Default(policy.Always)), hook.WithPreviewChars(5))
	if err != nil {
		t.Fatal(err)
	}
	out := offload(t, h, step, result("search", "c", hook.Text("ééééééé")))
	if got := pointerText(t, out[0]); !strings.HasSuffix(got, "Preview: ééééé...") {
		t.Errorf("preview of 5 code points: %q", got)
	}
	if _, err := hook.New(nil, policy.MustStrategies(), hook.WithPreviewChars(-1)); err == nil {
		t.Error("negative preview accepted")
	}
}

var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")

func TestH2ImageAndFilePointers(t *testing.T) {
	h := mustHook(t, hook.NewMemStore())
	pdf := []byte("%PDF-1.4\n" + strings.Repeat("x", 100))
	for _, tc := range []struct {
		name string
		part hook.Part
		want string
	}{
		{"image", hook.Image("image/png", pngBytes), fmt.Sprintf("image/png (%d bytes) at '", len(pngBytes))},
		{"image_no_mime", hook.Image("", pngBytes), fmt.Sprintf("image (%d bytes) at '", len(pngBytes))},
		{"file_named", hook.File("application/pdf", "q3.pdf", pdf), fmt.Sprintf("application/pdf named 'q3.pdf' (%d bytes) at '", len(pdf))},
		{"file_unnamed", hook.File("application/pdf", "", pdf), fmt.Sprintf("application/pdf (%d bytes) at '", len(pdf))},
		{"file_no_mime", hook.File("", "notes.bin", []byte{0, 1, 2}), "file named 'notes.bin' (3 bytes) at '"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := offload(t, h, step, result("render", "c-"+tc.name, tc.part))
			got := pointerText(t, out[0])
			golden(t, tc.name, got)
			if !strings.HasPrefix(got, "Tool result offloaded to "+tc.want) {
				t.Errorf("pointer = %q, want it to start %q", got, tc.want)
			}
			if strings.Contains(got, "Preview") {
				t.Errorf("binary pointer has a preview: %q", got)
			}
		})
	}
	// n counts decoded bytes, not base64 characters.
	p, err := hook.ImageBase64("image/png", "AAECAwQ=")
	if err != nil {
		t.Fatal(err)
	}
	out := offload(t, h, step, result("render", "b64", p))
	if got := pointerText(t, out[0]); !strings.Contains(got, "(5 bytes)") {
		t.Errorf("pointer = %q, want 5 decoded bytes", got)
	}
}

func TestH3SeveralParts(t *testing.T) {
	h := mustHook(t, hook.NewMemStore())
	out := offload(t, h, step, result("browse", "call-7",
		hook.Text("page text"), hook.Image("image/png", pngBytes), hook.File("application/pdf", "q3.pdf", []byte("%PDF-1.4 x"))))
	got := pointerText(t, out[0])
	golden(t, "several_parts", got)
	lines := strings.Split(got, "\n")
	if lines[0] != "Tool result offloaded to 3 files:" || len(lines) != 4 {
		t.Fatalf("pointer = %q", got)
	}
	for i, l := range lines[1:] {
		if !strings.HasPrefix(l, fmt.Sprintf("%d. ", i+1)) {
			t.Errorf("line %d = %q, want it numbered from 1", i+1, l)
		}
	}
	if strings.HasSuffix(got, "\n") {
		t.Error("pointer ends with a newline")
	}
	// "files" even when every part is text.
	out = offload(t, h, step, result("browse", "call-8", hook.Text("a"), hook.Text("b")))
	if got := pointerText(t, out[0]); !strings.HasPrefix(got, "Tool result offloaded to 2 files:\n1. text (1 characters)") {
		t.Errorf("two text parts: %q", got)
	}
}

func TestH4Keys(t *testing.T) {
	s := hook.NewMemStore()
	h := mustHook(t, s)
	out := offload(t, h, step,
		result("search", "call-123", hook.Text("a")),
		result("search", "", hook.Text("b")),
		result("browse", "", hook.Text("c"), hook.Image("image/png", pngBytes)),
	)
	want := [][]string{
		{"run-7/2_search_call-123.txt"},
		{"run-7/2_search_call1.txt"},
		{"run-7/2_browse_call2_0.txt", "run-7/2_browse_call2_1.png"},
	}
	for i, r := range out {
		refs := hook.References(r)
		var keys []string
		for _, ref := range refs {
			keys = append(keys, ref.Key)
		}
		if strings.Join(keys, " ") != strings.Join(want[i], " ") {
			t.Errorf("result %d keys = %v, want %v", i, keys, want[i])
		}
	}
	// Keys read as Haystack writes them; calls rendering alike in one block
	// get "~2" rather than sharing a key.
	out = offload(t, h, hook.Step{Run: "user:42/chat:7", Number: 2},
		result("search", "call_00_yjs8KtEk", hook.Text("e")),
		result("a_b", "c", hook.Text("f")),
		result("a", "b_c", hook.Text("g")),
		result("search", "call7", hook.Text("h")),
		result("search", "", hook.Text("i")),
		result("search", "", hook.Text("j")),
		result("search", "", hook.Text("k")),
		result("search", "", hook.Text("l")),
		result("search", "1", hook.Text("m")),
	)
	wantKeys := []string{
		"user:42%2Fchat:7/2_search_call_00_yjs8KtEk.txt",
		"user:42%2Fchat:7/2_a_b_c.txt",
		"user:42%2Fchat:7/2_a_b_c~2.txt",
		"user:42%2Fchat:7/2_search_call7.txt",
		"user:42%2Fchat:7/2_search_call4.txt",
		"user:42%2Fchat:7/2_search_call5.txt",
		"user:42%2Fchat:7/2_search_call6.txt",
		"user:42%2Fchat:7/2_search_call7~2.txt",
		"user:42%2Fchat:7/2_search_1.txt",
	}
	for i, r := range out {
		if k := hook.References(r)[0].Key; k != wantKeys[i] {
			t.Errorf("result %d key = %q, want %q", i, k, wantKeys[i])
		}
		if c, err := s.Read(context.Background(), "user:42/chat:7", hook.References(r)[0].Key); err != nil || string(c.Data) != string(rune('e'+i)) {
			t.Errorf("result %d reads back %v, %v", i, c, err)
		}
	}
	// Without a run, keys go under "default".
	out = offload(t, h, hook.Step{Number: 0}, result("search", "x", hook.Text("d")))
	if k := hook.References(out[0])[0].Key; k != "default/0_search_x.txt" {
		t.Errorf("key without a run = %q", k)
	}
}

func TestH4KeyEscapingGolden(t *testing.T) {
	h := mustHook(t, hook.NewMemStore())
	longID := "call_" + strings.Repeat("0123456789", 10)
	out := offload(t, h, step,
		result("fetch", longID, hook.Text("long id")),
		result("a/b'c\"d\ne", "id", hook.Text("hostile tool")),
	)
	golden(t, "long_call_id", pointerText(t, out[0]))
	golden(t, "hostile_tool_name", pointerText(t, out[1]))
	for _, r := range out {
		k := hook.References(r)[0].Key
		if strings.ContainsAny(k, "\n'\"") || strings.Count(k, "/") != 1 || len(k) > 200 {
			t.Errorf("key %q is not one short safe line", k)
		}
	}
}

func TestSameContentAsGolden(t *testing.T) {
	h := mustHook(t, hook.NewMemStore())
	page := strings.Repeat("the same page ", 20)
	offload(t, h, hook.Step{Run: "run-7", Number: 2}, result("search", "call-123", hook.Text(page)))
	out := offload(t, h, hook.Step{Run: "run-7", Number: 5}, result("search", "call-9", hook.Text(page)))
	got := pointerText(t, out[0])
	golden(t, "same_content", got)
	if !strings.Contains(got, "(key 'run-7/5_search_call-9.txt', same content as 'run-7/2_search_call-123.txt')") {
		t.Errorf("pointer = %q", got)
	}
	// Another run storing the same bytes is never told about run-7's key.
	out = offload(t, h, hook.Step{Run: "run-8", Number: 1}, result("search", "call-1", hook.Text(page)))
	if got := pointerText(t, out[0]); strings.Contains(got, "same content") {
		t.Errorf("pointer names another run's key: %q", got)
	}
}

func TestH6PolicyLookup(t *testing.T) {
	s := hook.NewMemStore()
	h := mustHook(t, s,
		policy.For("web_search", policy.Always),
		policy.For("get_time", policy.Never),
		policy.ForGroup([]string{"read_file", "list_dir"}, policy.OverChars(5)),
		policy.ForGroup([]string{"*", "grep"}, policy.Always),
	)
	out := offload(t, h, step,
		result("web_search", "1", hook.Text("x")),
		result("get_time", "2", hook.Text(strings.Repeat("x", 100))),
		result("read_file", "3", hook.Text("123456")),
		result("list_dir", "4", hook.Text("12345")),
		result("grep", "5", hook.Text("g")),
		result("unknown", "6", hook.Text(strings.Repeat("x", 100))),
	)
	want := []bool{true, false, true, false, true, false}
	for i, r := range out {
		if hook.IsPointer(r) != want[i] {
			t.Errorf("%s offloaded = %v, want %v", r.Tool, hook.IsPointer(r), want[i])
		}
	}
	// With a wildcard, unknown tools get its policy.
	h = mustHook(t, s, policy.For("get_time", policy.Never), policy.Default(policy.OverChars(3)))
	out = offload(t, h, step, result("unknown", "7", hook.Text("1234")), result("get_time", "8", hook.Text("12345")))
	if !hook.IsPointer(out[0]) || hook.IsPointer(out[1]) {
		t.Errorf("wildcard: offloaded %v, %v; want true, false", hook.IsPointer(out[0]), hook.IsPointer(out[1]))
	}
}

// sizeRecorder records what the policy saw.
type sizeRecorder struct {
	mu      sync.Mutex
	sizes   []int
	content []string
}

func (r *sizeRecorder) ShouldOffload(s *policy.Subject) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sizes = append(r.sizes, s.Size)
	r.content = append(r.content, s.Content())
	return false
}

func TestH7PolicySeesOneString(t *testing.T) {
	rec := &sizeRecorder{}
	h := mustHook(t, hook.NewMemStore(), policy.Default(rec))
	offload(t, h, step, result("t", "c", hook.Text("héllo"), hook.Image("image/png", []byte{1, 2, 3, 4}), hook.Text("!")))
	// "héllo" is 5 code points, 4 bytes encode to 8 base64 characters, "!" is 1.
	if rec.sizes[0] != 14 {
		t.Errorf("policy saw size %d, want 14", rec.sizes[0])
	}
	if want := "héllo" + "AQIDBA==" + "!"; rec.content[0] != want {
		t.Errorf("policy saw %q, want %q", rec.content[0], want)
	}
	if utf8.RuneCountInString(rec.content[0]) != rec.sizes[0] {
		t.Error("Size differs from the length of Content")
	}
	// OverChars decides at the same boundary as Haystack: 14 > 13, not > 14.
	for threshold, want := range map[int]bool{13: true, 14: false} {
		h := mustHook(t, hook.NewMemStore(), policy.Default(policy.OverChars(threshold)))
		out := offload(t, h, step, result("t", "c", hook.Text("héllo"), hook.Image("image/png", []byte{1, 2, 3, 4}), hook.Text("!")))
		if hook.IsPointer(out[0]) != want {
			t.Errorf("OverChars(%d) offloaded = %v, want %v", threshold, hook.IsPointer(out[0]), want)
		}
	}
}

func TestH8OverCharsIsStrict(t *testing.T) {
	h := mustHook(t, hook.NewMemStore(), policy.Default(policy.OverChars(3)))
	out := offload(t, h, step, result("t", "a", hook.Text("abc")), result("t", "b", hook.Text("abcd")))
	if hook.IsPointer(out[0]) || !hook.IsPointer(out[1]) {
		t.Errorf("OverChars(3) on 3 and 4 characters: %v, %v; want false, true", hook.IsPointer(out[0]), hook.IsPointer(out[1]))
	}
}

func TestH9ErrorsStay(t *testing.T) {
	s := hook.NewMemStore()
	h := mustHook(t, s)
	r := result("t", "c", hook.Text(strings.Repeat("stack trace ", 100)))
	r.Error = true
	out := offload(t, h, step, r)
	if hook.IsPointer(out[0]) || out[0].Parts[0].Text != r.Parts[0].Text {
		t.Error("error result was offloaded")
	}
	if _, err := s.Read(context.Background(), "", "run-7/2_t_c.txt"); err == nil {
		t.Error("error result was written")
	}
}

// countingStore counts the parts written through it.
type countingStore struct {
	hook.Store
	mu    sync.Mutex
	parts int
}

func (c *countingStore) Write(ctx context.Context, items []hook.Item) ([]hook.Stored, error) {
	c.mu.Lock()
	c.parts += len(items)
	c.mu.Unlock()
	return c.Store.Write(ctx, items)
}

func TestH10OffloadedOnce(t *testing.T) {
	cs := &countingStore{Store: hook.NewMemStore()}
	first, second := mustHook(t, cs), mustHook(t, cs)
	out := offload(t, first, step, result("t", "c", hook.Text(strings.Repeat("x", 500))))
	again := offload(t, second, step, out...)
	if cs.parts != 1 {
		t.Errorf("two hooks in a row wrote %d parts, want 1", cs.parts)
	}
	if pointerText(t, again[0]) != pointerText(t, out[0]) {
		t.Error("second hook changed the pointer")
	}
	// Haystack's marker, a list of reference strings, is honoured too.
	r := result("t", "d", hook.Text("y"))
	r.Meta = map[string]any{hook.MetaKey: []any{"/tmp/tool_results/1_t_d.txt"}}
	offload(t, first, step, r)
	if cs.parts != 1 {
		t.Error("a result with Haystack's marker was offloaded")
	}
}

func TestH11EmptyResults(t *testing.T) {
	cs := &countingStore{Store: hook.NewMemStore()}
	h := mustHook(t, cs)
	out := offload(t, h, step,
		result("t", "empty", hook.Text("")),
		result("t", "none"),
		result("t", "two-empty", hook.Text(""), hook.Text("")),
	)
	for _, r := range out {
		if hook.IsPointer(r) {
			t.Errorf("%s: empty result offloaded", r.CallID)
		}
	}
	if cs.parts != 0 {
		t.Errorf("%d parts written for empty results", cs.parts)
	}
	out = offload(t, h, step, result("t", "img", hook.Text(""), hook.Image("image/png", pngBytes)))
	if !hook.IsPointer(out[0]) || cs.parts != 2 {
		t.Errorf("empty text next to an image: offloaded %v, %d parts; want true, 2", hook.IsPointer(out[0]), cs.parts)
	}
	if got := pointerText(t, out[0]); !strings.Contains(got, "1. text (0 characters)") {
		t.Errorf("pointer = %q", got)
	}
}

func TestH12TakesTheStepsBlock(t *testing.T) {
	// The caller hands over the latest step's block; positions in it are the
	// call indexes of id-less calls, whatever came before in the conversation.
	h := mustHook(t, hook.NewMemStore())
	block := []hook.Result{result("t", "", hook.Text("a")), result("t", "", hook.Text("b"))}
	out := offload(t, h, hook.Step{Run: "r", Number: 9}, block...)
	for i, r := range out {
		if k := hook.References(r)[0].Key; k != fmt.Sprintf("r/9_t_call%d.txt", i) {
			t.Errorf("result %d key %q", i, k)
		}
	}
	if hook.IsPointer(block[0]) {
		t.Error("Offload modified its input")
	}
}

func TestH13TextOnlyStoreWarns(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	s := hook.NewMemStore(hook.TextOnly())
	h, err := hook.New(s, policy.MustStrategies(policy.Default(policy.Always)), hook.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	r := result("screenshot", "c", hook.Image("image/png", pngBytes))
	out := offload(t, h, step, r, result("search", "d", hook.Text("text goes")))
	if hook.IsPointer(out[0]) {
		t.Error("image offloaded to a text-only store")
	}
	if !hook.IsPointer(out[1]) {
		t.Error("text result next to it was not offloaded")
	}
	want := "Tool 'screenshot' produced a result with image or file content, but MemStore (text only) does not support binary content; leaving the result in context."
	if !strings.Contains(buf.String(), want) {
		t.Errorf("log = %q, want the warning %q", buf.String(), want)
	}
	// Without a matching policy there is nothing to warn about.
	buf.Reset()
	h2, _ := hook.New(s, policy.MustStrategies(policy.For("search", policy.Always)), hook.WithLogger(logger))
	offload(t, h2, step, r)
	if buf.Len() != 0 {
		t.Errorf("warned without a policy: %q", buf.String())
	}
}

func TestH14KeepsOriginAndRecordsReferences(t *testing.T) {
	s := hook.NewMemStore()
	h := mustHook(t, s)
	in := hook.Result{Tool: "search", CallID: "call-1", Arguments: json.RawMessage(`{"q":"fusion"}`),
		Parts: []hook.Part{hook.Text("a"), hook.Image("image/png", pngBytes)}, Meta: map[string]any{"trace": "t-1"}}
	out := offload(t, h, step, in)[0]
	if out.Tool != in.Tool || out.CallID != in.CallID || string(out.Arguments) != string(in.Arguments) || out.Error != in.Error {
		t.Errorf("origin changed: %+v", out)
	}
	if out.Meta["trace"] != "t-1" {
		t.Error("existing metadata lost")
	}
	if _, ok := in.Meta[hook.MetaKey]; ok {
		t.Error("input metadata modified")
	}
	refs, ok := out.Meta[hook.MetaKey].([]hook.Reference)
	if !ok || len(refs) != 2 {
		t.Fatalf("metadata %s = %#v", hook.MetaKey, out.Meta[hook.MetaKey])
	}
	for _, ref := range refs {
		c, err := s.Read(context.Background(), "run-7", ref.Path)
		if err != nil {
			t.Fatal(err)
		}
		if c.Key != ref.Key || c.Digest.String() != ref.Digest {
			t.Errorf("reference %+v reads back key %s digest %s", ref, c.Key, c.Digest)
		}
	}
}

func TestH15PerRunStoreFromContext(t *testing.T) {
	shared := &countingStore{Store: hook.NewMemStore()}
	h := mustHook(t, shared)
	var wg sync.WaitGroup
	stores := make([]*hook.MemStore, 8)
	for i := range stores {
		stores[i] = hook.NewMemStore()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := hook.WithStore(context.Background(), stores[i])
			run := fmt.Sprint("run-", i)
			for n := range 20 {
				_, err := h.Offload(ctx, hook.Step{Run: run, Number: n}, []hook.Result{result("t", "c", hook.Text(fmt.Sprint(run, " step ", n)))})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if shared.parts != 0 {
		t.Errorf("runs with their own store wrote %d parts to the hook's", shared.parts)
	}
	for i, s := range stores {
		for j := range stores {
			_, err := s.Read(context.Background(), "", fmt.Sprintf("run-%d/5_t_c.txt", j))
			if (err == nil) != (i == j) {
				t.Errorf("store of run %d reading run %d's key: %v", i, j, err)
			}
		}
	}
}

func TestH16ParallelCallsWithoutIDs(t *testing.T) {
	h := mustHook(t, hook.NewMemStore())
	out := offload(t, h, step, result("grep", "", hook.Text("a")), result("grep", "", hook.Text("b")), result("grep", "", hook.Text("c")))
	seen := map[string]bool{}
	for _, r := range out {
		k := hook.References(r)[0].Key
		if seen[k] {
			t.Errorf("key %s given twice", k)
		}
		seen[k] = true
	}
}

func TestH17DirStoreRefusesOutsideRoot(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := hook.NewDirStore(root)
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("secret"), 0o644)
	os.MkdirAll(filepath.Join(root, "r"), 0o755)
	if err := os.Symlink(outside, filepath.Join(root, "r", "link.txt")); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"../secret.txt", outside, "r/../../x", "r/link.txt", filepath.Join(root, "r", "link.txt")} {
		c, err := s.Read(ctx, "", ref)
		if err == nil {
			t.Errorf("Read(%q) = %q, want a refusal", ref, c.Data)
			continue
		}
		if !strings.Contains(err.Error(), ref) && !strings.Contains(err.Error(), filepath.Base(ref)) {
			t.Errorf("Read(%q) error %q does not name it", ref, err)
		}
	}
	// Keys are built from escaped names, so a hostile tool name or call id
	// stays inside the root.
	h := mustHook(t, s)
	out := offload(t, h, step, result("../../../etc", "../../passwd", hook.Text("x")))
	path := hook.References(out[0])[0].Path
	if filepath.Dir(path) != filepath.Join(root, "run-7") {
		t.Errorf("hostile names wrote %s, outside %s", path, filepath.Join(root, "run-7"))
	}
}

func TestH18ReadTextOrBytes(t *testing.T) {
	s := hook.NewMemStore()
	st, err := s.Write(context.Background(), []hook.Item{
		{Key: hook.Key{Run: "r", Step: 1, Tool: "t", CallID: "a", Part: -1, Ext: ".txt"}, Part: hook.Text("héllo")},
		{Key: hook.Key{Run: "r", Step: 1, Tool: "t", CallID: "b", Part: -1, Ext: ".png"}, Part: hook.Image("image/png", pngBytes)},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := s.Read(context.Background(), "r", st[0].Key)
	if !c.IsText() || string(c.Data) != "héllo" {
		t.Errorf("text reads back as text %v: %q", c.IsText(), c.Data)
	}
	c, _ = s.Read(context.Background(), "r", st[1].Key)
	if c.IsText() || !bytes.Equal(c.Data, pngBytes) || c.MIME != "image/png" {
		t.Errorf("image reads back as text %v, MIME %q", c.IsText(), c.MIME)
	}
}

func TestH19NewVersionKeepsOldPointers(t *testing.T) {
	s := hook.NewMemStore()
	h := mustHook(t, s)
	first := offload(t, h, step, result("read_file", "c", hook.Text("version one")))
	second := offload(t, h, step, result("read_file", "c", hook.Text("version two")))
	r1, r2 := hook.References(first[0])[0], hook.References(second[0])[0]
	if r1.Key != r2.Key {
		t.Fatalf("keys differ: %s, %s", r1.Key, r2.Key)
	}
	for _, tc := range []struct{ ref, want string }{{r1.Path, "version one"}, {r2.Path, "version two"}, {r1.Key, "version two"}} {
		c, err := s.Read(context.Background(), "run-7", tc.ref)
		if err != nil || string(c.Data) != tc.want {
			t.Errorf("Read(%s) = %q, %v; want %q", tc.ref, c.Data, err, tc.want)
		}
	}
}

func TestH21IsPointer(t *testing.T) {
	h := mustHook(t, hook.NewMemStore())
	out := offload(t, h, step, result("t", "c", hook.Text("x")), result("u", "d", hook.Text("y")))
	h2 := mustHook(t, hook.NewMemStore(), policy.For("t", policy.Always))
	plain := offload(t, h2, step, result("u", "d", hook.Text("y")))
	// A compactor keeps the pointers and may prune the rest.
	if !hook.IsPointer(out[0]) || hook.IsPointer(plain[0]) {
		t.Error("IsPointer does not tell pointers from results")
	}
	for _, meta := range []map[string]any{nil, {}, {"other": true}, {"tool_result_offloaded_not": true}} {
		if hook.IsPointer(hook.Result{Meta: meta}) {
			t.Errorf("IsPointer(%v) = true", meta)
		}
	}
	// The key's presence marks a pointer whatever its value, and the hook
	// then leaves the result alone (H10).
	h = mustHook(t, hook.NewMemStore())
	for _, v := range []any{nil, []any{}, false, "", 0, map[string]any{}, "yes", []hook.Reference{}} {
		meta := map[string]any{hook.MetaKey: v}
		if !hook.IsPointer(hook.Result{Meta: meta}) {
			t.Errorf("IsPointer(%#v) = false", meta)
		}
		in := result("t", "c", hook.Text(strings.Repeat("x", 100)))
		in.Meta = meta
		if out := offload(t, h, step, in); out[0].Parts[0].Text != in.Parts[0].Text {
			t.Errorf("result with %s = %#v offloaded again", hook.MetaKey, v)
		}
	}
}

func TestHookRefusesBadSteps(t *testing.T) {
	h := mustHook(t, hook.NewMemStore())
	for _, st := range []hook.Step{{Run: "a\x00b"}, {Run: "\xff"}, {Run: strings.Repeat("r", hook.MaxRunLen+1)}, {Run: "r", Number: -1}} {
		if _, err := h.Offload(context.Background(), st, []hook.Result{result("t", "c", hook.Text("x"))}); err == nil {
			t.Errorf("Offload(step %+v) accepted", st)
		}
	}
	if _, err := hook.New(hook.NewMemStore(), nil); err == nil {
		t.Error("New without strategies accepted")
	}
}

func TestHookLeavesInvalidPartsInContext(t *testing.T) {
	var buf bytes.Buffer
	h, _ := hook.New(hook.NewMemStore(), policy.MustStrategies(policy.Default(policy.Always)), hook.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	out := offload(t, h, step,
		result("t", "a", hook.Image("image/../../etc/passwd\n", pngBytes)),
		result("t", "b", hook.File("application/pdf", "x\n.pdf", []byte("x"))),
		result("t", "c", hook.Text("fine")),
	)
	if hook.IsPointer(out[0]) || hook.IsPointer(out[1]) || !hook.IsPointer(out[2]) {
		t.Errorf("offloaded %v %v %v, want only the valid result", hook.IsPointer(out[0]), hook.IsPointer(out[1]), hook.IsPointer(out[2]))
	}
	if !strings.Contains(buf.String(), "invalid MIME type") || !strings.Contains(buf.String(), "line break") {
		t.Errorf("warnings do not say what was wrong: %s", buf.String())
	}
}

func TestStoreErrorLeavesResults(t *testing.T) {
	h := mustHook(t, failingStore{})
	in := []hook.Result{result("t", "c", hook.Text("x"))}
	out, err := h.Offload(context.Background(), step, in)
	if err == nil || out != nil {
		t.Fatalf("Offload with a failing store = %v, %v", out, err)
	}
	if !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "run-7") {
		t.Errorf("error %q does not say what failed where", err)
	}
	if hook.IsPointer(in[0]) {
		t.Error("input modified")
	}
}

type failingStore struct{}

func (failingStore) Read(context.Context, string, string) (*hook.Content, error) {
	return nil, hook.ErrNotFound
}

func (failingStore) Write(context.Context, []hook.Item) ([]hook.Stored, error) {
	return nil, fmt.Errorf("disk on fire")
}
func (failingStore) AcceptsBinary() bool { return true }
