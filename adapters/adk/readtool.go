package toolcasadk

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"

	"github.com/toolcas/toolcas/hook"
)

// NewReadTool returns the read-back tool as an adk tool over store (nil:
// the store hook.WithStore puts in the context). It reads only the
// session's run. Text comes back under "result" as a page of numbered
// lines; an image or a file comes back as a header under "result", its
// MIME type under "mime_type" and its bytes in base64 under "data". A
// failure comes back under "error", for the model to read.
func NewReadTool(store hook.Store, opts ...hook.Option) (tool.Tool, error) {
	rt, err := hook.NewReadTool(store, opts...)
	if err != nil {
		return nil, err
	}
	var params *jsonschema.Schema
	if err := json.Unmarshal(rt.Parameters(), &params); err != nil {
		return nil, fmt.Errorf("toolcasadk: read tool schema: %w", err)
	}
	return functiontool.New(functiontool.Config{Name: rt.Name(), Description: rt.Description(), InputSchema: params},
		func(ctx agent.Context, a hook.ReadArgs) (map[string]any, error) {
			r, err := rt.Read(ctx, Run(ctx.SessionID()), a)
			if err != nil {
				return map[string]any{"error": err.Error()}, nil
			}
			out := map[string]any{"result": r.Parts[0].Text}
			if len(r.Parts) > 1 {
				p := r.Parts[1]
				out["mime_type"] = p.MIME
				out["data"] = base64.StdEncoding.EncodeToString(p.Data)
			}
			return out, nil
		})
}

// MustReadTool is NewReadTool for configuration known to be valid; it
// panics on error.
func MustReadTool(store hook.Store, opts ...hook.Option) tool.Tool {
	t, err := NewReadTool(store, opts...)
	if err != nil {
		panic(err)
	}
	return t
}
