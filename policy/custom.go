package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// State is a run's live state as a policy sees it: whatever the framework
// adapter exposes (Haystack's State, a LangGraph channel map, an ADK
// session). Implementations must be safe for concurrent reads.
type State interface {
	// Get returns the value stored under key, and whether there is one.
	Get(key string) (any, bool)
}

// StateMap is a State held in a map, for adapters whose state is one.
type StateMap map[string]any

// Get returns m[key].
func (m StateMap) Get(key string) (any, bool) {
	v, ok := m[key]
	return v, ok
}

// A Configurable policy can be saved in configuration and loaded again,
// once its type is registered with Register.
type Configurable interface {
	Policy
	// PolicyConfig returns the policy's type name and the init parameters
	// its Loader takes back.
	PolicyConfig() (typeName string, params any)
}

// A Loader builds a policy from its saved init parameters ({} when none
// were saved).
type Loader func(params json.RawMessage) (Policy, error)

// ErrUnknownType is returned, wrapped with the name, by Unmarshal (and so by
// loading strategies and hooks) for a policy type that is neither built in
// nor registered.
var ErrUnknownType = errors.New("unknown policy type")

var (
	registryMu sync.RWMutex
	registry   = map[string]Loader{}
)

// Register makes a custom policy type loadable from configuration, under
// its type name and any aliases (a Haystack class path such as
// "my_agent.policies.OffloadLateSteps", so that a Haystack configuration
// naming it loads). Packages defining policies call it from init, as
// database/sql drivers register themselves. It panics on an empty name, a
// nil loader, a built-in type's name, or a name registered twice.
func Register(typeName string, load Loader, aliases ...string) {
	if load == nil {
		panic("policy: Register " + typeName + " with a nil loader")
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, n := range append([]string{typeName}, aliases...) {
		switch {
		case n == "":
			panic("policy: Register with an empty type name")
		case CanonicalType(n) == TypeAlways || CanonicalType(n) == TypeNever || CanonicalType(n) == TypeOverChars:
			panic("policy: Register " + n + ": a built-in policy type")
		case registry[n] != nil:
			panic("policy: Register " + n + " twice")
		}
		registry[n] = load
	}
}

// Registered returns the registered custom policy type names, sorted.
func Registered() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func loader(typeName string) Loader {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return registry[typeName]
}

// marshalCustom saves a Configurable policy whose type is registered.
func marshalCustom(p Configurable) (Typed, error) {
	typ, params := p.PolicyConfig()
	if loader(typ) == nil {
		return Typed{}, fmt.Errorf("policy: a %T saves as type %q, which is not registered: call policy.Register(%q, …) so that it can be loaded back", p, typ, typ)
	}
	if params == nil {
		params = struct{}{}
	}
	b, err := json.Marshal(params)
	if err != nil {
		return Typed{}, fmt.Errorf("policy: %s: init parameters: %w", typ, err)
	}
	return Typed{Type: typ, InitParameters: b}, nil
}

// unmarshalCustom loads a registered custom policy, or says the type is
// unknown, naming it and what is registered.
func unmarshalCustom(typ string, params json.RawMessage) (Policy, error) {
	load := loader(typ)
	if load == nil {
		known := append([]string{TypeAlways, TypeNever, TypeOverChars}, Registered()...)
		return nil, fmt.Errorf("policy: %w %q: register it with policy.Register (known: %s)", ErrUnknownType, typ, strings.Join(known, ", "))
	}
	p, err := load(params)
	if err != nil {
		return nil, fmt.Errorf("policy: %s: %w", typ, err)
	}
	if p == nil {
		return nil, fmt.Errorf("policy: %s: the loader returned no policy", typ)
	}
	return p, nil
}
