package compact

import (
	"context"
	"strings"

	"github.com/toolcas/toolcas/hook"
)

// DefaultPlaceholder is what ToolResultPruning leaves in place of a result,
// Haystack's text; {tool_name} is replaced by the tool's name.
const DefaultPlaceholder = "[Tool result removed to free up context. Call `{tool_name}` again if you need it.]"

// ToolResultPruning replaces old tool results with a placeholder, keeping
// the conversation's shape: Haystack's ToolResultPruningCompactor. The
// rewritten result keeps its tool, call id and error flag, and records
// {"strategy": "tool_result_pruning", "original_tokens": N} under MetaKey.
// The content is gone; use Offloading to keep it.
type ToolResultPruning struct {
	opts        Options
	placeholder string
}

var _ Compactor = (*ToolResultPruning)(nil)

// NewToolResultPruning returns a pruning compactor. placeholder "" means
// DefaultPlaceholder.
func NewToolResultPruning(o Options, placeholder string) (*ToolResultPruning, error) {
	o, err := o.check()
	if err != nil {
		return nil, err
	}
	if placeholder == "" {
		placeholder = DefaultPlaceholder
	}
	return &ToolResultPruning{opts: o, placeholder: placeholder}, nil
}

// Compact implements Compactor.
func (p *ToolResultPruning) Compact(ctx context.Context, msgs []Message, target int, counter TokenCounter) ([]Message, bool, error) {
	if counter == nil {
		counter = Approximate()
	}
	return run(ctx, p.opts, msgs, target, counter, false, func(_ context.Context, _ int, m Message, original int) (Message, int, bool, error) {
		r := withRecord(*m.Result, StrategyPruning, original)
		// Replace, not format: a custom placeholder may hold other braces.
		r.Parts = []hook.Part{hook.Text(strings.ReplaceAll(p.placeholder, "{tool_name}", r.Tool))}
		nm := m
		nm.Result = &r
		return nm, original - counter.Count([]Message{nm}), true, nil
	})
}
