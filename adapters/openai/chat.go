package toolcasopenai

import (
	"context"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/toolcas/toolcas/hook"
)

// Append appends the tool messages answering the last assistant turn of
// history to it, each offloaded as the hook's policy picks: the message's
// text (each of its text parts, a part of the result) becomes a pointer.
// Other messages are appended as they are. On error, history is returned
// as it was.
func (o *Offloader) Append(ctx context.Context, history []openai.ChatCompletionMessageParamUnion, msgs ...openai.ChatCompletionMessageParamUnion) ([]openai.ChatCompletionMessageParamUnion, error) {
	names := map[string]string{}
	step := 0
	for _, m := range history {
		if m.OfAssistant == nil {
			continue
		}
		if len(m.OfAssistant.ToolCalls) > 0 {
			step++
		}
		for _, tc := range m.OfAssistant.ToolCalls {
			if f := tc.OfFunction; f != nil {
				names[f.ID] = f.Function.Name
			}
		}
	}
	var (
		in  []hook.Result
		pos []int
	)
	for i, m := range msgs {
		t := m.OfTool
		if t == nil {
			continue
		}
		r := hook.Result{Tool: names[t.ToolCallID], CallID: t.ToolCallID}
		if t.Content.OfString.Valid() {
			r.Parts = []hook.Part{hook.Text(t.Content.OfString.Value)}
		}
		for _, p := range t.Content.OfArrayOfContentParts {
			r.Parts = append(r.Parts, hook.Text(p.Text))
		}
		if r.Tool == "" || len(r.Parts) == 0 {
			continue
		}
		in = append(in, r)
		pos = append(pos, i)
	}
	out := append([]openai.ChatCompletionMessageParamUnion(nil), msgs...)
	if len(in) > 0 {
		res, err := o.offload(ctx, step, in)
		if err != nil {
			return history, err
		}
		for k, r := range res {
			if hook.IsPointer(r) {
				out[pos[k]] = openai.ToolMessage(r.Parts[0].Text, in[k].CallID)
			}
		}
	}
	return append(history, out...), nil
}

// ReadTool returns the read-back tool's definition, for
// ChatCompletionNewParams.Tools.
func (o *Offloader) ReadTool() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        o.def.Name,
		Description: param.NewOpt(o.def.Description),
		Parameters:  shared.FunctionParameters(o.def.Parameters),
	})
}

// ReadMessage answers a call of the read-back tool with the tool message
// to append: a page of the text, or, for an image or a file, which a
// Chat Completions tool message cannot carry, what it is and where. A
// failure is a message saying what was wrong, for the model to read.
func (o *Offloader) ReadMessage(ctx context.Context, callID, args string) openai.ChatCompletionMessageParamUnion {
	r := o.read(ctx, callID, args)
	var b strings.Builder
	for i, p := range r.Parts {
		if i > 0 {
			b.WriteString("\n")
		}
		if p.Kind == hook.KindText {
			b.WriteString(p.Text)
		} else {
			b.WriteString("(the bytes cannot travel in a Chat Completions tool message: read the path with a file tool, or use the Responses API)")
		}
	}
	return openai.ToolMessage(b.String(), callID)
}
