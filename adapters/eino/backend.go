package toolcaseino

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cloudwego/eino/adk/filesystem"
	"github.com/cloudwego/eino/adk/middlewares/reduction"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/schema"

	"github.com/toolcas/toolcas/hook"
)

// BackendTool is the tool column of the keys a Backend writes under: the
// path eino's reduction middleware chose is the call column.
const BackendTool = "reduction"

// Backend stores what eino's own reduction middleware offloads
// (reduction.Config.Backend) in a toolcas store, each file path a key of the
// run: writing a path again adds a version, and the path reads back its
// newest. ReadFileTool is the tool the middleware's notice tells the model
// to call.
type Backend struct {
	store hook.Store
	read  *hook.ReadTool
}

var _ reduction.Backend = (*Backend)(nil)

// NewBackend returns a reduction backend writing to store.
func NewBackend(store hook.Store) (*Backend, error) {
	if store == nil {
		return nil, errors.New("toolcaseino: backend with no store")
	}
	rt, err := hook.NewReadTool(store)
	if err != nil {
		return nil, err
	}
	return &Backend{store: store, read: rt}, nil
}

// Key returns the key a path is stored under in a run.
func (b *Backend) Key(run, path string) hook.Key {
	return hook.Key{Run: run, Tool: BackendTool, CallID: path, Part: -1, Ext: ".txt"}
}

// Write stores a file's content under the run of the context's agent run.
func (b *Backend) Write(ctx context.Context, req *filesystem.WriteRequest) error {
	if req == nil || req.FilePath == "" {
		return errors.New("toolcaseino: write with no file path")
	}
	k := b.Key(RunOf(ctx), req.FilePath)
	if err := k.Check(); err != nil {
		return fmt.Errorf("toolcaseino: write %s: %w", req.FilePath, err)
	}
	if _, err := b.store.Write(ctx, []hook.Item{{Key: k, Part: hook.Text(req.Content)}}); err != nil {
		return fmt.Errorf("toolcaseino: write %s: %w", req.FilePath, err)
	}
	return nil
}

// fileArgs are the read_file tool's parameters, as eino's filesystem tools
// name them: a 1-based first line and a line count.
type fileArgs struct {
	FilePath string `json:"file_path"`
	Offset   int    `json:"offset,omitempty"`
	Limit    int    `json:"limit,omitempty"`
}

// ReadFileTool returns the tool that reads a path the backend wrote back,
// under name (eino's default, "read_file", when empty): give the reduction
// middleware the same ReadFileToolName, and list it in TruncExcludeTools so
// that what it reads back is not truncated again.
func (b *Backend) ReadFileTool(name string) tool.InvokableTool {
	if name == "" {
		name = "read_file"
	}
	return &readFileTool{b: b, info: &schema.ToolInfo{
		Name: name,
		Desc: "Read a file that a tool result was offloaded to, as numbered lines, a page at a time.",
		ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{
			"file_path": {Type: schema.String, Desc: "The file path from the notice.", Required: true},
			"offset":    {Type: schema.Integer, Desc: "First line to read, from 1. Default 1."},
			"limit":     {Type: schema.Integer, Desc: fmt.Sprintf("Lines to read. Default %d, at most %d.", hook.DefaultReadLimit, hook.MaxReadLimit)},
		}),
	}}
}

type readFileTool struct {
	b    *Backend
	info *schema.ToolInfo
}

func (t *readFileTool) Info(context.Context) (*schema.ToolInfo, error) { return t.info, nil }

func (t *readFileTool) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	var a fileArgs
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		return fmt.Sprintf("arguments are not {\"file_path\": ..., \"offset\": ..., \"limit\": ...}: %v", err), nil
	}
	if a.FilePath == "" {
		return "no file_path: give the path from the notice", nil
	}
	run := RunOf(ctx)
	r, err := t.b.read.Read(ctx, run, hook.ReadArgs{Ref: t.b.Key(run, a.FilePath).String(), Offset: max(a.Offset-1, 0), Limit: a.Limit})
	if errors.Is(err, hook.ErrNotFound) {
		return fmt.Sprintf("%s: no such file was offloaded in this run", a.FilePath), nil
	}
	if err != nil {
		return err.Error(), nil
	}
	return r.Parts[0].Text, nil
}
