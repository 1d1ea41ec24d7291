package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// PreviewMode says how the pointer left for an offloaded text part previews
// it. The mode belongs to the policy that picked the result, so that each
// tool (or group of tools) can have its own.
type PreviewMode string

// The preview modes.
const (
	// PreviewHead shows the first preview_chars code points, and "..."
	// when that cut the text short: Haystack's preview, and the default.
	PreviewHead PreviewMode = "head"
	// PreviewHeadTail shows the beginning and the end of the text, with a
	// marker saying how many code points were cut between them, within
	// preview_chars in all.
	PreviewHeadTail PreviewMode = "head_tail"
	// PreviewJSONShape shows the shape of a JSON text (its keys, array
	// lengths and value types) within preview_chars; a text that is not a
	// JSON object or array is previewed as PreviewHead does.
	PreviewJSONShape PreviewMode = "json_shape"
)

// PreviewModes returns the known preview modes, the default first.
func PreviewModes() []PreviewMode {
	return []PreviewMode{PreviewHead, PreviewHeadTail, PreviewJSONShape}
}

// ErrUnknownPreview is returned, wrapped with the mode and the known ones,
// by ParsePreviewMode, WithPreview and Unmarshal for a preview mode that is
// not one of PreviewModes.
var ErrUnknownPreview = errors.New("unknown preview mode")

// PreviewParam is the init parameter that carries a policy's preview mode in
// configuration, beside the policy's own parameters; no policy type may use
// it for anything else.
const PreviewParam = "preview"

// ParsePreviewMode returns the preview mode named s.
func ParsePreviewMode(s string) (PreviewMode, error) {
	for _, m := range PreviewModes() {
		if string(m) == s {
			return m, nil
		}
	}
	known := make([]string, 0, 3)
	for _, m := range PreviewModes() {
		known = append(known, string(m))
	}
	return "", fmt.Errorf("%w %q (known: %s)", ErrUnknownPreview, s, strings.Join(known, ", "))
}

// Previewed is a policy with a preview mode: it offloads what its policy
// offloads, and the pointer previews what it offloads in its mode. Build it
// with WithPreview.
type Previewed struct {
	policy Policy
	mode   PreviewMode
}

// WithPreview gives a policy a preview mode. It refuses a nil policy, one
// that already has a mode, and an unknown mode. Any policy can have one; as
// without a mode, only a built-in or registered policy can be saved.
func WithPreview(p Policy, mode PreviewMode) (Previewed, error) {
	if _, err := ParsePreviewMode(string(mode)); err != nil {
		return Previewed{}, fmt.Errorf("policy: %w", err)
	}
	switch p.(type) {
	case nil:
		return Previewed{}, errors.New("policy: WithPreview of no policy")
	case Previewed:
		return Previewed{}, errors.New("policy: WithPreview of a policy that has a preview mode already")
	}
	return Previewed{policy: p, mode: mode}, nil
}

// MustPreview is WithPreview for arguments known to be valid; it panics on
// error.
func MustPreview(p Policy, mode PreviewMode) Previewed {
	v, err := WithPreview(p, mode)
	if err != nil {
		panic(err)
	}
	return v
}

// ShouldOffload asks the policy p wraps.
func (p Previewed) ShouldOffload(s *Subject) bool { return p.policy.ShouldOffload(s) }

// Policy returns the policy p wraps.
func (p Previewed) Policy() Policy { return p.policy }

// Mode returns p's preview mode.
func (p Previewed) Mode() PreviewMode { return p.mode }

// String returns the policy and its mode: "OverChars(4000), preview json_shape".
func (p Previewed) String() string {
	return fmt.Sprintf("%v, preview %s", p.policy, p.mode)
}

// PreviewOf returns a policy's preview mode: PreviewHead unless it was
// given another with WithPreview, and for no policy.
func PreviewOf(p Policy) PreviewMode {
	if v, ok := p.(Previewed); ok && v.mode != "" {
		return v.mode
	}
	return PreviewHead
}

// Base returns the policy a Previewed wraps, or p itself.
func Base(p Policy) Policy {
	if v, ok := p.(Previewed); ok {
		return v.policy
	}
	return p
}

// withPreviewParam returns a policy's saved init parameters with its
// preview mode added as PreviewParam, last. Parameters that are not an
// object cannot carry it.
func withPreviewParam(params json.RawMessage, mode PreviewMode) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(params)
	if len(trimmed) < 2 || trimmed[0] != '{' {
		return nil, fmt.Errorf("init parameters %s are not an object, so they cannot carry a preview mode", trimmed)
	}
	m, _ := json.Marshal(string(mode))
	body := bytes.TrimSpace(trimmed[1 : len(trimmed)-1])
	var b bytes.Buffer
	b.WriteByte('{')
	if len(body) > 0 {
		b.Write(body)
		b.WriteByte(',')
	}
	b.WriteString(`"` + PreviewParam + `":`)
	b.Write(m)
	b.WriteByte('}')
	return b.Bytes(), nil
}

// takePreviewParam removes PreviewParam from init parameters that hold it,
// returning the parameters without it and the mode; parameters without it
// come back as they are, with mode "".
func takePreviewParam(params json.RawMessage) (json.RawMessage, PreviewMode, error) {
	trimmed := bytes.TrimSpace(params)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return params, "", nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		// The policy's own loader says what is wrong with them.
		return params, "", nil
	}
	raw, ok := fields[PreviewParam]
	if !ok {
		return params, "", nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return nil, "", fmt.Errorf("%s: want a string, one of head, head_tail, json_shape: %w", PreviewParam, err)
	}
	mode, err := ParsePreviewMode(name)
	if err != nil {
		return nil, "", err
	}
	rest, err := dropField(trimmed, PreviewParam)
	if err != nil {
		return nil, "", err
	}
	return rest, mode, nil
}

// dropField returns a JSON object without the field named key, its other
// fields as they were, in order: a duplicate key among them is still there
// for the policy's loader to see.
func dropField(obj []byte, key string) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(obj))
	if _, err := d.Token(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		if name == key {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
