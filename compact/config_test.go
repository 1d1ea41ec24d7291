package compact_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/compact"
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
	// An offloading compactor writes to a store the program opens.
	o, _ := compact.NewOffloading(nil, "r", compact.Options{})
	tr, _ := compact.NewTrigger(o, 1000)
	if _, err := json.Marshal(tr); err == nil || !strings.Contains(err.Error(), "cannot be saved") {
		t.Errorf("saving an offloading trigger: %v", err)
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
