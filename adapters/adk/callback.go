// Package toolcasadk offloads the large tool results of an adk-go agent
// (google.golang.org/adk/v2) to a toolcas store, and backs adk-go's artifact
// service with one.
//
// AfterTool is an llmagent.AfterToolCallback and Plugin a runner plugin:
// each replaces the large values of a tool's result map with pointers. The
// run of a key is the session, the step the model turn whose function call
// the tool answers (counted by AfterModel, which Plugin includes), and the
// call its function call id. NewReadTool is the
// read-back tool as an adk tool; ArtifactService is an artifact.Service
// keeping artifacts in the store.
//
//	agent, err := llmagent.New(llmagent.Config{
//		Model: model,
//		Tools: append(tools, toolcasadk.MustReadTool(store)),
//		AfterModelCallbacks: []llmagent.AfterModelCallback{toolcasadk.AfterModel()},
//		AfterToolCallbacks:  []llmagent.AfterToolCallback{toolcasadk.AfterTool(h)},
//	})
//
// or, for every agent of a runner, one plugin:
//
//	runner.Config{PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{toolcasadk.MustPlugin(h)}}}
package toolcasadk

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"

	"github.com/toolcas/toolcas/hook"
)

// AfterTool returns a callback that offloads, through h, every value of a
// tool's result map that h's policy picks for that tool: a string as it
// is, any other value as its JSON. Each value is a result of its own, keyed
// by the function call id and the map key ("fc-1.output"), and becomes the
// pointer's text. A result with nothing to offload, and a failed call, are
// left to the callbacks after it.
func AfterTool(h *hook.Hook) llmagent.AfterToolCallback {
	return func(ctx agent.Context, t tool.Tool, args, result map[string]any, err error) (map[string]any, error) {
		if err != nil || len(result) == 0 || t == nil {
			return nil, nil
		}
		return offload(ctx, h, t.Name(), ctx.FunctionCallID(), args, result)
	}
}

// Plugin returns a runner plugin that offloads the results of every tool of
// every agent the runner runs, as AfterTool does, and counts steps, as
// AfterModel does:
// runner.Config{PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{p}}}.
func Plugin(h *hook.Hook) (*plugin.Plugin, error) {
	if h == nil {
		return nil, errors.New("toolcasadk: no hook")
	}
	return plugin.New(plugin.Config{Name: "toolcas", AfterModelCallback: AfterModel(), AfterToolCallback: AfterTool(h)})
}

// MustPlugin is Plugin for a hook known to be there; it panics on error.
func MustPlugin(h *hook.Hook) *plugin.Plugin {
	p, err := Plugin(h)
	if err != nil {
		panic(err)
	}
	return p
}

func offload(ctx agent.Context, h *hook.Hook, toolName, callID string, args, result map[string]any) (map[string]any, error) {
	keys := make([]string, 0, len(result))
	for k := range result {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rawArgs, _ := json.Marshal(args)
	in := make([]hook.Result, 0, len(keys))
	for _, k := range keys {
		text, ok := result[k].(string)
		if !ok {
			b, err := json.Marshal(result[k])
			if err != nil {
				// A value JSON cannot render is not one a model is sent.
				b = []byte(fmt.Sprint(result[k]))
			}
			text = string(b)
		}
		id := k
		if callID != "" {
			id = callID + "." + k
		}
		in = append(in, hook.Result{Tool: toolName, CallID: id, Arguments: rawArgs, Parts: []hook.Part{hook.Text(text)}})
	}
	out, err := h.Offload(ctx, Step(ctx), in)
	if err != nil {
		return nil, fmt.Errorf("toolcasadk: %s call %s: %w", toolName, callID, err)
	}
	var rewritten map[string]any
	for i, r := range out {
		if !hook.IsPointer(r) {
			continue
		}
		if rewritten == nil {
			rewritten = make(map[string]any, len(result))
			for k, v := range result {
				rewritten[k] = v
			}
		}
		rewritten[keys[i]] = r.Parts[0].Text
	}
	return rewritten, nil
}

// StepKey is the session state key holding the number of model turns that
// asked for tool calls; AfterModel and Plugin keep it.
const StepKey = "toolcas:step"

// AfterModel returns a callback that counts the model turns asking for
// tool calls in the session state (StepKey), so that AfterTool keys each
// result by the turn that asked for it. Without it, results are keyed by
// step 0 (their call ids still tell them apart). Plugin includes it.
func AfterModel() llmagent.AfterModelCallback {
	return func(ctx agent.Context, resp *model.LLMResponse, err error) (*model.LLMResponse, error) {
		if err != nil || resp == nil || resp.Partial || resp.Content == nil {
			return nil, nil
		}
		for _, p := range resp.Content.Parts {
			if p != nil && p.FunctionCall != nil {
				if err := ctx.State().Set(StepKey, stepIn(ctx.State())+1); err != nil {
					return nil, fmt.Errorf("toolcasadk: count the step: %w", err)
				}
				return nil, nil
			}
		}
		return nil, nil
	}
}

// Step returns the run and step a tool call made in ctx offloads under: the
// session, and the model turn that asked for the call (see AfterModel).
func Step(ctx agent.Context) hook.Step {
	return hook.Step{Run: Run(ctx.SessionID()), Number: stepIn(ctx.State())}
}

// stepIn reads StepKey, which a session service that stores state as JSON
// gives back as a float.
func stepIn(st session.State) int {
	if st == nil {
		return 0
	}
	v, err := st.Get(StepKey)
	if err != nil {
		return 0
	}
	switch n := v.(type) {
	case int:
		return n
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	return 0
}

// Run returns the run a session's results offload under: the session id
// when it can name a run (hook.CheckRun), else "s-" and 16 hex digits of
// its BLAKE3 hash.
func Run(session string) string {
	if session == "" {
		return hook.DefaultRun
	}
	if hook.CheckRun(session) == nil {
		return session
	}
	return "s-" + hook.ShortID([]byte(session))
}
