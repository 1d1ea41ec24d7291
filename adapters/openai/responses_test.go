package toolcasopenai_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	toolcasopenai "github.com/toolcas/toolcas/adapters/openai"
	"github.com/toolcas/toolcas/hook"
)

// responsesScript drives a whole Responses tool loop: a big log and a
// screenshot, then the read-back tool on every key their pointers name,
// then an answer.
func responsesScript(items []item) []map[string]any {
	var seed string
	_ = json.Unmarshal(items[0].Content, &seed)
	turns := 0
	var outputs []item
	for _, it := range items {
		switch it.Type {
		case "function_call":
			if len(outputs) == 0 || turns == 0 {
				turns++
			}
		case "function_call_output":
			outputs = append(outputs, it)
		}
	}
	calls := 0
	for _, it := range items {
		if it.Type == "function_call" {
			calls++
		}
	}
	switch calls {
	case 0:
		return []map[string]any{functionCall("call_1", "fetch_log", map[string]any{"seed": seed}), functionCall("call_2", "screenshot", map[string]any{})}
	case 2:
		var out []map[string]any
		for _, o := range outputs {
			for _, k := range pointerKeys(o.outputText()) {
				out = append(out, functionCall(fmt.Sprintf("call_%d", 3+len(out)), hook.ReadToolName, map[string]any{"ref": k, "limit": hook.MaxReadLimit}))
			}
		}
		return out
	}
	return []map[string]any{{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": "done", "annotations": []any{}}}}}
}

// responsesLoop is the loop a user of the SDK writes, with AppendOutputs
// in place of append for the function call outputs.
func responsesLoop(ctx context.Context, f *fixture, off *toolcasopenai.Offloader, seed string) error {
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(seed, responses.EasyInputMessageRoleUser)}
	for range 10 {
		resp, err := f.client.Responses.New(ctx, responses.ResponseNewParams{
			Model: "scripted",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
			Tools: []responses.ToolUnionParam{off.ResponsesReadTool()},
		})
		if err != nil {
			return err
		}
		var outputs []responses.ResponseInputItemUnionParam
		for _, it := range resp.Output {
			if it.Type != "function_call" {
				continue
			}
			fc := it.AsFunctionCall()
			p := fc.ToParam()
			input = append(input, responses.ResponseInputItemUnionParam{OfFunctionCall: &p})
			out := &responses.ResponseInputItemFunctionCallOutputParam{CallID: param.NewOpt(fc.CallID)}
			switch fc.Name {
			case off.ReadToolName():
				outputs = append(outputs, off.ReadOutput(ctx, fc.CallID, fc.Arguments))
				continue
			case "fetch_log":
				out.Output.OfString = param.NewOpt(bigLog(seed, logLines))
			case "screenshot":
				out.Output.OfResponseFunctionCallOutputItemArray = responses.ResponseFunctionCallOutputItemListParam{
					{OfInputText: &responses.ResponseInputTextContentParam{Text: "the page as rendered"}},
					{OfInputImage: &responses.ResponseInputImageContentParam{ImageURL: param.NewOpt("data:image/png;base64," + base64.StdEncoding.EncodeToString(pngBytes))}},
				}
			}
			outputs = append(outputs, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: out})
		}
		if len(outputs) == 0 {
			return nil
		}
		if input, err = off.AppendOutputs(ctx, input, outputs...); err != nil {
			return err
		}
	}
	return fmt.Errorf("no answer after 10 turns")
}

func TestResponsesLoop(t *testing.T) {
	f := newFixture(t)
	off := toolcasopenai.Must(toolcasopenai.New(f.hook, f.store, toolcasopenai.WithRun("run-7")))
	if err := responsesLoop(context.Background(), f, off, "s7"); err != nil {
		t.Fatal(err)
	}
	reqs := f.api.responsesRequests()
	if len(reqs) != 3 {
		t.Fatalf("model got %d requests, want 3", len(reqs))
	}
	var keys []string
	for _, it := range reqs[1] {
		if it.Type != "function_call_output" {
			continue
		}
		for _, o := range it.outputItems() {
			if o.Type != "input_text" {
				t.Errorf("output of %s sent the model an %s item", it.CallID, o.Type)
			}
		}
		txt := it.outputText()
		if !strings.HasPrefix(txt, "Tool result offloaded to") || strings.Contains(txt, "line 00150") {
			t.Errorf("output of %s sent the model %.120q, want a pointer", it.CallID, txt)
		}
		keys = append(keys, pointerKeys(txt)...)
	}
	want := []string{
		hook.Key{Run: "run-7", Step: 1, Tool: "fetch_log", CallID: "call_1", Part: -1, Ext: ".txt"}.String(),
		hook.Key{Run: "run-7", Step: 1, Tool: "screenshot", CallID: "call_2", Part: 0, Ext: ".txt"}.String(),
		hook.Key{Run: "run-7", Step: 1, Tool: "screenshot", CallID: "call_2", Part: 1, Ext: ".png"}.String(),
	}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	var reads []item
	for _, it := range reqs[2] {
		if it.Type == "function_call_output" && strings.HasPrefix(it.CallID, "call_") && it.CallID >= "call_3" {
			reads = append(reads, it)
		}
	}
	if len(reads) != 3 {
		t.Fatalf("%d read-back outputs, want 3", len(reads))
	}
	if got, err := unpage(reads[0].outputText()); err != nil || got != bigLog("s7", logLines) {
		t.Errorf("read back the log: %d bytes (%v), want its exact bytes", len(got), err)
	}
	if got, _ := unpage(reads[1].outputText()); got != "the page as rendered" {
		t.Errorf("read back the caption: %q", got)
	}
	var img []byte
	for _, o := range reads[2].outputItems() {
		if rest, ok := strings.CutPrefix(o.ImageURL, "data:image/png;base64,"); ok {
			img, _ = base64.StdEncoding.DecodeString(rest)
		}
	}
	if !bytes.Equal(img, pngBytes) {
		t.Errorf("read back the screenshot: %d image bytes, want its exact %d", len(img), len(pngBytes))
	}
}

func TestAppendOutputsRefusesBadImage(t *testing.T) {
	f := newFixture(t)
	off := toolcasopenai.Must(toolcasopenai.New(f.hook, f.store))
	out := &responses.ResponseInputItemFunctionCallOutputParam{CallID: param.NewOpt("c1"), Name: param.NewOpt("screenshot")}
	out.Output.OfResponseFunctionCallOutputItemArray = responses.ResponseFunctionCallOutputItemListParam{
		{OfInputImage: &responses.ResponseInputImageContentParam{ImageURL: param.NewOpt("data:image/png;base64,not base64!")}},
	}
	in := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("hi", responses.EasyInputMessageRoleUser)}
	got, err := off.AppendOutputs(context.Background(), in, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: out})
	if err == nil || !strings.Contains(err.Error(), "base64") || len(got) != 1 {
		t.Errorf("AppendOutputs(bad image) = %d items, %v; want the input as it was and an error naming the base64", len(got), err)
	}
}

// A file given as file data goes to the store, and the read-back tool
// returns it as the same file data.
func TestAppendOutputsFile(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	off := toolcasopenai.Must(toolcasopenai.New(f.hook, f.store, toolcasopenai.WithRun("run-f")))
	pdf := append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte("stream of a long report\n"), 200)...)
	in := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("hi", responses.EasyInputMessageRoleUser),
		{OfFunctionCall: &responses.ResponseFunctionToolCallParam{CallID: "c1", Name: "fetch_report", Arguments: "{}"}},
	}
	out := &responses.ResponseInputItemFunctionCallOutputParam{CallID: param.NewOpt("c1")}
	out.Output.OfResponseFunctionCallOutputItemArray = responses.ResponseFunctionCallOutputItemListParam{
		{OfInputFile: &responses.ResponseInputFileContentParam{Filename: param.NewOpt("q3.pdf"), FileData: param.NewOpt("data:application/pdf;base64," + base64.StdEncoding.EncodeToString(pdf))}},
	}
	got, err := off.AppendOutputs(ctx, in, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: out})
	if err != nil {
		t.Fatal(err)
	}
	ptr := got[2].OfFunctionCallOutput.Output.OfString.Value
	if !strings.HasPrefix(ptr, "Tool result offloaded to application/pdf named 'q3.pdf'") {
		t.Fatalf("output became %.120q, want a pointer to the PDF", ptr)
	}
	back := off.ReadOutput(ctx, "c2", `{"ref": "`+pointerKeys(ptr)[0]+`"}`)
	items := back.OfFunctionCallOutput.Output.OfResponseFunctionCallOutputItemArray
	if len(items) != 2 || items[1].OfInputFile == nil {
		t.Fatalf("read back %+v, want a header and a file", items)
	}
	data, _ := strings.CutPrefix(items[1].OfInputFile.FileData.Value, "data:application/pdf;base64,")
	if b, _ := base64.StdEncoding.DecodeString(data); !bytes.Equal(b, pdf) || items[1].OfInputFile.Filename.Value != "q3.pdf" {
		t.Errorf("read back %d bytes named %q, want the PDF's exact %d named q3.pdf", len(b), items[1].OfInputFile.Filename.Value, len(pdf))
	}
}
