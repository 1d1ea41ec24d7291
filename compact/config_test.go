package compact_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/store"
	"github.com/toolcas/toolcas/tokens"
)

type fixedSummary string

func (f fixedSummary) Summarize(context.Context, []compact.Message) (string, error) {
	return string(f), nil
}

// TestTriggerConfigRoundTrip: a trigger saves and loads back the same,
// with each compactor and counter.
func TestTriggerConfigRoundTrip(t *testing.T) {
	w, _ := compact.NewSlidingWindow(4, "Dropped {num_removed}.")
	p, _ := compact.NewToolResultPruning(compact.Options{MinKeepSteps: 2, MinTokens: 50, SkipMetaKeys: []string{"keep"}}, "gone")
	s, _ := compact.NewSummarization(fixedSummary("s"), compact.SummarizationOptions{MinKeepSteps: 3, SummaryTokens: 500, Instruction: "Sum up."})
	exact, _ := compact.NewCounter(tokens.Cl100kBase)
	for _, tc := range []struct {
		c       compact.Compactor
		counter compact.TokenCounter
	}{
		{w, compact.Approximate()},
		{p, exact},
		{s, compact.Counter{Text: tokens.Approximate{CharsPerToken: 3.5}, TokensPerImage: 100, TokensPerFile: 2000}},
	} {
		tr, err := compact.NewTrigger(tc.c, 200_000, compact.CompactAt(0.6), compact.CompactTo(0.3), compact.WithCounter(tc.counter))
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		back, err := compact.LoadTrigger(b, compact.LoadOptions{Summarizer: fixedSummary("s")})
		if err != nil {
			t.Fatalf("LoadTrigger(%s): %v", b, err)
		}
		b2, _ := json.Marshal(back)
		if string(b2) != string(b) {
			t.Errorf("round trip:\n%s\nloads and saves as\n%s", b, b2)
		}
	}
	// An offloading compactor is saved with its store, which must be one
	// configuration can hold.
	o, _ := compact.NewOffloading(unsaved{hook.NewMemStore()}, "r", compact.Options{})
	tr, _ := compact.NewTrigger(o, 1000)
	if _, err := json.Marshal(tr); err == nil || !strings.Contains(err.Error(), "cannot be saved") {
		t.Errorf("saving an offloading trigger with a store of its own kind: %v", err)
	}
}

// unsaved is a store configuration cannot hold.
type unsaved struct{ *hook.MemStore }

func (unsaved) StoreConfig() {}

// TestOffloadingConfig: an offloading trigger saves with its store, run and
// options, and loads back into a trigger that writes to that store; Close
// closes the store loading opened. Without a store (per-run stores), it
// saves null.
func TestOffloadingConfig(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "tool_results")
	s, err := store.Open(ctx, dir, store.WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	o, err := compact.NewOffloading(s, "run-9", compact.Options{MinKeepSteps: 2, MinTokens: 60, SkipMetaKeys: []string{"keep"}},
		hook.WithPreviewChars(120), hook.WithShortPointers(), hook.WithReadToolName("read_it"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := compact.NewTrigger(o, 2000, compact.CompactAt(0.5), compact.CompactTo(0.2))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, want := range []string{`"type":"toolcas.compact.Offloading"`, `"run":"run-9"`, `"min_keep_steps":2`, `"min_tokens":60`, `"skip_meta_keys":["keep"]`,
		`"preview_chars":120`, `"read_tool":"read_it"`, `"short_pointers":true`, `"type":"toolcas.store.Store"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("saved as %s, which lacks %s", b, want)
		}
	}
	back, err := compact.LoadTrigger(b, compact.LoadOptions{})
	if err != nil {
		t.Fatalf("LoadTrigger(%s): %v", b, err)
	}
	if b2, _ := json.Marshal(back); string(b2) != string(b) {
		t.Errorf("round trip:\n%s\nloads and saves as\n%s", b, b2)
	}
	// The loaded trigger writes to the store the configuration names.
	msgs := []compact.Message{{Role: compact.RoleSystem, Text: "An agent."}}
	for step := 1; step <= 3; step++ {
		msgs = append(msgs, compact.Message{Role: compact.RoleAssistant, Step: step, ToolCalls: []compact.ToolCall{{Tool: "bash", ID: fmt.Sprint("c", step)}}},
			compact.Message{Role: compact.RoleTool, Step: step, Result: &hook.Result{Tool: "bash", CallID: fmt.Sprint("c", step), Parts: []hook.Part{hook.Text(strings.Repeat(fmt.Sprint("output ", step, "\n"), 400))}}})
	}
	out, _, changed, err := back.Before(ctx, msgs, 0)
	if err != nil || !changed {
		t.Fatalf("Before = %v, %v", changed, err)
	}
	ref := hook.References(*out[2].Result)
	if len(ref) != 1 || !strings.HasPrefix(ref[0].Key, "run-9/1_bash_c1") || !strings.HasPrefix(out[2].Result.Parts[0].Text, "Tool result offloaded (") {
		t.Fatalf("the first step's result became %+v", out[2].Result)
	}
	if err := back.Close(); err != nil {
		t.Fatal(err)
	}
	if err := back.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// Closed: the store is gone from the trigger too.
	if _, _, _, err := back.Before(ctx, msgs, 0); err == nil {
		t.Error("a closed trigger's compactor still writes to its store")
	}
	s2, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if c, err := s2.Read(ctx, "run-9", ref[0].Key); err != nil || string(c.Data) != msgs[2].Result.Parts[0].Text {
		t.Errorf("read back %s: %v", ref[0].Key, err)
	}

	// Per-run stores: no store saved, none loaded.
	o, _ = compact.NewOffloading(nil, "", compact.Options{})
	tr, _ = compact.NewTrigger(o, 1000)
	b, err = json.Marshal(tr)
	if err != nil || !strings.Contains(string(b), `"store":null`) {
		t.Fatalf("saved as %s, %v", b, err)
	}
	if back, err := compact.LoadTrigger(b, compact.LoadOptions{}); err != nil {
		t.Errorf("LoadTrigger(%s): %v", b, err)
	} else if err := back.Close(); err != nil {
		t.Error(err)
	}
}

// TestOffloadingLoadsHaystackConfig: Haystack's ToolResultOffloadCompactor
// with its FileSystemToolResultStore loads, with the same parameters, and
// writes under the store's root.
func TestOffloadingLoadsHaystackConfig(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tool_results")
	cfg := `{"type": "haystack.hooks.compaction.hooks.CompactionHook", "init_parameters": {
		"compactor": {"type": "haystack.hooks.compaction.tool_result_offloading.ToolResultOffloadCompactor", "init_parameters": {
			"store": {"type": "haystack.hooks.tool_result_offloading.stores.FileSystemToolResultStore", "init_parameters": {"root": ` + strconv.Quote(root) + `}},
			"min_keep_steps": 1, "min_tokens": 10, "preview_chars": 30}},
		"context_window": 500, "compact_at": 0.7, "compact_to": 0.4}}`
	tr, err := compact.LoadTrigger([]byte(cfg), compact.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	msgs := []compact.Message{{Role: compact.RoleUser, Text: "Go."}}
	for step := 1; step <= 2; step++ {
		msgs = append(msgs, compact.Message{Role: compact.RoleAssistant, Step: step, ToolCalls: []compact.ToolCall{{Tool: "grep", ID: fmt.Sprint("g", step)}}},
			compact.Message{Role: compact.RoleTool, Step: step, Result: &hook.Result{Tool: "grep", CallID: fmt.Sprint("g", step), Parts: []hook.Part{hook.Text(strings.Repeat("match\n", 400))}}})
	}
	out, _, changed, err := tr.Before(context.Background(), msgs, 0)
	if err != nil || !changed {
		t.Fatalf("Before = %v, %v", changed, err)
	}
	text := out[2].Result.Parts[0].Text
	if want := "Preview: " + strings.Repeat("match\n", 5) + "..."; !strings.HasPrefix(text, "Tool result offloaded to text (2400 characters) at '"+root) || !strings.HasSuffix(text, want) {
		t.Errorf("pointer %q: want a path under %s and a 30-character preview", text, root)
	}
	if b, err := os.ReadFile(hook.References(*out[2].Result)[0].Path); err != nil || string(b) != strings.Repeat("match\n", 400) {
		t.Errorf("the stored file: %v", err)
	}
}

// TestTriggerLoadsHaystackConfig: CompactionHook.to_dict's output, as
// Haystack writes it, loads with the same parameters.
func TestTriggerLoadsHaystackConfig(t *testing.T) {
	cfg := `{"type": "haystack.hooks.compaction.hooks.CompactionHook", "init_parameters": {
		"compactor": {"type": "haystack.hooks.compaction.sliding_window.SlidingWindowCompactor", "init_parameters": {"min_keep_steps": 7, "omission_note": "Dropped {num_removed}."}},
		"context_window": 200000, "compact_at": 0.6, "compact_to": 0.4,
		"token_counter": {"type": "haystack.token_counters.approximate_counter.ApproximateTokenCounter", "init_parameters": {"chars_per_token": 4.0, "tokens_per_image": 85, "tokens_per_file": 1000}}}}`
	tr, err := compact.LoadTrigger([]byte(cfg), compact.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, ok := tr.Compactor().(*compact.SlidingWindow)
	if !ok || w.MinKeepSteps() != 7 || w.OmissionNote() != "Dropped {num_removed}." || tr.ContextWindow() != 200000 || tr.CompactAt() != 0.6 || tr.CompactTo() != 0.4 {
		t.Errorf("loaded %+v with %+v", tr, tr.Compactor())
	}
	if c, ok := tr.Counter().(compact.Counter); !ok || c.Text.Name() != tokens.ApproximateName {
		t.Errorf("counter %+v", tr.Counter())
	}
	// Omitted note: Haystack's default; null: none. TiktokenCounter.
	cfg2 := `{"type": "haystack.hooks.compaction.hooks.CompactionHook", "init_parameters": {
		"compactor": {"type": "haystack.hooks.compaction.sliding_window.SlidingWindowCompactor", "init_parameters": {"min_keep_steps": 1, "omission_note": null}},
		"context_window": 1000,
		"token_counter": {"type": "haystack.token_counters.tiktoken_counter.TiktokenCounter", "init_parameters": {"encoding": "cl100k_base", "tokens_per_image": 85, "tokens_per_file": 1000}}}}`
	tr, err = compact.LoadTrigger([]byte(cfg2), compact.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w := tr.Compactor().(*compact.SlidingWindow); w.OmissionNote() != "" || tr.Counter().(compact.Counter).Text.Name() != tokens.Cl100kBase || tr.CompactAt() != compact.DefaultCompactAt {
		t.Errorf("loaded %+v, counter %+v", w, tr.Counter())
	}
	cfg3 := strings.Replace(cfg2, `, "omission_note": null`, ``, 1)
	if tr, err = compact.LoadTrigger([]byte(cfg3), compact.LoadOptions{}); err != nil || tr.Compactor().(*compact.SlidingWindow).OmissionNote() != compact.DefaultOmissionNote {
		t.Errorf("no omission_note: %v", err)
	}
}

func TestTriggerConfigErrors(t *testing.T) {
	base := `{"type": "toolcas.compact.Trigger", "init_parameters": {"compactor": COMPACTOR, "context_window": 1000COUNTER}}`
	window := `{"type": "toolcas.compact.SlidingWindow", "init_parameters": {}}`
	for _, tc := range []struct{ compactor, counter, want string }{
		{window, `, "compact_at": 0.3`, "0 < compact_to < compact_at <= 1"},
		{`{"type": "toolcas.compact.Nope"}`, ``, `"toolcas.compact.Nope"`},
		{`{"type": "haystack.hooks.compaction.summarization.SummarizationCompactor", "init_parameters": {}}`, ``, "needs a Summarizer"},
		{`{"type": "toolcas.compact.SlidingWindow", "init_parameters": {"min_keep_steps": -1}}`, ``, "min_keep_steps"},
		{`{"type": "toolcas.compact.SlidingWindow", "init_parameters": {"keep": 1}}`, ``, `"keep"`},
		{window, `, "token_counter": {"type": "haystack.token_counters.openai_counter.OpenAITokenCounter", "init_parameters": {}}`, "offline"},
		{window, `, "token_counter": {"type": "toolcas.compact.Counter", "init_parameters": {"text": "gpt2"}}`, `"gpt2"`},
		{window, `, "token_counter": {"type": "toolcas.compact.Counter", "init_parameters": {"text": "o200k_base", "chars_per_token": 3}}`, "approximate counter only"},
		{window, `, "token_counter": {"type": "toolcas.compact.Counter", "init_parameters": {"chars_per_token": 0}}`, "greater than 0"},
		{`{"type": "toolcas.compact.Offloading", "init_parameters": {"store": null, "min_keep_steps": 0}}`, ``, "min_keep_steps must be at least 1"},
		{`{"type": "toolcas.compact.Offloading", "init_parameters": {"store": null, "min_tokens": -1}}`, ``, "MinTokens -1"},
		{`{"type": "toolcas.compact.Offloading", "init_parameters": {"store": null, "preview_chars": -1}}`, ``, "preview of -1 characters"},
		{`{"type": "toolcas.compact.Offloading", "init_parameters": {"store": null, "run": "a\u0000b"}}`, ``, "run"},
		{`{"type": "toolcas.compact.Offloading", "init_parameters": {"store": null, "previewchars": 5}}`, ``, `"previewchars"`},
		{`{"type": "toolcas.compact.Offloading", "init_parameters": {"store": {"type": "x.Store"}}}`, ``, `unknown store type "x.Store"`},
	} {
		cfg := strings.Replace(strings.Replace(base, "COMPACTOR", tc.compactor, 1), "COUNTER", tc.counter, 1)
		if _, err := compact.LoadTrigger([]byte(cfg), compact.LoadOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadTrigger(%s) = %v, want an error naming %s", cfg, err, tc.want)
		}
	}
	if _, err := compact.LoadTrigger([]byte(`{"type": "toolcas.compact.Trigger", "init_parameters": {"context_window": 10}}`), compact.LoadOptions{}); err == nil || !strings.Contains(err.Error(), "no compactor") {
		t.Errorf("no compactor: %v", err)
	}
	if _, err := compact.LoadTrigger([]byte(`{"type": "toolcas.compact.Trigger", "init_parameters": {"compactor": `+window+`}}`), compact.LoadOptions{}); err == nil || !strings.Contains(err.Error(), "context_window") {
		t.Errorf("no window: %v", err)
	}
}
