// Package toolcasopenai offloads the large tool results of an OpenAI SDK
// tool loop (github.com/openai/openai-go/v3) to a toolcas store. The SDK
// has no tool runner: the caller's loop appends each tool's answer to the
// conversation, and an Offloader rewrites those answers on the way in.
// With Chat Completions, Append replaces append for the tool messages:
//
//	params.Messages, err = off.Append(ctx, params.Messages, toolMessages...)
//
// With the Responses API, AppendOutputs does the same for function_call_output
// items, whose images and files are offloaded too. The read-back tool comes
// as a tool definition for either API and a function that answers its calls.
//
// The run of a key is the Offloader's, the step the number of model turns
// that asked for tool calls so far, and the call the tool call id.
package toolcasopenai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolcas/toolcas/hook"
)

// Offloader offloads the tool results of one run (one conversation); any
// number of them can share a hook and a store. It is safe for concurrent
// use.
type Offloader struct {
	hook *hook.Hook
	run  string
	st   hook.Store
	rt   *hook.ReadTool
	def  struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters"`
	}
}

// An Option configures New.
type Option func(*Offloader) error

// WithRun names the run the results are offloaded under; by default New
// makes up a name.
func WithRun(run string) Option {
	return func(o *Offloader) error {
		if err := hook.CheckRun(run); err != nil {
			return fmt.Errorf("toolcasopenai: %w", err)
		}
		o.run = run
		return nil
	}
}

// WithReadToolName names the read-back tool; build the hook with
// hook.WithReadToolName(name) too.
func WithReadToolName(name string) Option {
	return func(o *Offloader) error {
		return o.setReadTool(hook.WithReadToolName(name))
	}
}

// New returns an Offloader writing through h; its read-back tool reads
// from store.
func New(h *hook.Hook, store hook.Store, opts ...Option) (*Offloader, error) {
	if h == nil {
		return nil, errors.New("toolcasopenai: no hook")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	o := &Offloader{hook: h, run: "openai-" + hex.EncodeToString(b[:]), st: store}
	if err := o.setReadTool(); err != nil {
		return nil, err
	}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	if err := json.Unmarshal(o.rt.Schema(), &o.def); err != nil {
		return nil, fmt.Errorf("toolcasopenai: read tool schema: %w", err)
	}
	return o, nil
}

func (o *Offloader) setReadTool(opts ...hook.Option) error {
	rt, err := hook.NewReadTool(o.st, opts...)
	if err != nil {
		return fmt.Errorf("toolcasopenai: %w", err)
	}
	o.rt = rt
	return nil
}

// Must returns o, or panics with err: Must(New(h, store)).
func Must(o *Offloader, err error) *Offloader {
	if err != nil {
		panic(err)
	}
	return o
}

// Run returns the run the results are offloaded under.
func (o *Offloader) Run() string { return o.run }

// ReadToolName returns the name the read-back tool is offered under.
func (o *Offloader) ReadToolName() string { return o.rt.Name() }

// offload runs one step's results through the hook.
func (o *Offloader) offload(ctx context.Context, step int, in []hook.Result) ([]hook.Result, error) {
	out, err := o.hook.Offload(ctx, hook.Step{Run: o.run, Number: step}, in)
	if err != nil {
		return nil, fmt.Errorf("toolcasopenai: %w", err)
	}
	return out, nil
}

// read answers a call of the read-back tool.
func (o *Offloader) read(ctx context.Context, callID, args string) hook.Result {
	return o.rt.Call(ctx, o.run, callID, json.RawMessage(args))
}
