package policy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/policy"
)

// budgetPolicy offloads when the run's state says the context budget left
// is under a floor: a policy that decides from the adapter's live state.
type budgetPolicy struct{ Floor int }

func (b budgetPolicy) ShouldOffload(s *policy.Subject) bool {
	if s.State == nil {
		return false
	}
	v, ok := s.State.Get("tokens_left")
	left, isInt := v.(int)
	return ok && isInt && left < b.Floor
}

func (b budgetPolicy) PolicyConfig() (string, any) {
	return "example.BudgetPolicy", map[string]int{"floor": b.Floor}
}

// unregistered is Configurable but its type was never registered.
type unregistered struct{}

func (unregistered) ShouldOffload(*policy.Subject) bool { return true }
func (unregistered) PolicyConfig() (string, any)        { return "example.Unregistered", nil }

func init() {
	policy.Register("example.BudgetPolicy", func(params json.RawMessage) (policy.Policy, error) {
		var p struct {
			Floor *int `json:"floor"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		if p.Floor == nil {
			return nil, errors.New("no floor")
		}
		return budgetPolicy{Floor: *p.Floor}, nil
	}, "my_agent.policies.BudgetPolicy")
}

func TestCustomPolicySeesState(t *testing.T) {
	p := budgetPolicy{Floor: 1000}
	for _, tc := range []struct {
		state policy.State
		want  bool
	}{
		{nil, false},
		{policy.StateMap{}, false},
		{policy.StateMap{"tokens_left": 5000}, false},
		{policy.StateMap{"tokens_left": 10}, true},
	} {
		s := policy.NewSubject("search", "r", 3, []policy.Part{{Kind: policy.KindText, Size: 4}}, func() string { return "abcd" })
		s.State = tc.state
		if got := p.ShouldOffload(s); got != tc.want {
			t.Errorf("state %v: ShouldOffload = %v, want %v", tc.state, got, tc.want)
		}
	}
}

func TestRegisteredPolicyRoundTrip(t *testing.T) {
	s := policy.MustStrategies(policy.For("search", budgetPolicy{Floor: 42}), policy.Default(policy.OverChars(10)))
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"search":{"type":"example.BudgetPolicy","init_parameters":{"floor":42}},"*":{"type":"toolcas.policy.OverChars","init_parameters":{"threshold":10}}}`
	if string(b) != want {
		t.Errorf("saved %s\nwant  %s", b, want)
	}
	var back policy.Strategies
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if p, _ := back.For("search"); p != (budgetPolicy{Floor: 42}) {
		t.Errorf("loaded %#v", p)
	}
	// A Haystack configuration naming the policy by its alias loads too.
	hay := `{"search": {"type": "my_agent.policies.BudgetPolicy", "init_parameters": {"floor": 7}}}`
	if err := json.Unmarshal([]byte(hay), &back); err != nil {
		t.Fatal(err)
	}
	if p, _ := back.For("search"); p != (budgetPolicy{Floor: 7}) {
		t.Errorf("loaded by alias %#v", p)
	}
}

func TestUnregisteredPolicyRefused(t *testing.T) {
	for _, tc := range []struct{ cfg, name string }{
		{`{"type": "my_agent.policies.OffloadLateSteps", "init_parameters": {"from_step": 3}}`, "my_agent.policies.OffloadLateSteps"},
		{`{"type": "example.BudgetPolicy", "init_parameters": {}}`, "no floor"},
		{`{"type": "haystack.hooks.tool_result_offloading.CallableOffloadPolicy", "init_parameters": {}}`, "Python function"},
	} {
		_, err := policy.Unmarshal([]byte(tc.cfg))
		if err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("Unmarshal(%s) = %v, want an error naming %q", tc.cfg, err, tc.name)
		}
	}
	_, err := policy.Unmarshal([]byte(`{"type": "nope.Policy"}`))
	if !errors.Is(err, policy.ErrUnknownType) || !strings.Contains(err.Error(), `"nope.Policy"`) || !strings.Contains(err.Error(), "example.BudgetPolicy") {
		t.Errorf("unknown type: %v, want ErrUnknownType naming it and listing the registered ones", err)
	}
	if _, err := policy.Marshal(unregistered{}); err == nil || !strings.Contains(err.Error(), "example.Unregistered") {
		t.Errorf("Marshal of an unregistered type = %v", err)
	}
	if _, err := policy.Marshal(policy.Func(func(*policy.Subject) bool { return true })); err == nil {
		t.Error("Marshal of a Func accepted")
	}
}

func TestRegisterPanics(t *testing.T) {
	load := func(json.RawMessage) (policy.Policy, error) { return policy.Always, nil }
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"twice", func() { policy.Register("example.BudgetPolicy", load) }},
		{"built-in", func() { policy.Register(policy.TypeOverChars, load) }},
		{"Haystack built-in", func() { policy.Register("haystack.hooks.tool_result_offloading.AlwaysOffload", load) }},
		{"empty", func() { policy.Register("", load) }},
		{"nil loader", func() { policy.Register("example.Nil", nil) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register %s did not panic", tc.name)
				}
			}()
			tc.f()
		}()
	}
	if r := policy.Registered(); fmt.Sprint(r) != "[example.BudgetPolicy example.ReservedParams my_agent.policies.BudgetPolicy]" {
		t.Errorf("Registered() = %v", r)
	}
}
