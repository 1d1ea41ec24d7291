package policy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/policy"
)

// reservedParams is a registered custom policy whose own parameters use the
// name reserved for the preview mode.
type reservedParams struct{}

func (reservedParams) ShouldOffload(*policy.Subject) bool { return true }
func (reservedParams) PolicyConfig() (string, any) {
	return "example.ReservedParams", map[string]string{"preview": "json_shape"}
}

func init() {
	policy.Register("example.ReservedParams", func(json.RawMessage) (policy.Policy, error) { return reservedParams{}, nil })
}

func TestPreviewModeRoundTrip(t *testing.T) {
	s := policy.MustStrategies(
		policy.For("api", policy.MustPreview(policy.OverChars(4000), policy.PreviewJSONShape)),
		policy.For("logs", policy.MustPreview(policy.Always, policy.PreviewHeadTail)),
		policy.ForGroup([]string{"a", "b"}, policy.MustPreview(policy.Never, policy.PreviewHead)),
		policy.For("budget", policy.MustPreview(budgetPolicy{Floor: 7}, policy.PreviewJSONShape)),
		policy.Default(policy.OverChars(8000)),
	)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"api":{"type":"toolcas.policy.OverChars","init_parameters":{"threshold":4000,"preview":"json_shape"}},` +
		`"logs":{"type":"toolcas.policy.Always","init_parameters":{"preview":"head_tail"}},` +
		`"[\"a\", \"b\"]":{"type":"toolcas.policy.Never","init_parameters":{"preview":"head"}},` +
		`"budget":{"type":"example.BudgetPolicy","init_parameters":{"floor":7,"preview":"json_shape"}},` +
		`"*":{"type":"toolcas.policy.OverChars","init_parameters":{"threshold":8000}}}`
	var compact bytes.Buffer
	json.Compact(&compact, b)
	if got := compact.String(); got != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", got, want)
	}
	var back policy.Strategies
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool string
		mode policy.PreviewMode
		base policy.Policy
	}{
		{"api", policy.PreviewJSONShape, policy.OverChars(4000)},
		{"logs", policy.PreviewHeadTail, policy.Always},
		{"a", policy.PreviewHead, policy.Never},
		{"budget", policy.PreviewJSONShape, budgetPolicy{Floor: 7}},
		{"other", policy.PreviewHead, policy.OverChars(8000)},
	} {
		p, _ := back.For(tc.tool)
		if got := policy.PreviewOf(p); got != tc.mode {
			t.Errorf("after a round trip, PreviewOf(%s) = %q, want %q", tc.tool, got, tc.mode)
		}
		if got := policy.Base(p); got != tc.base {
			t.Errorf("after a round trip, Base(%s) = %v, want %v", tc.tool, got, tc.base)
		}
		orig, _ := s.For(tc.tool)
		if p != orig {
			t.Errorf("after a round trip, %s gets %v, want %v", tc.tool, p, orig)
		}
	}
	again, err := json.Marshal(&back)
	if err != nil || !bytes.Equal(again, b) {
		t.Errorf("saved again as %s (%v), want %s", again, err, b)
	}
}

func TestPreviewModeDecides(t *testing.T) {
	p := policy.MustPreview(policy.OverChars(3), policy.PreviewHeadTail)
	for _, tc := range []struct {
		size int
		want bool
	}{{3, false}, {4, true}} {
		s := policy.NewSubject("t", "r", 1, []policy.Part{{Kind: policy.KindText, Size: tc.size}}, nil)
		if got := p.ShouldOffload(s); got != tc.want {
			t.Errorf("%v on %d characters = %v, want %v", p, tc.size, got, tc.want)
		}
	}
	if got, want := p.String(), "OverChars(3), preview head_tail"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := policy.PreviewOf(nil); got != policy.PreviewHead {
		t.Errorf("PreviewOf(nil) = %q, want head", got)
	}
}

func TestPreviewModeRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		{"unknown mode", `{"a": {"type": "toolcas.policy.Always", "init_parameters": {"preview": "tail"}}}`,
			[]string{`unknown preview mode "tail"`, "head, head_tail, json_shape"}},
		{"not a string", `{"a": {"type": "toolcas.policy.OverChars", "init_parameters": {"threshold": 1, "preview": 3}}}`,
			[]string{"preview", "want a string"}},
		{"other parameters still checked", `{"a": {"type": "toolcas.policy.Always", "init_parameters": {"preview": "head", "x": 1}}}`,
			[]string{"unknown field"}},
		{"custom loader still checked", `{"a": {"type": "example.BudgetPolicy", "init_parameters": {"preview": "head"}}}`,
			[]string{"no floor"}},
	} {
		var s policy.Strategies
		err := json.Unmarshal([]byte(tc.in), &s)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Unmarshal(%s) = %v, want an error saying %q", tc.name, tc.in, err, w)
			}
		}
	}
	_, err := policy.ParsePreviewMode("shape")
	if !errors.Is(err, policy.ErrUnknownPreview) || !strings.Contains(err.Error(), `"shape"`) || !strings.Contains(err.Error(), "json_shape") {
		t.Errorf("ParsePreviewMode(shape) = %v, want ErrUnknownPreview naming it and the known modes", err)
	}
	for _, tc := range []struct {
		name string
		p    policy.Policy
		mode policy.PreviewMode
	}{
		{"unknown mode", policy.Always, "middle"},
		{"empty mode", policy.Always, ""},
		{"no policy", nil, policy.PreviewHead},
		{"twice", policy.MustPreview(policy.Always, policy.PreviewHead), policy.PreviewJSONShape},
	} {
		if _, err := policy.WithPreview(tc.p, tc.mode); err == nil {
			t.Errorf("WithPreview, %s: accepted", tc.name)
		}
	}
	if _, err := policy.NewStrategies(policy.For("a", policy.Previewed{})); err == nil {
		t.Error("NewStrategies took a Previewed with no policy")
	}
	if _, err := policy.Marshal(policy.MustPreview(reservedParams{}, policy.PreviewHead)); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("Marshal of a custom policy using %q = %v, want it refused as reserved", policy.PreviewParam, err)
	}
	if _, err := policy.Marshal(reservedParams{}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("Marshal of a custom policy using %q = %v, want it refused as reserved", policy.PreviewParam, err)
	}
}

// TestPreviewParamKeepsOtherFields: taking the mode out leaves the rest of
// the parameters as the policy's loader would have seen them, duplicates
// included.
func TestPreviewParamKeepsOtherFields(t *testing.T) {
	in := `{"a": {"type": "toolcas.policy.OverChars", "init_parameters": {"threshold": 1, "preview": "head", "threshold": 2}}}`
	var s policy.Strategies
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	p, _ := s.For("a")
	if got := policy.Base(p); got != policy.OverChars(2) {
		t.Errorf("loaded %v, want OverChars(2) as without the preview", got)
	}
}

// TestPreviewOfFunc: a Func policy takes a mode too, and is still refused
// when saved.
func TestPreviewOfFunc(t *testing.T) {
	p, err := policy.WithPreview(policy.Func(func(*policy.Subject) bool { return true }), policy.PreviewJSONShape)
	if err != nil || policy.PreviewOf(p) != policy.PreviewJSONShape || !p.ShouldOffload(policy.NewSubject("t", "r", 1, nil, nil)) {
		t.Errorf("WithPreview(Func) = %v, %v", p, err)
	}
	if _, err := policy.Marshal(p); err == nil {
		t.Error("a Func with a preview mode was saved")
	}
}
