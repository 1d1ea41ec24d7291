package toolcaseino

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"

	"github.com/toolcas/toolcas/hook"
)

// ReadTool is the read-back tool as an eino tool: it pages through offloaded
// text and returns offloaded images and files as image and file parts. It
// reads only the run its agent run offloads under (RunOf).
type ReadTool struct {
	rt    *hook.ReadTool
	store hook.Store
	info  *schema.ToolInfo
}

var _ tool.EnhancedInvokableTool = (*ReadTool)(nil)

// NewReadTool returns the read-back tool over store (nil: the store
// hook.WithStore puts in the context).
func NewReadTool(store hook.Store, opts ...hook.Option) (*ReadTool, error) {
	rt, err := hook.NewReadTool(store, opts...)
	if err != nil {
		return nil, err
	}
	var params *jsonschema.Schema
	if err := json.Unmarshal(rt.Parameters(), &params); err != nil {
		return nil, fmt.Errorf("toolcaseino: read tool schema: %w", err)
	}
	info := &schema.ToolInfo{Name: rt.Name(), Desc: rt.Description(), ParamsOneOf: schema.NewParamsOneOfByJSONSchema(params)}
	return &ReadTool{rt: rt, store: store, info: info}, nil
}

// Name returns the tool's name.
func (t *ReadTool) Name() string { return t.rt.Name() }

// Info describes the tool to the model.
func (t *ReadTool) Info(context.Context) (*schema.ToolInfo, error) { return t.info, nil }

// InvokableRun reads what the arguments name. A failure (a bad argument, a
// reference not in the run) is a text result saying what was wrong, for the
// model to read, not an error that would end the run.
func (t *ReadTool) InvokableRun(ctx context.Context, arg *schema.ToolArgument, _ ...tool.Option) (*schema.ToolResult, error) {
	args := "{}"
	if arg != nil && arg.Text != "" {
		args = arg.Text
	}
	r := t.rt.Call(ctx, RunOf(ctx), compose.GetToolCallID(ctx), json.RawMessage(args))
	return toolResultOf(r.Parts), nil
}
