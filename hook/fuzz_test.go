package hook_test

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// FuzzOffload runs the hook on arbitrary results: whatever the parts, it
// never panics, leaves a result it does not offload exactly as it was, and
// for one it offloads, every reference reads back the part's exact bytes
// under a one-line key.
func FuzzOffload(f *testing.F) {
	f.Add("read_file", "call-1", "run-1", 3, byte(0), "hello", []byte(nil), "", "", 100)
	f.Add("screenshot", "", "default", 0, byte(1), "", pngBytes, "image/png", "", 0)
	f.Add("a/b'c\"d\ne", "../../x", "r", 1, byte(2), "", []byte("%PDF"), "application/pdf", "../../q3.pdf", 5)
	f.Add("t", "c", "../escape", 1, byte(0), "x", []byte(nil), "", "", 0)
	f.Add("t", "c", "r", 1, byte(5), "", []byte{0xff}, "image/../../etc", "a\nb", -1)
	f.Add("t", strings.Repeat("c", 100), "r", 999999999, byte(4), "\xff\xfe", []byte{}, "text/plain; charset=utf-8", "x.TXT", 2)
	f.Fuzz(func(t *testing.T, tool, call, run string, step int, kinds byte, text string, data []byte, mime, filename string, threshold int) {
		var parts []hook.Part
		for i := range int(kinds % 4) {
			switch (kinds >> (2 + i*2)) % 3 {
			case 0:
				parts = append(parts, hook.Text(text))
			case 1:
				parts = append(parts, hook.Image(mime, data))
			case 2:
				parts = append(parts, hook.File(mime, filename, data))
			}
		}
		if kinds%4 == 0 {
			parts = []hook.Part{hook.Text(text)}
		}
		in := hook.Result{Tool: tool, CallID: call, Parts: parts, Meta: map[string]any{"k": "v"}}
		orig := in
		orig.Parts = append([]hook.Part(nil), parts...)
		s := hook.NewMemStore()
		h, err := hook.New(s, policy.MustStrategies(policy.Default(policy.OverChars(threshold))))
		if err != nil {
			t.Fatal(err)
		}
		out, err := h.Offload(context.Background(), hook.Step{Run: run, Number: step}, []hook.Result{in})
		if err != nil {
			if hook.CheckRun(run) == nil && run != "" && step >= 0 && step <= hook.MaxStep {
				t.Fatalf("Offload failed for a valid step: %v", err)
			}
			return
		}
		if !reflect.DeepEqual(in, orig) {
			t.Fatal("Offload modified its input")
		}
		r := out[0]
		if !hook.IsPointer(r) {
			if !reflect.DeepEqual(r, orig) {
				t.Fatal("a result left in context was changed")
			}
			return
		}
		if r.Tool != tool || r.CallID != call || len(r.Parts) != 1 || !strings.HasPrefix(r.Parts[0].Text, "Tool result offloaded to ") {
			t.Fatalf("pointer result %+v", r)
		}
		refs := hook.References(r)
		if len(refs) != len(parts) {
			t.Fatalf("%d references for %d parts", len(refs), len(parts))
		}
		if run == "" {
			run = hook.DefaultRun
		}
		for i, ref := range refs {
			if len(ref.Key) > 1024 || strings.ContainsAny(ref.Key, "\n\r") || !utf8.ValidString(ref.Key) ||
				!strings.HasPrefix(ref.Key, hook.EscapeRun(run)+"/") || strings.Count(ref.Key, "/") != 1 {
				t.Fatalf("key %q", ref.Key)
			}
			c, err := s.Read(context.Background(), run, ref.Path)
			if err != nil {
				t.Fatalf("reading back part %d: %v", i, err)
			}
			want := parts[i].Data
			if parts[i].Kind == hook.KindText {
				want = []byte(parts[i].Text)
			}
			if !bytes.Equal(c.Data, want) {
				t.Fatalf("part %d reads back %q, want %q", i, c.Data, want)
			}
		}
	})
}
