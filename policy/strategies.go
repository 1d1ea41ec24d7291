package policy

import (
	"errors"
	"fmt"
	"strings"
)

// Wildcard is the tool name whose policy applies to any tool without a more
// specific entry.
const Wildcard = "*"

// An Entry gives a policy to one tool, to a group of tools, or, with the
// tool name Wildcard, to every other tool.
type Entry struct {
	// Tools holds one name for a single tool, several for a group.
	Tools []string
	// Group marks a group, even of one tool: in a group, "*" is a tool name
	// like any other, not a wildcard.
	Group  bool
	Policy Policy
}

// For gives a policy to one tool, or to every other tool when name is "*".
func For(name string, p Policy) Entry { return Entry{Tools: []string{name}, Policy: p} }

// ForGroup gives one policy to several tools.
func ForGroup(names []string, p Policy) Entry {
	return Entry{Tools: append([]string(nil), names...), Group: true, Policy: p}
}

// Default gives a policy to every tool without a more specific entry.
func Default(p Policy) Entry { return For(Wildcard, p) }

// Strategies picks the policy for a tool: the entry naming exactly that tool,
// else the first group (in order) containing it, else the wildcard; with
// none of these the tool is never offloaded. It is immutable and safe for
// concurrent use.
type Strategies struct {
	entries  []Entry
	exact    map[string]Policy
	wildcard Policy
}

// NewStrategies checks and indexes the entries. It refuses a nil policy (a
// Previewed not built by WithPreview included), a
// single entry naming no tool, and a tool (or the wildcard) given twice as a
// single entry. An empty group is kept and matches no tool, as Haystack
// loads one (the key "[]" in a configuration).
func NewStrategies(entries ...Entry) (*Strategies, error) {
	s := &Strategies{exact: make(map[string]Policy)}
	for i, e := range entries {
		if e.Policy == nil {
			return nil, fmt.Errorf("policy: entry %d (%s) has no policy", i, e.label())
		}
		if v, ok := e.Policy.(Previewed); ok && v.policy == nil {
			return nil, fmt.Errorf("policy: entry %d (%s) has a preview mode but no policy: build it with WithPreview", i, e.label())
		}
		if len(e.Tools) == 0 && !e.Group {
			return nil, fmt.Errorf("policy: entry %d names no tool", i)
		}
		if !e.Group && len(e.Tools) != 1 {
			return nil, fmt.Errorf("policy: entry %d names %d tools but is not a group", i, len(e.Tools))
		}
		e.Tools = append([]string(nil), e.Tools...)
		if !e.Group {
			name := e.Tools[0]
			if name == Wildcard {
				if s.wildcard != nil {
					return nil, errors.New(`policy: the wildcard "*" is given twice`)
				}
				s.wildcard = e.Policy
			} else {
				if _, dup := s.exact[name]; dup {
					return nil, fmt.Errorf("policy: tool %q is given twice", name)
				}
				s.exact[name] = e.Policy
			}
		}
		s.entries = append(s.entries, e)
	}
	return s, nil
}

// MustStrategies is NewStrategies for entries known to be valid; it panics
// on error.
func MustStrategies(entries ...Entry) *Strategies {
	s, err := NewStrategies(entries...)
	if err != nil {
		panic(err)
	}
	return s
}

// For returns the policy for a tool, and false when no entry applies.
func (s *Strategies) For(tool string) (Policy, bool) {
	if s == nil {
		return nil, false
	}
	if p, ok := s.exact[tool]; ok {
		return p, true
	}
	if tool == Wildcard && s.wildcard != nil {
		// A tool named "*" finds the "*" entry by exact name, as in Haystack.
		return s.wildcard, true
	}
	for _, e := range s.entries {
		if !e.Group {
			continue
		}
		for _, name := range e.Tools {
			if name == tool {
				return e.Policy, true
			}
		}
	}
	if s.wildcard != nil {
		return s.wildcard, true
	}
	return nil, false
}

// Entries returns the entries in order.
func (s *Strategies) Entries() []Entry {
	if s == nil {
		return nil
	}
	out := make([]Entry, len(s.entries))
	for i, e := range s.entries {
		e.Tools = append([]string(nil), e.Tools...)
		out[i] = e
	}
	return out
}

func (e Entry) label() string {
	if e.Group {
		return "[" + strings.Join(e.Tools, ", ") + "]"
	}
	return strings.Join(e.Tools, ",")
}
