package hook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/tokens"
)

func textResult(tool, id string, chars int) hook.Result {
	return hook.Result{Tool: tool, CallID: id, Parts: []hook.Part{hook.Text(strings.Repeat("x", chars))}}
}

// TestStepBudget: five results of 7,000 characters, each under its tool's
// threshold of 8,000, flood a step with 8,750 approximate tokens; under a
// budget of 4,000 the largest go first until the rest fit, whatever their
// tools' policies say, and results the hook never offloads stay and count.
func TestStepBudget(t *testing.T) {
	ctx := context.Background()
	h, err := hook.New(hook.NewMemStore(), policy.MustStrategies(policy.Default(policy.OverChars(8000))), hook.WithStepBudget(4000, nil))
	if err != nil {
		t.Fatal(err)
	}
	results := []hook.Result{
		textResult("a", "1", 7000),
		textResult("b", "2", 7200),
		textResult("c", "3", 6800),
		textResult("d", "4", 7100),
		textResult("e", "5", 7000),
		{Tool: "f", CallID: "6", Error: true, Parts: []hook.Part{hook.Text(strings.Repeat("e", 4000))}}, // 1,000 tokens, an error: stays
	}
	out, err := h.Offload(ctx, hook.Step{Run: "r", Number: 1}, results)
	if err != nil {
		t.Fatal(err)
	}
	var offloaded []string
	left := 0
	for i, r := range out {
		if hook.IsPointer(r) {
			offloaded = append(offloaded, r.Tool)
			continue
		}
		left += tokens.Approximate{}.CountText(results[i].Parts[0].Text)
	}
	// 1,750 + 1,800 + 1,700 + 1,775 + 1,750 + 1,000 = 9,775: b, d, then a
	// (the first of the two of 1,750) bring it to 4,450, then e to 2,700.
	if got, want := strings.Join(offloaded, ","), "a,b,d,e"; got != want {
		t.Errorf("offloaded %s, want %s (largest first)", got, want)
	}
	if left > 4000 {
		t.Errorf("%d tokens left in context, want at most 4000", left)
	}
	// Under the budget, the policies alone decide.
	small := []hook.Result{textResult("a", "1", 1000), textResult("b", "2", 9000)}
	out, _ = h.Offload(ctx, hook.Step{Run: "r", Number: 2}, small)
	if hook.IsPointer(out[0]) || !hook.IsPointer(out[1]) {
		t.Errorf("under the budget: offloaded %v, %v; want only the one over its threshold", hook.IsPointer(out[0]), hook.IsPointer(out[1]))
	}
}

// TestStepBudgetTools: a tool with no policy of its own is offloaded by the
// budget too, the read tool's results never.
func TestStepBudgetTools(t *testing.T) {
	h, err := hook.New(hook.NewMemStore(), policy.MustStrategies(policy.For("search", policy.Never)), hook.WithStepBudget(100, nil))
	if err != nil {
		t.Fatal(err)
	}
	results := []hook.Result{textResult("search", "1", 1000), textResult("other", "2", 2000), textResult(hook.ReadToolName, "3", 3000)}
	out, err := h.Offload(context.Background(), hook.Step{Run: "r", Number: 1}, results)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		if got := hook.IsPointer(out[i]); got != want {
			t.Errorf("result %d (%s) offloaded %v, want %v", i, results[i].Tool, got, want)
		}
	}
}

func TestStepBudgetOptionAndConfig(t *testing.T) {
	strategies := policy.MustStrategies(policy.Default(policy.OverChars(8000)))
	for _, n := range []int{0, -5} {
		if _, err := hook.New(nil, strategies, hook.WithStepBudget(n, nil)); err == nil || !strings.Contains(err.Error(), "step budget") {
			t.Errorf("WithStepBudget(%d) = %v, want an error", n, err)
		}
	}
	if _, err := hook.NewReadTool(hook.NewMemStore(), hook.WithStepBudget(10, nil)); err == nil {
		t.Error("NewReadTool took WithStepBudget")
	}
	o200k, _ := tokens.NewExact(tokens.O200kBase)
	h, err := hook.New(hook.NewMemStore(), strategies, hook.WithStepBudget(3000, o200k))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"step_budget":{"max_tokens":3000,"counter":"o200k_base"}`) {
		t.Errorf("saved as %s", b)
	}
}

func TestStepBudgetLoads(t *testing.T) {
	cfg := `{"type": "toolcas.hook.Hook", "init_parameters": {"store": null,
		"offload_strategies": {"*": {"type": "toolcas.policy.OverChars", "init_parameters": {"threshold": 8000}}},
		"step_budget": {"max_tokens": 3000, "counter": "cl100k_base"}}}`
	h, err := hook.Load([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(h)
	if !strings.Contains(string(b), `"step_budget":{"max_tokens":3000,"counter":"cl100k_base"}`) {
		t.Errorf("loaded hook saves as %s", b)
	}
	for in, want := range map[string]string{
		`"step_budget": {"max_tokens": 0}`:                      "step budget of 0",
		`"step_budget": {"max_tokens": 10, "counter": "gpt2"}`:  `"gpt2"`,
		`"step_budget": {"max_tokens": 10, "encoding": "gpt2"}`: "encoding",
	} {
		bad := strings.Replace(cfg, `"step_budget": {"max_tokens": 3000, "counter": "cl100k_base"}`, in, 1)
		if _, err := hook.Load([]byte(bad)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load with %s = %v, want an error naming %s", in, err, want)
		}
	}
}

// TestShortPointers: a pointer with sizes and keys only, which the read
// tool reads back by key, and which the hook's configuration keeps.
func TestShortPointers(t *testing.T) {
	ctx := context.Background()
	s := hook.NewMemStore()
	h, err := hook.New(s, policy.MustStrategies(policy.Default(policy.Always)), hook.WithShortPointers())
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Offload(ctx, hook.Step{Run: "r", Number: 3}, []hook.Result{
		textResult("bash", "c1", 5000),
		{Tool: "shot", CallID: "c2", Parts: []hook.Part{hook.Text("caption"), hook.Image("image/png", []byte("png bytes"))}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{
		"Tool result offloaded (5000 characters, key 'r/3_bash_c1.txt').",
		"Tool result offloaded (7 characters, key 'r/3_shot_c2_0.txt'; image/png, 9 bytes, key 'r/3_shot_c2_1.png').",
	} {
		if !hook.IsPointer(out[i]) || out[i].Parts[0].Text != want {
			t.Errorf("pointer %d = %q, want %q", i, out[i].Parts[0].Text, want)
		}
	}
	c, err := s.Read(ctx, "r", "r/3_bash_c1.txt")
	if err != nil || string(c.Data) != strings.Repeat("x", 5000) {
		t.Errorf("read back by key: %v", err)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	back, err := hook.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	if b2, _ := json.Marshal(back); !strings.Contains(string(b2), `"short_pointers":true`) {
		t.Errorf("saved as %s, loads and saves as %s", b, b2)
	}
}
