package hook

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/toolcas/toolcas/internal/strictjson"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/tokens"
)

// Type names written in configuration. Haystack's names are accepted when
// loading: its ToolResultOffloadHook, and its FileSystemToolResultStore,
// which loads as a DirStore.
const (
	TypeHook     = "toolcas.hook.Hook"
	TypeDirStore = "toolcas.hook.DirStore"
	TypeMemStore = "toolcas.hook.MemStore"
)

// A ConfigurableStore can be saved in a hook's configuration.
type ConfigurableStore interface {
	Store
	// StoreConfig returns the store's type name and init parameters.
	StoreConfig() (typeName string, params any)
}

// StoreLoader builds a store from its saved init parameters.
type StoreLoader func(params json.RawMessage) (Store, error)

var (
	loadersMu sync.RWMutex
	loaders   = map[string]StoreLoader{}
)

// RegisterStore makes a store type loadable from configuration, under its
// type name and any aliases. Packages that define stores call it from init,
// as database/sql drivers register themselves. It panics, as
// policy.Register does, on an empty name, a nil loader, or a name
// registered twice.
func RegisterStore(typeName string, load StoreLoader, aliases ...string) {
	if load == nil {
		panic("hook: RegisterStore " + typeName + " with a nil loader")
	}
	names := append([]string{typeName}, aliases...)
	loadersMu.Lock()
	defer loadersMu.Unlock()
	for _, n := range names {
		switch {
		case n == "":
			panic("hook: RegisterStore with an empty type name")
		case loaders[n] != nil:
			panic("hook: RegisterStore " + n + " twice")
		}
	}
	for _, n := range names {
		loaders[n] = load
	}
}

func init() {
	RegisterStore(TypeDirStore, loadDirStore)
	RegisterStore(TypeMemStore, func(params json.RawMessage) (Store, error) {
		var p struct {
			TextOnly bool `json:"text_only"`
		}
		if err := strictjson.Decode(params, &p); err != nil {
			return nil, fmt.Errorf("%s: %w", TypeMemStore, err)
		}
		if p.TextOnly {
			return NewMemStore(TextOnly()), nil
		}
		return NewMemStore(), nil
	})
}

func loadDirStore(params json.RawMessage) (Store, error) {
	var p struct {
		Root    string `json:"root"`
		Durable bool   `json:"durable"`
	}
	if err := strictjson.Decode(params, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", TypeDirStore, err)
	}
	if p.Root == "" {
		return nil, fmt.Errorf("%s: no root", TypeDirStore)
	}
	var opts []DirOption
	if p.Durable {
		opts = append(opts, Durable())
	}
	return NewDirStore(p.Root, opts...)
}

// StoreConfig returns the DirStore's configuration, with its root as it was
// given: a relative root stays relative.
func (d *DirStore) StoreConfig() (string, any) {
	return TypeDirStore, map[string]any{"root": d.dir, "durable": d.durable}
}

// StoreConfig returns the MemStore's configuration (its contents are not
// saved).
func (m *MemStore) StoreConfig() (string, any) {
	return TypeMemStore, map[string]any{"text_only": m.textOnly}
}

// canonicalStoreType maps Haystack's store type names to toolcas's.
func canonicalStoreType(name string) string {
	if strings.HasPrefix(name, "haystack.") && strings.HasSuffix(name, ".FileSystemToolResultStore") {
		return TypeDirStore
	}
	return name
}

// registeredBy says, for a toolcas type that no loader is registered for,
// which package registers it: a program that imports only hook knows only
// hook's own stores.
func registeredBy(typeName string) string {
	pkg, _, ok := strings.Cut(strings.TrimPrefix(typeName, "toolcas."), ".")
	if !strings.HasPrefix(typeName, "toolcas.") || !ok || pkg == "hook" || pkg == "" {
		return ""
	}
	return fmt.Sprintf("; the package %s registers the toolcas.%s types when it is imported: add import _ \"github.com/toolcas/toolcas/%s\"", pkg, pkg, pkg)
}

func isHaystackHook(name string) bool {
	return strings.HasPrefix(name, "haystack.") && strings.HasSuffix(name, ".ToolResultOffloadHook")
}

type hookParams struct {
	Store        json.RawMessage    `json:"store"`
	Strategies   *policy.Strategies `json:"offload_strategies"`
	PreviewChars *int               `json:"preview_chars"`
	ReadTool     string             `json:"read_tool,omitempty"`
	StepBudget   *stepBudgetParams  `json:"step_budget,omitempty"`
	// ShortPointers is WithShortPointers.
	ShortPointers bool `json:"short_pointers,omitempty"`
}

// stepBudgetParams configure WithStepBudget: {"max_tokens": N, "counter":
// NAME}, NAME one of tokens.ByName's (default "approximate").
type stepBudgetParams struct {
	MaxTokens int    `json:"max_tokens"`
	Counter   string `json:"counter,omitempty"`
}

// MarshalJSON saves the hook, its store and its strategies in Haystack's
// {"type", "init_parameters"} shape.
func (h *Hook) MarshalJSON() ([]byte, error) {
	store, err := MarshalStore(h.store)
	if err != nil {
		return nil, err
	}
	n := h.previewChars
	p := hookParams{Store: store, Strategies: h.strategies, PreviewChars: &n}
	if h.readTool != ReadToolName {
		p.ReadTool = h.readTool
	}
	if b := h.budget; b != nil {
		name, err := tokens.NameOf(b.Counter)
		if err != nil {
			return nil, fmt.Errorf("step budget: %w", err)
		}
		p.StepBudget = &stepBudgetParams{MaxTokens: b.MaxTokens, Counter: name}
	}
	p.ShortPointers = h.short
	params, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return json.Marshal(policy.Typed{Type: TypeHook, InitParameters: params})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Load builds a hook from configuration saved by MarshalJSON or by
// Haystack's to_dict. Store types must be registered (see RegisterStore);
// import the package defining a store to register it.
func Load(data []byte, opts ...Option) (*Hook, error) {
	var t policy.Typed
	if err := strictjson.Decode(data, &t); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if t.Type != TypeHook && !isHaystackHook(t.Type) {
		return nil, fmt.Errorf("load: unknown hook type %q", t.Type)
	}
	var p hookParams
	if err := strictjson.Decode(t.InitParameters, &p); err != nil {
		return nil, fmt.Errorf("load %s: %w", t.Type, err)
	}
	if p.Strategies == nil {
		return nil, fmt.Errorf("load %s: no offload_strategies", t.Type)
	}
	if err := checkStrategies(p.Strategies); err != nil {
		return nil, fmt.Errorf("load %s: %w", t.Type, err)
	}
	if p.PreviewChars != nil {
		opts = append([]Option{WithPreviewChars(*p.PreviewChars)}, opts...)
	}
	if p.ReadTool != "" {
		opts = append([]Option{WithReadToolName(p.ReadTool)}, opts...)
	}
	if p.ShortPointers {
		opts = append([]Option{WithShortPointers()}, opts...)
	}
	if b := p.StepBudget; b != nil {
		c, err := tokens.ByName(cmp.Or(b.Counter, tokens.ApproximateName))
		if err != nil {
			return nil, fmt.Errorf("load %s: step_budget: %w", t.Type, err)
		}
		opts = append([]Option{WithStepBudget(b.MaxTokens, c)}, opts...)
	}
	// Everything but the store is checked before the store is opened, so
	// that a bad configuration creates nothing.
	h, err := New(nil, p.Strategies, opts...)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", t.Type, err)
	}
	store, err := LoadStore(p.Store)
	if err != nil {
		return nil, err
	}
	h.store, h.opened = store, store != nil
	return h, nil
}

// MarshalStore saves a store as a hook's configuration holds it:
// {"type", "init_parameters"} for a ConfigurableStore, null for a nil
// store; any other store is an error.
func MarshalStore(s Store) (json.RawMessage, error) {
	if s == nil {
		return json.RawMessage("null"), nil
	}
	cs, ok := s.(ConfigurableStore)
	if !ok {
		return nil, fmt.Errorf("a %s cannot be saved as configuration", storeName(s))
	}
	typ, params := cs.StoreConfig()
	return json.Marshal(policy.Typed{Type: typ, InitParameters: mustJSON(params)})
}

// LoadStore opens the store that configuration saved by MarshalStore (or
// Haystack's, for its FileSystemToolResultStore) describes, through the
// loaders registered with RegisterStore; empty data or null is no store
// (nil, nil). The caller closes what it opened.
func LoadStore(data json.RawMessage) (Store, error) {
	if len(bytes.TrimSpace(data)) == 0 || string(bytes.TrimSpace(data)) == "null" {
		return nil, nil
	}
	var st policy.Typed
	if err := strictjson.Decode(data, &st); err != nil {
		return nil, fmt.Errorf("load store: %w", err)
	}
	loadersMu.RLock()
	load := loaders[canonicalStoreType(st.Type)]
	loadersMu.RUnlock()
	if load == nil {
		return nil, fmt.Errorf("load: unknown store type %q (known: %s)%s", st.Type, strings.Join(knownStores(), ", "), registeredBy(st.Type))
	}
	params := st.InitParameters
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	s, err := load(params)
	if err != nil {
		return nil, fmt.Errorf("load store: %w", err)
	}
	return s, nil
}

// Close closes the store that Load opened for the hook, if that store has
// a Close method; a hook made by New leaves its store to whoever made it,
// and Close does nothing.
func (h *Hook) Close() error {
	if !h.opened {
		return nil
	}
	h.opened = false
	if c, ok := h.store.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// checkStrategies refuses what no hook should run with: a negative
// threshold, a tool name no store would keep.
func checkStrategies(s *policy.Strategies) error {
	for _, e := range s.Entries() {
		for _, name := range e.Tools {
			if name == "" || len(name) > MaxToolNameBytes {
				return fmt.Errorf("offload_strategies: tool name of %d bytes (want 1 to %d): %q", len(name), MaxToolNameBytes, clip(name))
			}
		}
		if n, ok := policy.Base(e.Policy).(policy.OverChars); ok && n < 0 {
			return fmt.Errorf("offload_strategies: %q: threshold %d is negative", clip(e.Tools[0]), int(n))
		}
	}
	return nil
}

func knownStores() []string {
	loadersMu.RLock()
	defer loadersMu.RUnlock()
	var names []string
	for n := range loaders {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
