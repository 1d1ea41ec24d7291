package compact

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Trigger decides, before each model call, whether the conversation fills
// too much of the model's context window, and if so has its Compactor
// bring it down: Haystack's CompactionHook. Compaction starts once the
// conversation reaches CompactAt of the window and aims at CompactTo of it.
//
// The size is anchored on the model's own count of the previous request
// and its reply (the context tokens a chat API reports), which already
// covers the system prompt, tool schemas and chat-template overhead; only
// the messages after the last assistant message are counted by Counter.
// With no such count (0), the whole conversation is counted.
type Trigger struct {
	compactor     Compactor
	contextWindow int
	compactAt     float64
	compactTo     float64
	counter       TokenCounter
}

// Haystack's defaults for a Trigger.
const (
	DefaultCompactAt = 0.7
	DefaultCompactTo = 0.4
)

// ErrTrigger is wrapped by the errors NewTrigger returns for parameters
// that make no sense.
var ErrTrigger = errors.New("compact: trigger")

// TriggerOption configures a Trigger.
type TriggerOption func(*Trigger)

// CompactAt sets the share of the window at which compaction starts
// (default 0.7).
func CompactAt(f float64) TriggerOption { return func(t *Trigger) { t.compactAt = f } }

// CompactTo sets the share of the window compaction aims at (default 0.4).
func CompactTo(f float64) TriggerOption { return func(t *Trigger) { t.compactTo = f } }

// WithCounter sets the counter of the messages the model has not counted
// yet (default Approximate()).
func WithCounter(c TokenCounter) TriggerOption { return func(t *Trigger) { t.counter = c } }

// NewTrigger returns a trigger for a model whose context window holds
// contextWindow tokens. It wants a compactor, a positive window, and
// 0 < CompactTo < CompactAt <= 1: a target at or above the trigger would
// leave the conversation over it after compacting, and compact it again
// at every step.
func NewTrigger(c Compactor, contextWindow int, opts ...TriggerOption) (*Trigger, error) {
	t := &Trigger{compactor: c, contextWindow: contextWindow, compactAt: DefaultCompactAt, compactTo: DefaultCompactTo}
	for _, o := range opts {
		o(t)
	}
	if c == nil {
		return nil, fmt.Errorf("%w: no compactor", ErrTrigger)
	}
	if contextWindow < 1 {
		return nil, fmt.Errorf("%w: context_window must be a positive number of tokens, got %d", ErrTrigger, contextWindow)
	}
	if !(0 < t.compactTo && t.compactTo < t.compactAt && t.compactAt <= 1) {
		return nil, fmt.Errorf("%w: compact_at and compact_to must satisfy 0 < compact_to < compact_at <= 1, got compact_at=%v and compact_to=%v", ErrTrigger, t.compactAt, t.compactTo)
	}
	if t.counter == nil {
		t.counter = Approximate()
	}
	return t, nil
}

// Close closes what loading the trigger opened: the store of an Offloading
// compactor LoadTrigger built (see Offloading.Close). It does nothing for a
// compactor without a Close method.
func (t *Trigger) Close() error {
	if c, ok := t.compactor.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Compactor returns the trigger's compactor.
func (t *Trigger) Compactor() Compactor { return t.compactor }

// ContextWindow returns the model's context window, in tokens.
func (t *Trigger) ContextWindow() int { return t.contextWindow }

// CompactAt returns the share of the window at which compaction starts.
func (t *Trigger) CompactAt() float64 { return t.compactAt }

// CompactTo returns the share of the window compaction aims at.
func (t *Trigger) CompactTo() float64 { return t.compactTo }

// Counter returns the trigger's counter.
func (t *Trigger) Counter() TokenCounter { return t.counter }

// Estimate returns the size of the conversation in tokens: contextTokens,
// the model's own count of the previous call, plus the messages after the
// last assistant message; or, when contextTokens is 0, the whole
// conversation as the counter counts it.
func (t *Trigger) Estimate(msgs []Message, contextTokens int) int {
	if contextTokens == 0 {
		return t.counter.Count(msgs)
	}
	return contextTokens + t.counter.Count(msgs[lastAssistant(msgs)+1:])
}

// Before runs the trigger before a model call on the conversation msgs,
// with contextTokens the model's count of its previous request and reply
// (0 when the model reports none). It returns the conversation to send,
// changed or not, and the context tokens to carry on: after a compaction,
// the compacted conversation through its last assistant message counted
// plus the overhead the estimate implied, so that a later estimate stays
// anchored; unchanged otherwise, and 0 stays 0. msgs is never modified.
func (t *Trigger) Before(ctx context.Context, msgs []Message, contextTokens int) (out []Message, newContextTokens int, compacted bool, err error) {
	estimated := t.Estimate(msgs, contextTokens)
	if float64(estimated) < float64(t.contextWindow)*t.compactAt {
		return msgs, contextTokens, false, nil
	}
	// What the estimate holds beyond the messages: tool schemas, the
	// chat template. A counter that overcounts makes it negative, which
	// then raises the target, as Haystack's does.
	overhead := estimated - t.counter.Count(msgs)
	target := max(int(float64(t.contextWindow)*t.compactTo)-overhead, 0)
	out, changed, err := t.compactor.Compact(ctx, msgs, target, t.counter)
	if err != nil || !changed {
		return msgs, contextTokens, false, err
	}
	if contextTokens != 0 {
		contextTokens = t.counter.Count(out[:lastAssistant(out)+1]) + overhead
	}
	return out, contextTokens, true, nil
}

// lastAssistant returns the position of the last assistant message, or -1.
func lastAssistant(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant {
			return i
		}
	}
	return -1
}
