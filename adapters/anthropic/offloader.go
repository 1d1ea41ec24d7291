// Package toolcasanthropic offloads the large tool results of an Anthropic
// SDK tool runner (github.com/anthropics/anthropic-sdk-go/v2, BetaToolRunner)
// to a toolcas store: it wraps each tool's Execute so that what it returns
// goes through a hook.Hook before the runner appends it, and adds the
// read-back tool.
//
//	off, err := toolcasanthropic.New(h, store, toolcasanthropic.WithRun("run-7"))
//	runner := off.NewToolRunner(&client.Beta.Messages, tools, params)
//
// The run of a key is the Offloader's, the step the runner's iteration
// that asked for the call, and the call its tool_use id.
package toolcasanthropic

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolcas/toolcas/hook"
)

// Runner is what an Offloader reads of the tool runner it is bound to:
// BetaToolRunner and BetaToolRunnerStreaming both have it.
type Runner interface {
	// LastMessage is the assistant turn whose tool calls are running.
	LastMessage() *anthropic.BetaMessage
	// IterationCount is the number of that turn.
	IterationCount() int
}

// Offloader offloads the results of one run's tools. Make one per run (per
// tool runner); any number of them can share a hook and a store.
type Offloader struct {
	hook     *hook.Hook
	run      string
	readTool *ReadTool

	mu      sync.Mutex
	runner  Runner
	claimed map[string]bool
}

// An Option configures New.
type Option func(*Offloader) error

// WithRun names the run the results are offloaded under; by default New
// makes up a name.
func WithRun(run string) Option {
	return func(o *Offloader) error {
		if err := hook.CheckRun(run); err != nil {
			return fmt.Errorf("toolcasanthropic: %w", err)
		}
		o.run = run
		return nil
	}
}

// WithReadToolName names the read-back tool; build the hook with
// hook.WithReadToolName(name) too.
func WithReadToolName(name string) Option {
	return func(o *Offloader) error {
		rt, err := newReadTool(o.readTool.store, o, hook.WithReadToolName(name))
		if err != nil {
			return fmt.Errorf("toolcasanthropic: %w", err)
		}
		o.readTool = rt
		return nil
	}
}

// New returns an Offloader writing through h; its read-back tool reads
// from store.
func New(h *hook.Hook, store hook.Store, opts ...Option) (*Offloader, error) {
	if h == nil {
		return nil, errors.New("toolcasanthropic: no hook")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	o := &Offloader{hook: h, run: "anthropic-" + hex.EncodeToString(b[:]), claimed: map[string]bool{}}
	rt, err := newReadTool(store, o)
	if err != nil {
		return nil, err
	}
	o.readTool = rt
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	return o, nil
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

// ReadTool returns the read-back tool, reading this run's results.
func (o *Offloader) ReadTool() anthropic.BetaTool { return o.readTool }

// NewToolRunner is svc.NewToolRunner with every tool wrapped, the read-back
// tool added, and the Offloader bound to the runner.
func (o *Offloader) NewToolRunner(svc *anthropic.BetaMessageService, tools []anthropic.BetaTool, params anthropic.BetaToolRunnerParams, opts ...option.RequestOption) *anthropic.BetaToolRunner {
	r := svc.NewToolRunner(append(o.Wrap(tools...), o.readTool), params, opts...)
	o.Bind(r)
	return r
}

// Bind tells the Offloader which runner's tool calls it sees, so that it
// keys results by their tool_use id and iteration. Unbound, a result is
// keyed by step 0 and a hash of its tool's input.
func (o *Offloader) Bind(r Runner) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.runner = r
}

// Wrap returns the tools with their Execute offloading what they return.
func (o *Offloader) Wrap(tools ...anthropic.BetaTool) []anthropic.BetaTool {
	out := make([]anthropic.BetaTool, len(tools))
	for i, t := range tools {
		out[i] = &wrapped{BetaTool: t, o: o}
	}
	return out
}

type wrapped struct {
	anthropic.BetaTool
	o *Offloader
}

// Execute runs the tool and offloads its result; a failed call, and a
// result with a block the hook cannot hold (an image by URL, a search
// result), stay as they are.
func (w *wrapped) Execute(ctx context.Context, input json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	content, err := w.BetaTool.Execute(ctx, input)
	if err != nil {
		return content, err
	}
	parts, ok, err := partsOf(content)
	if err != nil {
		return nil, fmt.Errorf("toolcasanthropic: result of %s: %w", w.Name(), err)
	}
	if !ok {
		return content, nil
	}
	step, callID := w.o.call(w.Name(), input)
	out, err := w.o.hook.Offload(ctx, step, []hook.Result{{Tool: w.Name(), CallID: callID, Arguments: input, Parts: parts}})
	if err != nil {
		return nil, fmt.Errorf("toolcasanthropic: %s call %s: %w", w.Name(), callID, err)
	}
	if !hook.IsPointer(out[0]) {
		return content, nil
	}
	return blocksOf(out[0].Parts), nil
}

// call finds the tool_use block a call answers in the bound runner's last
// turn: the first of that tool with that input not yet claimed.
func (o *Offloader) call(name string, input json.RawMessage) (hook.Step, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	step := hook.Step{Run: o.run}
	if o.runner != nil {
		step.Number = o.runner.IterationCount()
		if msg := o.runner.LastMessage(); msg != nil {
			for _, b := range msg.Content {
				if b.Type != "tool_use" || b.Name != name || o.claimed[b.ID] {
					continue
				}
				in, err := json.Marshal(b.AsToolUse().Input)
				if err == nil && bytes.Equal(in, input) {
					o.claimed[b.ID] = true
					return step, b.ID
				}
			}
		}
	}
	return step, "in-" + hook.ShortID(append([]byte(name+"\x00"), input...))
}

// partsOf turns result blocks into the hook's parts; ok is false when a
// block carries nothing the hook can store.
func partsOf(content []anthropic.BetaToolResultBlockParamContentUnion) (parts []hook.Part, ok bool, err error) {
	for i, c := range content {
		switch {
		case c.OfText != nil:
			parts = append(parts, hook.Text(c.OfText.Text))
		case c.OfImage != nil && c.OfImage.Source.OfBase64 != nil:
			s := c.OfImage.Source.OfBase64
			p, err := hook.ImageBase64(string(s.MediaType), s.Data)
			if err != nil {
				return nil, false, fmt.Errorf("block %d: %w", i, err)
			}
			parts = append(parts, p)
		case c.OfDocument != nil && c.OfDocument.Source.OfBase64 != nil:
			title := ""
			if c.OfDocument.Title.Valid() {
				title = c.OfDocument.Title.Value
			}
			p, err := hook.FileBase64("application/pdf", title, c.OfDocument.Source.OfBase64.Data)
			if err != nil {
				return nil, false, fmt.Errorf("block %d: %w", i, err)
			}
			parts = append(parts, p)
		default:
			return nil, false, nil
		}
	}
	return parts, len(parts) > 0, nil
}

// blocksOf turns the hook's parts (a pointer, or what the read-back tool
// returns) into result blocks.
func blocksOf(parts []hook.Part) []anthropic.BetaToolResultBlockParamContentUnion {
	var out []anthropic.BetaToolResultBlockParamContentUnion
	for _, p := range parts {
		switch {
		case p.Kind == hook.KindText:
			out = append(out, anthropic.BetaToolResultBlockParamContentUnion{OfText: &anthropic.BetaTextBlockParam{Text: p.Text}})
		case p.Kind == hook.KindImage:
			out = append(out, anthropic.BetaToolResultBlockParamContentUnion{OfImage: &anthropic.BetaImageBlockParam{
				Source: anthropic.BetaImageBlockParamSourceUnion{OfBase64: &anthropic.BetaBase64ImageSourceParam{
					Data: base64.StdEncoding.EncodeToString(p.Data), MediaType: anthropic.BetaBase64ImageSourceMediaType(p.MIME)}}}})
		case p.MIME == "application/pdf":
			out = append(out, anthropic.BetaToolResultBlockParamContentUnion{OfDocument: &anthropic.BetaRequestDocumentBlockParam{
				Source: anthropic.BetaRequestDocumentBlockSourceUnionParam{OfBase64: &anthropic.BetaBase64PDFSourceParam{
					Data: base64.StdEncoding.EncodeToString(p.Data)}}}})
		default:
			out = append(out, anthropic.BetaToolResultBlockParamContentUnion{OfText: &anthropic.BetaTextBlockParam{
				Text: fmt.Sprintf("(%d bytes of %s, which a tool result cannot carry)", len(p.Data), p.MIME)}})
		}
	}
	return out
}
