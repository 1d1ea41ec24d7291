package policy

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/toolcas/toolcas/internal/strictjson"
	"github.com/toolcas/toolcas/tokens"
)

// Type names written in configuration. Haystack's names for the same
// policies are accepted when loading, so a Haystack configuration loads
// unchanged.
const (
	TypeAlways    = "toolcas.policy.Always"
	TypeNever     = "toolcas.policy.Never"
	TypeOverChars = "toolcas.policy.OverChars"
	// TypeOverTokens has init parameters {"threshold": N, "counter":
	// NAME}, NAME one of tokens.ByName's (default "approximate").
	TypeOverTokens = "toolcas.policy.OverTokens"
)

// haystackNames maps the class names of Haystack's policies, under any
// haystack.* module, to ours.
var haystackNames = map[string]string{
	"AlwaysOffload":    TypeAlways,
	"NeverOffload":     TypeNever,
	"OffloadOverChars": TypeOverChars,
}

// Typed is the {"type", "init_parameters"} shape every component is saved
// in.
type Typed struct {
	Type           string          `json:"type"`
	InitParameters json.RawMessage `json:"init_parameters"`
}

// CanonicalType maps a Haystack type name to toolcas's; other names are
// returned as they are.
func CanonicalType(name string) string {
	ours, _ := strictjson.Canonical(name, haystackNames)
	return ours
}

type overCharsParams struct {
	Threshold *int `json:"threshold"`
}

type overTokensParams struct {
	Threshold *int   `json:"threshold"`
	Counter   string `json:"counter,omitempty"`
}

// Marshal saves a policy as {"type", "init_parameters"}: a built-in one, or
// a Configurable one whose type is registered. Func policies and other types
// cannot be saved.
//
// A Previewed policy is saved as the policy it wraps, its mode added to the
// init parameters as PreviewParam: {"type": "toolcas.policy.OverChars",
// "init_parameters": {"threshold": 4000, "preview": "json_shape"}}.
func Marshal(p Policy) ([]byte, error) {
	t, err := marshalTyped(p)
	if err != nil {
		return nil, err
	}
	return json.Marshal(t)
}

// marshalTyped returns the {"type", "init_parameters"} a policy is saved as.
func marshalTyped(p Policy) (Typed, error) {
	var t Typed
	switch v := p.(type) {
	case Previewed:
		if v.policy == nil {
			return Typed{}, errors.New("policy: a Previewed with no policy: build it with WithPreview")
		}
		inner, err := marshalTyped(v.policy)
		if err != nil {
			return Typed{}, err
		}
		if inner.InitParameters, err = withPreviewParam(inner.InitParameters, v.mode); err != nil {
			return Typed{}, fmt.Errorf("policy: %s: %w", inner.Type, err)
		}
		return inner, nil
	case Fixed:
		t.Type = TypeNever
		if v {
			t.Type = TypeAlways
		}
		t.InitParameters = json.RawMessage(`{}`)
	case OverChars:
		n := int(v)
		b, _ := json.Marshal(overCharsParams{Threshold: &n})
		t.Type, t.InitParameters = TypeOverChars, b
	case OverTokens:
		name, err := tokens.NameOf(v.Counter)
		if err != nil {
			return Typed{}, fmt.Errorf("policy: %s: %w", TypeOverTokens, err)
		}
		n := v.Max
		b, _ := json.Marshal(overTokensParams{Threshold: &n, Counter: name})
		t.Type, t.InitParameters = TypeOverTokens, b
	case Configurable:
		ct, err := marshalCustom(v)
		if err != nil {
			return Typed{}, err
		}
		if _, mode, err := takePreviewParam(ct.InitParameters); err != nil || mode != "" {
			return Typed{}, fmt.Errorf("policy: %s: the init parameter %q is reserved for the preview mode (policy.WithPreview)", ct.Type, PreviewParam)
		}
		t = ct
	default:
		return Typed{}, fmt.Errorf("policy: a %T cannot be saved as configuration: implement policy.Configurable and register its type", p)
	}
	return t, nil
}

// Unmarshal loads a policy saved by Marshal, or by Haystack: a built-in
// type, or one registered with Register. Any other type is an error that
// wraps ErrUnknownType and names it. A PreviewParam among the init
// parameters gives the policy that preview mode (an unknown mode is an
// error wrapping ErrUnknownPreview); the policy's own loader never sees it.
func Unmarshal(data []byte) (Policy, error) {
	var t Typed
	if err := strictjson.Decode(data, &t); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if t.Type == "" {
		return nil, errors.New(`policy: no "type"`)
	}
	params := t.InitParameters
	if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
		params = json.RawMessage(`{}`)
	}
	params, mode, err := takePreviewParam(params)
	if err != nil {
		return nil, fmt.Errorf("policy: %s: %w", t.Type, err)
	}
	p, err := unmarshalBase(t, params)
	if err != nil || mode == "" {
		return p, err
	}
	return WithPreview(p, mode)
}

// unmarshalBase loads the policy of type t.Type from its init parameters,
// the preview mode taken out of them.
func unmarshalBase(t Typed, params json.RawMessage) (Policy, error) {
	switch CanonicalType(t.Type) {
	case TypeAlways, TypeNever:
		var none struct{}
		if err := strictjson.Decode(params, &none); err != nil {
			return nil, fmt.Errorf("policy: %s: %w", t.Type, err)
		}
		if CanonicalType(t.Type) == TypeAlways {
			return Always, nil
		}
		return Never, nil
	case TypeOverChars:
		var p overCharsParams
		if err := strictjson.Decode(params, &p); err != nil {
			return nil, fmt.Errorf("policy: %s: %w", t.Type, err)
		}
		if p.Threshold == nil {
			return nil, fmt.Errorf("policy: %s: no threshold", t.Type)
		}
		return OverChars(*p.Threshold), nil
	case TypeOverTokens:
		var p overTokensParams
		if err := strictjson.Decode(params, &p); err != nil {
			return nil, fmt.Errorf("policy: %s: %w", t.Type, err)
		}
		if p.Threshold == nil {
			return nil, fmt.Errorf("policy: %s: no threshold", t.Type)
		}
		if *p.Threshold < 0 {
			return nil, fmt.Errorf("policy: %s: threshold %d: want 0 or more tokens", t.Type, *p.Threshold)
		}
		c, err := tokens.ByName(cmp.Or(p.Counter, tokens.ApproximateName))
		if err != nil {
			return nil, fmt.Errorf("policy: %s: counter: %w", t.Type, err)
		}
		return OverTokens{Max: *p.Threshold, Counter: c}, nil
	}
	if strings.HasSuffix(t.Type, ".CallableOffloadPolicy") && loader(t.Type) == nil {
		return nil, fmt.Errorf("policy: %s wraps a Python function, which cannot run here; give the tool a Go policy", t.Type)
	}
	return unmarshalCustom(t.Type, params)
}

// MarshalJSON saves the strategies as Haystack does: an object from tool
// name (a group as a JSON array written as a string, "*" for the wildcard)
// to policy, in entry order.
func (s *Strategies) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range s.Entries() {
		if i > 0 {
			b.WriteString(", ")
		}
		var key string
		if !e.Group {
			key = e.Tools[0]
		} else {
			// Python's json.dumps separators, so the key reads as Haystack writes it.
			quoted := make([]string, len(e.Tools))
			for j, t := range e.Tools {
				q, _ := json.Marshal(t)
				quoted[j] = string(q)
			}
			key = "[" + strings.Join(quoted, ", ") + "]"
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteString(": ")
		p, err := Marshal(e.Policy)
		if err != nil {
			return nil, fmt.Errorf("policy: tool %s: %w", e.label(), err)
		}
		b.Write(p)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON loads strategies saved by MarshalJSON or by Haystack,
// keeping the order of the entries, which decides between groups.
func (s *Strategies) UnmarshalJSON(data []byte) error {
	d := json.NewDecoder(bytes.NewReader(data))
	tok, err := d.Token()
	if err != nil {
		return fmt.Errorf("policy: strategies: %w", err)
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("policy: strategies: want an object, got %v", tok)
	}
	var entries []Entry
	seen := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return fmt.Errorf("policy: strategies: %w", err)
		}
		key := tok.(string)
		if seen[key] {
			return fmt.Errorf("policy: strategies: key %q appears twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return fmt.Errorf("policy: strategies: %q: %w", key, err)
		}
		p, err := Unmarshal(raw)
		if err != nil {
			return fmt.Errorf("policy: strategies: %q: %w", key, err)
		}
		if strings.HasPrefix(key, "[") {
			var names []string
			if err := json.Unmarshal([]byte(key), &names); err != nil {
				return fmt.Errorf("policy: strategies: group key %q is not a JSON array of names: %w", key, err)
			}
			entries = append(entries, ForGroup(names, p))
		} else {
			entries = append(entries, For(key, p))
		}
	}
	if _, err := d.Token(); err != nil {
		return fmt.Errorf("policy: strategies: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("policy: strategies: trailing data after the object")
	}
	ns, err := NewStrategies(entries...)
	if err != nil {
		return err
	}
	*s = *ns
	return nil
}
