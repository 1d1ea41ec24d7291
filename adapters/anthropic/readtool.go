package toolcasanthropic

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolcas/toolcas/hook"
)

// ReadTool is the read-back tool as a BetaTool: text comes back as a page
// of numbered lines, images as image blocks, PDFs as document blocks. It
// reads only its Offloader's run.
type ReadTool struct {
	rt     *hook.ReadTool
	store  hook.Store
	o      *Offloader
	desc   string
	schema anthropic.BetaToolInputSchemaParam
}

var _ anthropic.BetaTool = (*ReadTool)(nil)

func newReadTool(store hook.Store, o *Offloader, opts ...hook.Option) (*ReadTool, error) {
	rt, err := hook.NewReadTool(store, opts...)
	if err != nil {
		return nil, err
	}
	var params anthropic.BetaToolInputSchemaParam
	if err := json.Unmarshal(rt.Parameters(), &params); err != nil {
		return nil, fmt.Errorf("toolcasanthropic: read tool schema: %w", err)
	}
	return &ReadTool{rt: rt, store: store, o: o, desc: rt.Description(), schema: params}, nil
}

// Name returns the tool's name.
func (t *ReadTool) Name() string { return t.rt.Name() }

// Description tells the model what the tool does.
func (t *ReadTool) Description() string { return t.desc }

// InputSchema describes the tool's parameters.
func (t *ReadTool) InputSchema() anthropic.BetaToolInputSchemaParam { return t.schema }

// Execute reads what the input names. A failure is a result saying what
// was wrong, for the model to read.
func (t *ReadTool) Execute(ctx context.Context, input json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	r := t.rt.Call(ctx, t.o.run, "", input)
	if r.Error {
		return nil, fmt.Errorf("%s", r.Parts[0].Text)
	}
	return blocksOf(r.Parts), nil
}
