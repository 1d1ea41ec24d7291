package hook_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// offloadLateSteps is Haystack's custom-policy example ported: early in a
// run, results stay in context where the model needs them; from step
// FromStep on, every result of the tools it is given to is offloaded.
type offloadLateSteps struct {
	FromStep int `json:"from_step"`
}

func (p offloadLateSteps) ShouldOffload(s *policy.Subject) bool { return s.Step >= p.FromStep }

func (p offloadLateSteps) PolicyConfig() (string, any) { return "example.OffloadLateSteps", p }

// offloadWhenAsked offloads when the adapter's state says so, to show the
// live state reaching a policy through the hook.
type offloadWhenAsked struct{}

func (offloadWhenAsked) ShouldOffload(s *policy.Subject) bool {
	if s.State == nil {
		return false
	}
	v, _ := s.State.Get("offload")
	return v == true
}

func init() {
	policy.Register("example.OffloadLateSteps", func(params json.RawMessage) (policy.Policy, error) {
		p := offloadLateSteps{FromStep: 3}
		d := json.NewDecoder(strings.NewReader(string(params)))
		d.DisallowUnknownFields()
		if err := d.Decode(&p); err != nil {
			return nil, err
		}
		return p, nil
	}, "my_agent.policies.OffloadLateSteps")
}

func TestCustomPolicyOffloadLateSteps(t *testing.T) {
	// A Haystack hook configuration naming the custom policy by its class.
	cfg := `{"type": "haystack.hooks.tool_result_offloading.ToolResultOffloadHook", "init_parameters": {
		"store": {"type": "toolcas.hook.MemStore", "init_parameters": {}},
		"offload_strategies": {"search": {"type": "my_agent.policies.OffloadLateSteps", "init_parameters": {"from_step": 3}}}}}`
	h, err := hook.Load([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	for step := range 6 {
		out, err := h.Offload(context.Background(), hook.Step{Run: "r", Number: step},
			[]hook.Result{result("search", "c", hook.Text("results")), result("other", "d", hook.Text("results"))})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := hook.IsPointer(out[0]), step >= 3; got != want {
			t.Errorf("step %d: search offloaded = %v, want %v", step, got, want)
		}
		if hook.IsPointer(out[1]) {
			t.Errorf("step %d: a tool without a policy was offloaded", step)
		}
	}
	// It saves under its registered name and loads back the same.
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"type":"example.OffloadLateSteps","init_parameters":{"from_step":3}`) {
		t.Errorf("saved %s", b)
	}
	back, err := hook.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	if b2, _ := json.Marshal(back); string(b2) != string(b) {
		t.Errorf("round trip changed the configuration:\n%s\n%s", b, b2)
	}
}

func TestCustomPolicySeesRunState(t *testing.T) {
	h := mustHook(t, hook.NewMemStore(), policy.Default(offloadWhenAsked{}))
	for _, tc := range []struct {
		state policy.State
		want  bool
	}{{nil, false}, {policy.StateMap{"offload": false}, false}, {policy.StateMap{"offload": true}, true}} {
		out, err := h.Offload(context.Background(), hook.Step{Run: "r", Number: 1, State: tc.state}, []hook.Result{result("t", "c", hook.Text("x"))})
		if err != nil {
			t.Fatal(err)
		}
		if hook.IsPointer(out[0]) != tc.want {
			t.Errorf("state %v: offloaded = %v, want %v", tc.state, hook.IsPointer(out[0]), tc.want)
		}
	}
}

func TestUnregisteredPolicyFailsLoad(t *testing.T) {
	cfg := `{"type": "toolcas.hook.Hook", "init_parameters": {"store": null,
		"offload_strategies": {"search": {"type": "my_agent.policies.NotRegistered", "init_parameters": {}}}}}`
	_, err := hook.Load([]byte(cfg))
	if !errors.Is(err, policy.ErrUnknownType) || !strings.Contains(err.Error(), "my_agent.policies.NotRegistered") {
		t.Errorf("Load = %v, want ErrUnknownType naming my_agent.policies.NotRegistered", err)
	}
	bad := strings.Replace(cfg, "my_agent.policies.NotRegistered\", \"init_parameters\": {}", "example.OffloadLateSteps\", \"init_parameters\": {\"from\": 3}", 1)
	if _, err := hook.Load([]byte(bad)); err == nil || !strings.Contains(err.Error(), "from") {
		t.Errorf("Load with a bad parameter = %v", err)
	}
}

// TestOffloadPicked: a caller that decided offloads exactly the results it
// picks, with the keys their positions give them, whatever the strategies
// say; errors and pointers stay.
func TestOffloadPicked(t *testing.T) {
	s := hook.NewMemStore()
	h := mustHook(t, s, policy.Default(policy.Never))
	errResult := result("t", "e", hook.Text("failed"))
	errResult.Error = true
	block := []hook.Result{result("t", "", hook.Text("zero")), result("t", "", hook.Text("one")), errResult}
	out, err := h.OffloadPicked(context.Background(), hook.Step{Run: "r", Number: 9}, block, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if hook.IsPointer(out[0]) || !hook.IsPointer(out[1]) || hook.IsPointer(out[2]) {
		t.Errorf("offloaded %v %v %v, want only result 1", hook.IsPointer(out[0]), hook.IsPointer(out[1]), hook.IsPointer(out[2]))
	}
	if k := hook.References(out[1])[0].Key; k != "r/9_t_call1.txt" {
		t.Errorf("key %q, want r/9_t_call1.txt", k)
	}
	if _, err := h.OffloadPicked(context.Background(), hook.Step{Run: "r"}, block, 3); err == nil {
		t.Error("a pick outside the block accepted")
	}
}
