package compact

import (
	"context"
	"fmt"
	"io"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// Offloading writes old tool results to a store and leaves a pointer in
// their place, so that the conversation shrinks and nothing is lost: the
// agent reads a result back through the read tool or any file tool. It
// goes beyond Haystack's pruning compactor. Results are stored under the
// keys the hook would have given them in their step, in the run the
// compactor is built for (or the store passed with hook.WithStore); the
// pointer records {"strategy": "tool_result_offloading",
// "original_tokens": N} under MetaKey besides the hook's references.
//
// With short pointers (hook.WithShortPointers among its hook options), it
// also shortens the pointers the hook left for results the model has read
// (hook.Hook.Shorten): their preview gives way to size and key, nothing is
// written, and their references stay as they were. A pointer whose parts
// its store does not hold in its run is left as it is.
type Offloading struct {
	opts Options
	run  string
	hook *hook.Hook
	// opened is the store LoadTrigger opened for it, which Close closes.
	opened io.Closer
}

var _ Compactor = (*Offloading)(nil)

// NewOffloading returns an offloading compactor writing to store for run
// ("" means hook.DefaultRun). hookOpts configure the pointers (preview
// length, logger).
func NewOffloading(store hook.Store, run string, o Options, hookOpts ...hook.Option) (*Offloading, error) {
	o, err := o.check()
	if err != nil {
		return nil, err
	}
	if run == "" {
		run = hook.DefaultRun
	}
	if err := hook.CheckRun(run); err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	// The strategies are never asked: OffloadPicked offloads what the
	// compactor picks.
	h, err := hook.New(store, policy.MustStrategies(policy.Default(policy.Never)), hookOpts...)
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	return &Offloading{opts: o, run: run, hook: h}, nil
}

// Close closes the store that LoadTrigger opened for the compactor, if
// that store has a Close method; a compactor made by NewOffloading leaves
// its store to whoever made it, and Close does nothing. A Trigger's Close
// calls it.
func (c *Offloading) Close() error {
	if c.opened == nil {
		return nil
	}
	o := c.opened
	c.opened = nil
	return o.Close()
}

// Compact implements Compactor. A store error stops it: the conversation is
// then returned unchanged with the error.
func (c *Offloading) Compact(ctx context.Context, msgs []Message, target int, counter TokenCounter) ([]Message, bool, error) {
	if counter == nil {
		counter = Approximate()
	}
	where := locate(msgs)
	return run(ctx, c.opts, msgs, target, counter, true, func(ctx context.Context, i int, m Message, original int) (Message, int, bool, error) {
		if m.Result.Error {
			return m, 0, false, nil
		}
		if hook.IsPointer(*m.Result) {
			r, ok, err := c.hook.Shorten(ctx, c.run, *m.Result)
			if err != nil {
				return m, 0, false, fmt.Errorf("compact: shorten the pointer of message %d: %w", i, err)
			}
			if !ok {
				return m, 0, false, nil
			}
			r = withRecord(r, StrategyOffloading, original)
			nm := m
			nm.Result = &r
			return nm, original - counter.Count([]Message{nm}), true, nil
		}
		loc := where[i]
		// The whole block, so that an id-less result gets the key its
		// position gives it, as the hook would have.
		block := make([]hook.Result, 0, loc.end-loc.start)
		for _, b := range msgs[loc.start:loc.end] {
			block = append(block, *b.Result)
		}
		out, err := c.hook.OffloadPicked(ctx, hook.Step{Run: c.run, Number: loc.step}, block, i-loc.start)
		if err != nil {
			return m, 0, false, fmt.Errorf("compact: offload message %d: %w", i, err)
		}
		r := out[i-loc.start]
		if !hook.IsPointer(r) {
			return m, 0, false, nil // empty, or binary for a text-only store
		}
		r = withRecord(r, StrategyOffloading, original)
		nm := m
		nm.Result = &r
		return nm, original - counter.Count([]Message{nm}), true, nil
	})
}

// location is where a tool result sits: its step's number and the run of
// tool messages it belongs to.
type location struct {
	step       int
	start, end int // msgs[start:end] is the block of tool results
}

// locate finds, for every tool result, its step and its block.
func locate(msgs []Message) map[int]location {
	numbered := false
	for _, m := range msgs {
		if m.Step != 0 {
			numbered = true
			break
		}
	}
	out := map[int]location{}
	n := 0
	for i := 0; i < len(msgs); {
		if msgs[i].Role != RoleTool {
			if msgs[i].Role == RoleAssistant {
				n++
			}
			i++
			continue
		}
		j := i
		for j < len(msgs) && msgs[j].IsToolResult() {
			j++
		}
		if j == i {
			i++ // a tool message without a result
			continue
		}
		for k := i; k < j; k++ {
			step := n
			if numbered {
				step = msgs[k].Step
			}
			out[k] = location{step: step, start: i, end: j}
		}
		i = j
	}
	return out
}
