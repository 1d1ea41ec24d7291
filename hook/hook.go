// Package hook offloads the large results of an agent's tool calls to a
// store and leaves a short pointer in the conversation, keeping the
// behaviour of Haystack's ToolResultOffloadHook point by point.
//
// The hook takes the block of tool results of one step, asks a policy per
// tool whether each result should go, writes every part of those that
// should to the Store (in one batch), and returns the block rewritten: each
// offloaded result becomes a pointer saying what was stored, how big it is,
// a preview, the part's logical key and its path. The hook keeps no mutable
// state: one Hook serves any number of concurrent runs.
//
// Start at New, with a store from store.Open (or MemStore, DirStore) and a
// policy.Strategies; call Offload with each step's tool results. NewReadTool
// gives the agent its read-back tool; Load builds a Hook from a Haystack-style
// JSON configuration.
package hook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/tokens"
)

// Hook rewrites a step's tool results, offloading those its strategies pick.
type Hook struct {
	store Store
	// opened is set when Load opened the store, which Close then closes.
	opened       bool
	strategies   *policy.Strategies
	previewChars int
	readTool     string
	log          *slog.Logger
	budget       *StepBudget
	short        bool
}

// An Option configures New or NewReadTool. An option that one of them has
// no use for is an error there.
type Option func(*settings) error

// settings are what the options say, for a hook or for a read tool.
type settings struct {
	// forReadTool is set for NewReadTool.
	forReadTool  bool
	previewChars int
	readTool     string
	log          *slog.Logger
	maxBytes     int
	timeout      time.Duration
	budget       *StepBudget
	short        bool
}

// apply applies opts to s.
func (s *settings) apply(opts []Option) error {
	for _, o := range opts {
		if err := o(s); err != nil {
			return err
		}
	}
	return nil
}

// only is the error of an option that only the hook (readTool false) or
// only the read tool configures, given to the other.
func (s *settings) only(name string, readTool bool) error {
	switch {
	case readTool && !s.forReadTool:
		return fmt.Errorf("%s configures NewReadTool, not New", name)
	case !readTool && s.forReadTool:
		return fmt.Errorf("%s configures New, not NewReadTool", name)
	}
	return nil
}

// MaxPreviewChars is the longest preview a pointer may show.
const MaxPreviewChars = 100_000

// WithPreviewChars sets how many code points of a text part the pointer
// shows (default 200).
func WithPreviewChars(n int) Option {
	return func(s *settings) error {
		if n < 0 || n > MaxPreviewChars {
			return fmt.Errorf("preview of %d characters, want 0 to %d", n, MaxPreviewChars)
		}
		s.previewChars = n
		return s.only("WithPreviewChars", false)
	}
}

// WithReadToolName sets the name of the read-back tool (default
// ReadToolName): the name NewReadTool registers it under, and the name
// whose results the hook never offloads. Give both the same.
func WithReadToolName(name string) Option {
	return func(s *settings) error {
		if name == "" || len(name) > MaxToolNameBytes {
			return fmt.Errorf("read tool name of %d bytes, want 1 to %d", len(name), MaxToolNameBytes)
		}
		s.readTool = name
		return nil
	}
}

// WithLogger sets where the hook's warnings go (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) error {
		if l == nil {
			return errors.New("nil logger")
		}
		s.log = l
		return s.only("WithLogger", false)
	}
}

// WithStepBudget bounds what one step's results may take in context
// together: when the results the policies leave in context come to more
// than maxTokens, as counter counts them (policy.SubjectTokens;
// tokens.Approximate{} when nil), the largest are offloaded too, whatever
// their tools' policies say, until the rest fit. Results the hook never
// offloads (errors, pointers, the read tool's) count but stay.
func WithStepBudget(maxTokens int, counter tokens.Counter) Option {
	return func(s *settings) error {
		if maxTokens < 1 {
			return fmt.Errorf("step budget of %d tokens: want at least 1", maxTokens)
		}
		if counter == nil {
			counter = tokens.Approximate{}
		}
		s.budget = &StepBudget{MaxTokens: maxTokens, Counter: counter}
		return s.only("WithStepBudget", false)
	}
}

// WithShortPointers makes the hook's pointers name each part's size and key
// only (ShortPointer): no path, no preview. For a compactor's offloading of
// results the model has already read; the hook's own pointers, which stand
// for results the model has not seen, are best left with their preview.
func WithShortPointers() Option {
	return func(s *settings) error {
		s.short = true
		return s.only("WithShortPointers", false)
	}
}

// New returns a hook writing to store, offloading what strategies pick. The
// store may be nil if every run brings its own through WithStore.
func New(store Store, strategies *policy.Strategies, opts ...Option) (*Hook, error) {
	if strategies == nil {
		return nil, errors.New("no strategies: give at least one policy (policy.Default(policy.OverChars(8000)), say)")
	}
	st := settings{previewChars: DefaultPreviewChars, readTool: ReadToolName, log: slog.Default()}
	if err := st.apply(opts); err != nil {
		return nil, err
	}
	return &Hook{store: store, strategies: strategies, previewChars: st.previewChars, readTool: st.readTool, log: st.log, budget: st.budget, short: st.short}, nil
}

// Step identifies the step whose results are offloaded.
type Step struct {
	// Run names the agent run; empty means DefaultRun.
	Run string
	// Number is the step's number in the run.
	Number int
	// State is the run's live state, which the framework adapter fills and
	// policies see (policy.Subject.State); nil when there is none.
	State policy.State
	// TTL, when set, asks the store to remove the whole run once it has not
	// been written to for that long, whatever the store's retention policy,
	// or with none (never within the policy's active window). The latest TTL
	// a step of the run gives is the run's; 0 leaves it as it is. A store
	// without retention (DirStore) ignores it.
	TTL time.Duration
}

// Offload returns the step's block of tool results with every result its
// policy picks replaced by a pointer. results is not modified. On error
// nothing is rewritten and the results stay as they were in the caller's
// hands.
func (h *Hook) Offload(ctx context.Context, step Step, results []Result) ([]Result, error) {
	return h.offload(ctx, step, results, func(store Store) ([]bool, []*policy.Subject) {
		return h.picks(store, step, results)
	})
}

// picks returns which of a step's results the hook offloads: Haystack's
// rules in Haystack's order, then the tool's policy; then, under a step
// budget, the largest of the others until what stays fits it. counted
// holds, for a result its policy picked, the subject the policy saw, whose
// parts' sizes need not be counted again; nil where there was none.
func (h *Hook) picks(store Store, step Step, results []Result) (picked []bool, counted []*policy.Subject) {
	picked = make([]bool, len(results))
	var eligible []bool
	if h.budget != nil {
		eligible = make([]bool, len(results))
	}
	for i, r := range results {
		if r.Tool == h.readTool || r.Error || IsPointer(r) {
			continue
		}
		pol, ok := h.strategies.For(r.Tool)
		if !ok && h.budget == nil || !h.eligible(store, r) {
			continue
		}
		if eligible != nil {
			eligible[i] = true
		}
		if !ok {
			continue
		}
		if s := subject(step, r); pol.ShouldOffload(s) {
			picked[i] = true
			if counted == nil {
				counted = make([]*policy.Subject, len(results))
			}
			counted[i] = s
		}
	}
	if h.budget != nil {
		h.budget.pick(step, results, eligible, picked)
	}
	return picked, counted
}

// OffloadPicked offloads the results at the positions picked of a step's
// block, whatever the strategies say: for a caller that has decided already,
// such as a compactor under context pressure. Every other rule still holds:
// errors, pointers, the read tool's results, empty results, and binary
// content for a text-only store stay as they are. Keys are as Offload makes
// them, the position in the block standing in for a missing call id.
func (h *Hook) OffloadPicked(ctx context.Context, step Step, results []Result, picked ...int) ([]Result, error) {
	for _, i := range picked {
		if i < 0 || i >= len(results) {
			return nil, fmt.Errorf("picked result %d of a block of %d", i, len(results))
		}
	}
	return h.offload(ctx, step, results, func(store Store) ([]bool, []*policy.Subject) {
		out := make([]bool, len(results))
		for i, r := range results {
			out[i] = slices.Contains(picked, i) && h.eligible(store, r)
		}
		return out, nil
	})
}

// offload rewrites the results picks selects in the store the step
// writes to.
func (h *Hook) offload(ctx context.Context, step Step, results []Result, picks func(store Store) ([]bool, []*policy.Subject)) ([]Result, error) {
	if step.Run == "" {
		step.Run = DefaultRun
	}
	if err := CheckRun(step.Run); err != nil {
		return nil, err
	}
	if step.Number < 0 || step.Number > MaxStep {
		return nil, fmt.Errorf("step %d out of range 0..%d", step.Number, MaxStep)
	}
	store := StoreFrom(ctx)
	if store == nil {
		store = h.store
	}
	out := make([]Result, len(results))
	copy(out, results)
	type job struct {
		result int
		first  int // index of its first item
	}
	var (
		jobs  []job
		items []Item
	)
	picked, counted := picks(store)
	for i, r := range results {
		if !picked[i] {
			continue
		}
		if store == nil {
			return nil, errors.New("no store: build the hook with one or pass one with WithStore")
		}
		single := len(r.Parts) == 1
		var mine []Item
		var bad error
		for pos, p := range r.Parts {
			k := Key{Run: step.Run, Step: step.Number, Tool: r.Tool, CallID: r.CallID, Index: i, Part: pos, Ext: ChooseExt(p)}
			if single {
				k.Part = -1
			}
			if err := k.Check(); err != nil && bad == nil {
				bad = err
			}
			mine = append(mine, Item{Key: k, Part: p, RunTTL: step.TTL, Chars: countedChars(counted, i, pos, p)})
		}
		if bad != nil {
			// One result the store cannot key stays in context; the others
			// of the step are offloaded.
			h.log.Warn(fmt.Sprintf("Tool '%s' produced a result that cannot be offloaded: %v; leaving the result in context.", clip(r.Tool), bad), "tool", clip(r.Tool))
			continue
		}
		jobs = append(jobs, job{result: i, first: len(items)})
		items = append(items, mine...)
	}
	if len(items) == 0 {
		return out, nil
	}
	stored, err := store.Write(ctx, items)
	if err != nil {
		return nil, fmt.Errorf("offload step %d of run %s: %w", step.Number, step.Run, err)
	}
	if len(stored) != len(items) {
		return nil, fmt.Errorf("store %s returned %d results for %d parts", storeName(store), len(stored), len(items))
	}
	for _, j := range jobs {
		r := results[j.result]
		n := len(r.Parts)
		got := stored[j.first : j.first+n]
		refs := make([]Reference, n)
		for k, s := range got {
			refs[k] = Reference{Key: s.Key, Path: s.Path, Digest: s.Digest.String()}
		}
		c := r.clone()
		infos := make([]PartInfo, n)
		mode := h.previewMode(r.Tool)
		for k, p := range r.Parts {
			infos[k] = infoOf(p, items[j.first+k].Chars)
			infos[k].Preview = mode
		}
		if h.short {
			c.Parts = []Part{Text(ShortPointer(infos, got))}
		} else {
			c.Parts = []Part{Text(Pointer(infos, got, h.previewChars))}
		}
		if c.Meta == nil {
			c.Meta = map[string]any{}
		}
		c.Meta[MetaKey] = refs
		out[j.result] = c
	}
	return out, nil
}

// previewMode returns how pointers preview a tool's text: the mode of its
// policy (policy.PreviewHead for a tool without one, which only
// OffloadPicked offloads).
func (h *Hook) previewMode(tool string) policy.PreviewMode {
	p, _ := h.strategies.For(tool)
	return policy.PreviewOf(p)
}

// eligible applies every rule but the policy: a result that is an error, a
// pointer, the read tool's, empty, or binary for a store that takes text
// only stays in context.
func (h *Hook) eligible(store Store, r Result) bool {
	if r.Tool == h.readTool || r.Error || IsPointer(r) {
		return false
	}
	empty := true
	binary := false
	for _, p := range r.Parts {
		if p.Kind != KindText || p.Text != "" || p.Source != nil && p.Source.Size > 0 {
			empty = false
		}
		if p.Kind != KindText {
			binary = true
		}
	}
	if empty {
		return false
	}
	if binary && (store == nil || !store.AcceptsBinary()) {
		h.log.Warn(fmt.Sprintf("Tool '%s' produced a result with image or file content, but %s does not support binary content; leaving the result in context.",
			r.Tool, storeName(store)), "tool", r.Tool)
		return false
	}
	if err := checkOrigin(r); err != nil {
		h.log.Warn(fmt.Sprintf("Tool '%s' produced a result that cannot be offloaded: %v; leaving the result in context.", clip(r.Tool), err), "tool", clip(r.Tool))
		return false
	}
	if err := checkParts(r.Parts); err != nil {
		h.log.Warn(fmt.Sprintf("Tool '%s' produced a result that cannot be offloaded: %v; leaving the result in context.", r.Tool, err), "tool", r.Tool)
		return false
	}
	return true
}

// Limits on a result's origin, as the index keeps them: longer names are
// refused (the result stays in context) rather than stored.
const (
	MaxToolNameBytes = 64 << 10
	MaxCallIDBytes   = 64 << 10
	// MaxMIMEBytes and MaxFilenameBytes bound a part's MIME type and file
	// name: no real one comes near, and a store's columns take no more.
	MaxMIMEBytes     = 1 << 10
	MaxFilenameBytes = 4 << 10
)

// checkOrigin refuses a result whose tool name or call ID no store should
// keep, so that one odd result does not fail the whole step.
func checkOrigin(r Result) error {
	switch {
	case len(r.Tool) > MaxToolNameBytes:
		return fmt.Errorf("tool name of %d bytes, more than %d", len(r.Tool), MaxToolNameBytes)
	case len(r.CallID) > MaxCallIDBytes:
		return fmt.Errorf("call ID of %d bytes, more than %d", len(r.CallID), MaxCallIDBytes)
	}
	return nil
}

// checkParts refuses parts no store should take.
func checkParts(parts []Part) error {
	if len(parts) > MaxPart+1 {
		return fmt.Errorf("%d parts, more than %d", len(parts), MaxPart+1)
	}
	for i, p := range parts {
		switch p.Kind {
		case KindText, KindImage, KindFile:
		default:
			return fmt.Errorf("part %d has unknown kind %q", i, p.Kind)
		}
		switch {
		case len(p.MIME) > MaxMIMEBytes:
			return fmt.Errorf("part %d has a MIME type of %d bytes, more than %d", i, len(p.MIME), MaxMIMEBytes)
		case len(p.Filename) > MaxFilenameBytes:
			return fmt.Errorf("part %d has a file name of %d bytes, more than %d", i, len(p.Filename), MaxFilenameBytes)
		}
		if p.MIME != "" {
			if _, _, err := mime.ParseMediaType(p.MIME); err != nil || strings.ContainsAny(p.MIME, "\r\n") {
				return fmt.Errorf("part %d has an invalid MIME type %q", i, clip(p.MIME))
			}
		}
		if strings.ContainsAny(p.Filename, "\x00\r\n") {
			return fmt.Errorf("part %d has a file name with a NUL or a line break: %q", i, clip(p.Filename))
		}
	}
	return nil
}

// subject describes a result to its policy.
func subject(step Step, r Result) *policy.Subject {
	parts := make([]policy.Part, len(r.Parts))
	for i, p := range r.Parts {
		pp := policy.Part{Kind: string(p.Kind), MIME: p.MIME, Filename: p.Filename}
		switch {
		case p.Source != nil:
			pp.Size = int(p.Source.Chars)
		case p.Kind == KindText:
			pp.Size = policy.TextSize(p.Text)
		default:
			pp.Size = policy.BinarySize(len(p.Data))
		}
		parts[i] = pp
	}
	s := policy.NewSubject(r.Tool, step.Run, step.Number, parts, func() string { return payload(r.Parts) })
	s.State = step.State
	return s
}

// countedChars returns the code points of result i's text part pos as its
// policy's subject counted them, or 0 when it was not counted (a store then
// counts them itself).
func countedChars(counted []*policy.Subject, i, pos int, p Part) int {
	if counted == nil || counted[i] == nil || p.Kind != KindText || p.Source != nil || pos >= len(counted[i].Parts) {
		return 0
	}
	return counted[i].Parts[pos].Size
}

// payload is the result as Haystack's policies see it: every part's text or
// base64 payload, concatenated. A part with a Source is read whole: a policy
// that asks for the content of a result too large to hold gets it, at that
// cost; one that asks for its size only (OverChars) reads nothing.
func payload(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Source != nil {
			data, err := readAll(p)
			if err == nil && p.Kind == KindText {
				b.Write(data)
			} else if err == nil {
				b.WriteString(encodeBase64(data))
			}
			continue
		}
		if p.Kind == KindText {
			b.WriteString(p.Text)
		} else {
			b.WriteString(encodeBase64(p.Data))
		}
	}
	return b.String()
}

// storeName is the store's name in messages: its type without package or
// pointer, as Haystack prints type(store).__name__.
func storeName(s Store) string {
	if s == nil {
		return "no store"
	}
	if n, ok := s.(interface{ Name() string }); ok {
		return n.Name()
	}
	t := reflect.TypeOf(s)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}
