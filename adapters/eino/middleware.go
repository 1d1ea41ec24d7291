// Package toolcaseino offloads the large tool results of an eino agent
// (github.com/cloudwego/eino) to a toolcas store: a ChatModelAgentMiddleware
// runs every tool call's result through a hook.Hook, so that the model sees a
// short pointer instead of the result, and gives the agent the read-back tool
// to fetch the bytes when it needs them.
//
//	agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
//		Model:    model,
//		ToolsConfig: tools,
//		Handlers: []adk.ChatModelAgentMiddleware{toolcaseino.MustNew(h, store)},
//	})
//
// The run of a key is the agent run: a name given with RunOption, else one
// made up when the run starts. The step is the model turn whose tool calls
// produced the result.
package toolcaseino

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/schema"

	"github.com/toolcas/toolcas/hook"
)

// RunKey is the session value naming the run a Runner.Run offloads under.
// RunOption sets it; when it is unset, the middleware names the run itself
// when the run starts.
const RunKey = "toolcas.run"

// stepKey is the run-local value holding the number of the last model turn.
const stepKey = "toolcas.step"

// RunOption names the run whose results a Runner.Run offloads, so that the
// keys read as that run's: runner.Run(ctx, msgs, toolcaseino.RunOption("run-7")).
func RunOption(run string) adk.AgentRunOption {
	return adk.WithSessionValues(map[string]any{RunKey: run})
}

// Middleware is an adk.ChatModelAgentMiddleware that offloads tool results
// through a hook and registers the read-back tool with the agent. One
// Middleware serves any number of agents and concurrent runs.
type Middleware struct {
	*adk.BaseChatModelAgentMiddleware
	hook     *hook.Hook
	readTool *ReadTool
	addTool  bool
}

var _ adk.ChatModelAgentMiddleware = (*Middleware)(nil)

// An Option configures New.
type Option func(*Middleware) error

// WithReadToolName registers the read-back tool under another name; build
// the hook with hook.WithReadToolName(name) too, so that it does not offload
// what the tool reads back.
func WithReadToolName(name string) Option {
	return func(m *Middleware) error {
		rt, err := NewReadTool(m.readTool.store, hook.WithReadToolName(name))
		if err != nil {
			return fmt.Errorf("toolcaseino: %w", err)
		}
		m.readTool = rt
		return nil
	}
}

// WithoutReadTool leaves the read-back tool out of the agent's tools, for
// agents that register it themselves (NewReadTool) or read with file tools.
func WithoutReadTool() Option {
	return func(m *Middleware) error {
		m.addTool = false
		return nil
	}
}

// New returns a middleware offloading through h; the read-back tool it adds
// to the agent reads from store (nil: the store hook.WithStore puts in the
// run's context).
func New(h *hook.Hook, store hook.Store, opts ...Option) (*Middleware, error) {
	if h == nil {
		return nil, errors.New("toolcaseino: no hook")
	}
	rt, err := NewReadTool(store)
	if err != nil {
		return nil, err
	}
	m := &Middleware{BaseChatModelAgentMiddleware: &adk.BaseChatModelAgentMiddleware{}, hook: h, readTool: rt, addTool: true}
	for _, o := range opts {
		if err := o(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// MustNew is New for configuration known to be valid; it panics on error.
func MustNew(h *hook.Hook, store hook.Store, opts ...Option) *Middleware {
	m, err := New(h, store, opts...)
	if err != nil {
		panic(err)
	}
	return m
}

// ReadTool returns the read-back tool the middleware adds to the agent.
func (m *Middleware) ReadTool() *ReadTool { return m.readTool }

// BeforeAgent names the run, unless the caller did, and adds the read-back
// tool to the agent's tools unless one of that name is there.
func (m *Middleware) BeforeAgent(ctx context.Context, rc *adk.ChatModelAgentContext) (context.Context, *adk.ChatModelAgentContext, error) {
	if v, ok := adk.GetSessionValue(ctx, RunKey); !ok || v == nil || v == "" {
		adk.AddSessionValue(ctx, RunKey, newRunName())
	} else if s, ok := v.(string); !ok {
		return ctx, rc, fmt.Errorf("toolcaseino: session value %s is a %T, want the run's name as a string", RunKey, v)
	} else if err := hook.CheckRun(s); err != nil {
		return ctx, rc, fmt.Errorf("toolcaseino: session value %s: %w", RunKey, err)
	}
	if !m.addTool {
		return ctx, rc, nil
	}
	for _, t := range rc.Tools {
		info, err := t.Info(ctx)
		if err == nil && info != nil && info.Name == m.readTool.Name() {
			return ctx, rc, nil
		}
	}
	rc.Tools = append(rc.Tools, m.readTool)
	return ctx, rc, nil
}

// AfterModelRewriteState records the model turn the coming tool calls
// belong to: the number of assistant messages so far.
func (m *Middleware) AfterModelRewriteState(ctx context.Context, st *adk.ChatModelAgentState, mc *adk.ModelContext) (context.Context, *adk.ChatModelAgentState, error) {
	n := 0
	for _, msg := range st.Messages {
		if msg != nil && msg.Role == schema.Assistant {
			n++
		}
	}
	if err := adk.SetRunLocalValue(ctx, stepKey, n); err != nil {
		return ctx, st, fmt.Errorf("toolcaseino: %w", err)
	}
	return ctx, st, nil
}

// WrapInvokableToolCall offloads a tool's text result.
func (m *Middleware) WrapInvokableToolCall(_ context.Context, next adk.InvokableToolCallEndpoint, tc *adk.ToolContext) (adk.InvokableToolCallEndpoint, error) {
	return func(ctx context.Context, args string, opts ...tool.Option) (string, error) {
		out, err := next(ctx, args, opts...)
		if err != nil {
			return out, err
		}
		r, err := m.offload(ctx, tc, args, []hook.Part{hook.Text(out)})
		if err != nil || !hook.IsPointer(r) {
			return out, err
		}
		return r.Parts[0].Text, nil
	}, nil
}

// WrapStreamableToolCall collects a tool's streamed text, then offloads it
// as WrapInvokableToolCall does; the pointer, or the text when it stays,
// comes back as a one-chunk stream.
func (m *Middleware) WrapStreamableToolCall(_ context.Context, next adk.StreamableToolCallEndpoint, tc *adk.ToolContext) (adk.StreamableToolCallEndpoint, error) {
	return func(ctx context.Context, args string, opts ...tool.Option) (*schema.StreamReader[string], error) {
		sr, err := next(ctx, args, opts...)
		if err != nil {
			return sr, err
		}
		var b strings.Builder
		if err := drain(sr, func(s string) { b.WriteString(s) }); err != nil {
			return nil, err
		}
		out := b.String()
		r, err := m.offload(ctx, tc, args, []hook.Part{hook.Text(out)})
		if err != nil {
			return nil, err
		}
		if hook.IsPointer(r) {
			out = r.Parts[0].Text
		}
		return schema.StreamReaderFromArray([]string{out}), nil
	}, nil
}

// WrapEnhancedInvokableToolCall offloads a multimodal result: text, images
// and files alike, each part to its own blob.
func (m *Middleware) WrapEnhancedInvokableToolCall(_ context.Context, next adk.EnhancedInvokableToolCallEndpoint, tc *adk.ToolContext) (adk.EnhancedInvokableToolCallEndpoint, error) {
	return func(ctx context.Context, arg *schema.ToolArgument, opts ...tool.Option) (*schema.ToolResult, error) {
		res, err := next(ctx, arg, opts...)
		if err != nil || res == nil {
			return res, err
		}
		return m.offloadResult(ctx, tc, arg, res)
	}, nil
}

// WrapEnhancedStreamableToolCall collects a streamed multimodal result, as
// eino concatenates it for the tool message, then offloads it.
func (m *Middleware) WrapEnhancedStreamableToolCall(_ context.Context, next adk.EnhancedStreamableToolCallEndpoint, tc *adk.ToolContext) (adk.EnhancedStreamableToolCallEndpoint, error) {
	return func(ctx context.Context, arg *schema.ToolArgument, opts ...tool.Option) (*schema.StreamReader[*schema.ToolResult], error) {
		sr, err := next(ctx, arg, opts...)
		if err != nil {
			return sr, err
		}
		var chunks []*schema.ToolResult
		if err := drain(sr, func(c *schema.ToolResult) { chunks = append(chunks, c) }); err != nil {
			return nil, err
		}
		res, err := schema.ConcatToolResults(chunks)
		if err != nil {
			return nil, fmt.Errorf("toolcaseino: collect the stream of %s: %w", tc.Name, err)
		}
		out, err := m.offloadResult(ctx, tc, arg, res)
		if err != nil {
			return nil, err
		}
		return schema.StreamReaderFromArray([]*schema.ToolResult{out}), nil
	}, nil
}

func (m *Middleware) offloadResult(ctx context.Context, tc *adk.ToolContext, arg *schema.ToolArgument, res *schema.ToolResult) (*schema.ToolResult, error) {
	parts, ok, err := partsOf(res)
	if err != nil {
		return nil, fmt.Errorf("toolcaseino: result of %s: %w", tc.Name, err)
	}
	if !ok {
		return res, nil
	}
	args := ""
	if arg != nil {
		args = arg.Text
	}
	r, err := m.offload(ctx, tc, args, parts)
	if err != nil || !hook.IsPointer(r) {
		return res, err
	}
	return toolResultOf(r.Parts), nil
}

// offload runs one result through the hook, in the run and step the
// context says.
func (m *Middleware) offload(ctx context.Context, tc *adk.ToolContext, args string, parts []hook.Part) (hook.Result, error) {
	in := hook.Result{Tool: tc.Name, CallID: tc.CallID, Parts: parts}
	if args != "" {
		in.Arguments = []byte(args)
	}
	out, err := m.hook.Offload(ctx, StepOf(ctx), []hook.Result{in})
	if err != nil {
		return hook.Result{}, fmt.Errorf("toolcaseino: %s call %s: %w", tc.Name, tc.CallID, err)
	}
	return out[0], nil
}

// StepOf returns the run and step a tool call made in ctx offloads under:
// the run named by RunKey (hook.DefaultRun outside an agent run) and the
// number of the model turn that asked for the call.
func StepOf(ctx context.Context) hook.Step {
	s := hook.Step{Run: RunOf(ctx)}
	if v, ok, err := adk.GetRunLocalValue(ctx, stepKey); err == nil && ok {
		if n, ok := v.(int); ok {
			s.Number = n
		}
	}
	return s
}

// RunOf returns the run a context's agent run offloads under.
func RunOf(ctx context.Context) string {
	if v, ok := adk.GetSessionValue(ctx, RunKey); ok {
		if s, ok := v.(string); ok && s != "" {
			return s
		}
	}
	return hook.DefaultRun
}

func newRunName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "eino-" + hex.EncodeToString(b[:])
}

// drain reads a stream to its end, closing it.
func drain[T any](sr *schema.StreamReader[T], f func(T)) error {
	defer sr.Close()
	for {
		v, err := sr.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		f(v)
	}
}
