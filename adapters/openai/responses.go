package toolcasopenai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"strings"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolcas/toolcas/hook"
)

// AppendOutputs appends the function_call_output items answering the last
// turn of input to it, each offloaded as the hook's policy picks: its text,
// images (given as data URLs) and files (given as file data) become one
// pointer. An output holding an image or file given only by URL or file id
// stays as it is, as do other items. On error, input is returned as it was.
func (o *Offloader) AppendOutputs(ctx context.Context, input responses.ResponseInputParam, items ...responses.ResponseInputItemUnionParam) (responses.ResponseInputParam, error) {
	names := map[string]string{}
	step, inTurn := 0, false
	for _, it := range input {
		switch {
		case it.OfFunctionCall != nil:
			id, name := it.OfFunctionCall.CallID, it.OfFunctionCall.Name
			if id == "" {
				// ResponseFunctionToolCall.ToParam keeps the call as raw JSON.
				id, name = rawCall(it.OfFunctionCall)
			}
			names[id] = name
			if !inTurn {
				step++
			}
			inTurn = true
		case it.OfReasoning != nil:
		default:
			inTurn = false
		}
	}
	var (
		in  []hook.Result
		pos []int
	)
	for i, it := range items {
		out := it.OfFunctionCallOutput
		if out == nil {
			continue
		}
		r := hook.Result{Tool: names[out.CallID.Value], CallID: out.CallID.Value}
		if r.Tool == "" && out.Name.Valid() {
			r.Tool = out.Name.Value
		}
		parts, ok, err := outputParts(out.Output)
		if err != nil {
			return input, fmt.Errorf("toolcasopenai: output of call %s: %w", r.CallID, err)
		}
		if !ok || r.Tool == "" {
			continue
		}
		r.Parts = parts
		in = append(in, r)
		pos = append(pos, i)
	}
	rewritten := append([]responses.ResponseInputItemUnionParam(nil), items...)
	if len(in) > 0 {
		res, err := o.offload(ctx, step, in)
		if err != nil {
			return input, err
		}
		for k, r := range res {
			if hook.IsPointer(r) {
				c := *rewritten[pos[k]].OfFunctionCallOutput
				c.Output = responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(r.Parts[0].Text)}
				rewritten[pos[k]] = responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &c}
			}
		}
	}
	return append(input, rewritten...), nil
}

// rawCall reads the call id and the name of a function call the SDK holds
// as raw JSON.
func rawCall(v any) (callID, name string) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", ""
	}
	var w struct {
		CallID string `json:"call_id"`
		Name   string `json:"name"`
	}
	_ = json.Unmarshal(b, &w)
	return w.CallID, w.Name
}

// outputParts turns a function call's output into the hook's parts; ok is
// false when an item carries nothing the hook can store.
func outputParts(out responses.ResponseInputItemFunctionCallOutputOutputUnionParam) (parts []hook.Part, ok bool, err error) {
	if out.OfString.Valid() {
		return []hook.Part{hook.Text(out.OfString.Value)}, true, nil
	}
	for i, it := range out.OfResponseFunctionCallOutputItemArray {
		switch {
		case it.OfInputText != nil:
			parts = append(parts, hook.Text(it.OfInputText.Text))
		case it.OfInputImage != nil && strings.HasPrefix(it.OfInputImage.ImageURL.Value, "data:"):
			mt, data, err := decodeDataURL(it.OfInputImage.ImageURL.Value)
			if err != nil {
				return nil, false, fmt.Errorf("item %d: %w", i, err)
			}
			parts = append(parts, hook.Image(mt, data))
		case it.OfInputFile != nil && it.OfInputFile.FileData.Valid():
			mt, data, err := decodeDataURL(it.OfInputFile.FileData.Value)
			if err != nil {
				return nil, false, fmt.Errorf("item %d: %w", i, err)
			}
			parts = append(parts, hook.File(mt, it.OfInputFile.Filename.Value, data))
		default:
			return nil, false, nil
		}
	}
	return parts, len(parts) > 0, nil
}

// decodeDataURL decodes a base64 data URL, or bare base64.
func decodeDataURL(s string) (mediaType string, data []byte, err error) {
	payload := s
	if rest, ok := strings.CutPrefix(s, "data:"); ok {
		meta, p, found := strings.Cut(rest, ",")
		if !found || !strings.HasSuffix(meta, ";base64") {
			return "", nil, fmt.Errorf("data URL %.40q is not base64", s)
		}
		mediaType, payload = strings.TrimSuffix(meta, ";base64"), p
		if mediaType != "" {
			if _, _, err := mime.ParseMediaType(mediaType); err != nil {
				return "", nil, fmt.Errorf("data URL media type %q: %w", mediaType, err)
			}
		}
	}
	data, err = base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", nil, fmt.Errorf("payload is not valid base64: %w", err)
	}
	return mediaType, data, nil
}

func dataURL(mediaType string, data []byte) string {
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// ResponsesReadTool returns the read-back tool's definition, for
// responses.ResponseNewParams.Tools.
func (o *Offloader) ResponsesReadTool() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
		Name:        o.def.Name,
		Description: param.NewOpt(o.def.Description),
		Parameters:  o.def.Parameters,
		Strict:      param.NewOpt(false),
	}}
}

// ReadOutput answers a call of the read-back tool with the
// function_call_output item to append: a page of the text, or an image or
// a file as the Responses API carries them. A failure is an output saying
// what was wrong, for the model to read.
func (o *Offloader) ReadOutput(ctx context.Context, callID, args string) responses.ResponseInputItemUnionParam {
	r := o.read(ctx, callID, args)
	out := &responses.ResponseInputItemFunctionCallOutputParam{CallID: param.NewOpt(callID)}
	if len(r.Parts) == 1 && r.Parts[0].Kind == hook.KindText {
		out.Output.OfString = param.NewOpt(r.Parts[0].Text)
		return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: out}
	}
	var list responses.ResponseFunctionCallOutputItemListParam
	for _, p := range r.Parts {
		switch p.Kind {
		case hook.KindText:
			list = append(list, responses.ResponseFunctionCallOutputItemUnionParam{OfInputText: &responses.ResponseInputTextContentParam{Text: p.Text}})
		case hook.KindImage:
			list = append(list, responses.ResponseFunctionCallOutputItemUnionParam{OfInputImage: &responses.ResponseInputImageContentParam{ImageURL: param.NewOpt(dataURL(p.MIME, p.Data))}})
		default:
			f := &responses.ResponseInputFileContentParam{FileData: param.NewOpt(dataURL(p.MIME, p.Data))}
			if p.Filename != "" {
				f.Filename = param.NewOpt(p.Filename)
			}
			list = append(list, responses.ResponseFunctionCallOutputItemUnionParam{OfInputFile: f})
		}
	}
	out.Output.OfResponseFunctionCallOutputItemArray = list
	return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: out}
}
