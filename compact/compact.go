// Package compact shortens a long agent conversation before each model call
// by rewriting old tool results in place, so that every tool call keeps its
// result: ToolResultPruning replaces them with a placeholder, as Haystack's
// ToolResultPruningCompactor does, and Offloading writes them to a
// hook.Store and leaves a pointer, so that nothing is lost. Both work on
// []Message, which adapters map to and from their framework's messages.
//
// Start at Offloading (with the store from store.Open that the hook uses) or
// ToolResultPruning, and call Compact before each model call.
package compact

import (
	"context"
	"fmt"
	"maps"

	"github.com/toolcas/toolcas/hook"
)

// MetaKey is the metadata key under which a compactor records what it did
// to a message, as Haystack's compaction hooks do: a Record. A message
// carrying it is never compacted again.
const MetaKey = "context_compaction"

// Record is what a compactor stores under MetaKey.
type Record struct {
	// Strategy names the compactor: StrategyPruning or StrategyOffloading.
	Strategy string `json:"strategy"`
	// OriginalTokens is what the message counted before it was rewritten.
	OriginalTokens int `json:"original_tokens"`
}

// The strategies a Record names.
const (
	StrategyPruning    = "tool_result_pruning"
	StrategyOffloading = "tool_result_offloading"
)

// Role is who wrote a message.
type Role string

// The roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolCall is a call an assistant message makes.
type ToolCall struct {
	Tool      string
	ID        string
	Arguments string
}

// Message is one message of a conversation. A tool message holds its
// result in Result, whose Meta is the message's metadata; other messages
// hold Text, ToolCalls and Meta.
type Message struct {
	Role      Role
	Text      string
	ToolCalls []ToolCall
	Result    *hook.Result
	Meta      map[string]any
	// Step is the agent step the message belongs to, numbered as the
	// adapter numbers steps for the hook (hook.Step.Number); Offloading
	// names what it stores by it. When every message's Step is 0, steps
	// are numbered from the conversation: the n-th assistant message
	// starts step n.
	Step int
}

// IsToolResult reports whether m is a tool message with a result.
func (m Message) IsToolResult() bool { return m.Role == RoleTool && m.Result != nil }

// meta returns the message's metadata: the result's for a tool message.
func (m Message) meta() map[string]any {
	if m.Result != nil {
		return m.Result.Meta
	}
	return m.Meta
}

// A Compactor shortens a conversation towards a target size.
type Compactor interface {
	// Compact returns the conversation rewritten to come under target
	// tokens as counted by counter, or changed false (and msgs) when
	// nothing was rewritten. msgs is never modified.
	Compact(ctx context.Context, msgs []Message, target int, counter TokenCounter) (out []Message, changed bool, err error)
}

// Options are the rules both compactors share.
type Options struct {
	// MinKeepSteps is how many of the latest tool-calling steps keep their
	// results untouched, even when the target cannot be reached otherwise.
	// It must be at least 1 (default 1): the model has not acted on the
	// latest results yet.
	MinKeepSteps int
	// MinTokens leaves alone results of at most this many tokens (default
	// 200): small results cost little and are often the ones worth keeping.
	// Set NoMinTokens to consider every result.
	MinTokens   int
	NoMinTokens bool
	// SkipMetaKeys leaves alone results whose metadata holds any of these
	// keys, whatever their values. Pointers (hook.MetaKey) and results a
	// compactor rewrote (MetaKey) are always left alone.
	SkipMetaKeys []string
}

func (o Options) check() (Options, error) {
	if o.MinKeepSteps == 0 {
		o.MinKeepSteps = 1
	}
	if o.MinKeepSteps < 1 {
		return o, fmt.Errorf("compact: MinKeepSteps %d: want at least 1, the latest step's results are still needed", o.MinKeepSteps)
	}
	if o.MinTokens < 0 {
		return o, fmt.Errorf("compact: MinTokens %d: want 0 or more", o.MinTokens)
	}
	if o.MinTokens == 0 && !o.NoMinTokens {
		o.MinTokens = 200
	}
	if o.NoMinTokens {
		o.MinTokens = 0
	}
	return o, nil
}

// skip reports whether a result is never compacted: a pointer (unless the
// compactor shortens pointers), a message a compactor rewrote, or one
// carrying a skip key.
func (o Options) skip(m Message, pointers bool) bool {
	meta := m.meta()
	if hook.IsPointer(*m.Result) && !pointers {
		return true
	}
	if _, ok := meta[MetaKey]; ok {
		return true
	}
	for _, k := range o.SkipMetaKeys {
		if _, ok := meta[k]; ok {
			return true
		}
	}
	return false
}

// span is one agent step: an assistant message and the tool results right
// after it.
type span struct{ start, end int } // messages[start:end], start the assistant's

// steps returns the agent steps that have tool results, oldest first.
func steps(msgs []Message) []span {
	var out []span
	for i := 0; i < len(msgs); {
		if msgs[i].Role != RoleAssistant {
			i++
			continue
		}
		j := i + 1
		for j < len(msgs) && msgs[j].Role == RoleTool {
			j++
		}
		if j > i+1 {
			out = append(out, span{i, j})
		}
		i = j
	}
	return out
}

// protected returns the positions of the results of the latest keep steps.
func protected(spans []span, keep int) map[int]bool {
	p := map[int]bool{}
	for _, s := range spans[max(0, len(spans)-keep):] {
		for i := s.start + 1; i < s.end; i++ {
			p[i] = true
		}
	}
	return p
}

// rewrite is how one compactor rewrites one candidate: the new message and
// the tokens it saves, or ok false to leave it.
type rewrite func(ctx context.Context, i int, m Message, original int) (Message, int, bool, error)

// run is the loop both compactors share, as Haystack's: measure once, then
// rewrite candidates oldest first, keeping a running total from per-message
// deltas, until the conversation is under target. With pointers, the
// hook's pointers are candidates too.
func run(ctx context.Context, o Options, msgs []Message, target int, counter TokenCounter, pointers bool, f rewrite) ([]Message, bool, error) {
	if counter == nil {
		counter = Approximate()
	}
	current := counter.Count(msgs)
	if current <= target {
		return msgs, false, nil
	}
	keep := protected(steps(msgs), o.MinKeepSteps)
	out := make([]Message, len(msgs))
	copy(out, msgs)
	changed := false
	for i, m := range msgs {
		if !m.IsToolResult() || keep[i] || o.skip(m, pointers) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		original := counter.Count([]Message{m})
		if original <= o.MinTokens {
			continue
		}
		nm, saved, ok, err := f(ctx, i, m, original)
		if err != nil {
			return nil, false, err
		}
		if !ok || saved <= 0 {
			continue
		}
		out[i] = nm
		current -= saved
		changed = true
		if current <= target {
			break
		}
	}
	if !changed {
		return msgs, false, nil
	}
	return out, true, nil
}

// withRecord returns a copy of r whose metadata records the compaction.
func withRecord(r hook.Result, strategy string, original int) hook.Result {
	c := r
	c.Parts = append([]hook.Part(nil), r.Parts...)
	c.Meta = maps.Clone(r.Meta)
	if c.Meta == nil {
		c.Meta = map[string]any{}
	}
	c.Meta[MetaKey] = Record{Strategy: strategy, OriginalTokens: original}
	return c
}
