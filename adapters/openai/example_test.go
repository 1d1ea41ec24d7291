package toolcasopenai_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	toolcasopenai "github.com/toolcas/toolcas/adapters/openai"
	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// A Chat Completions tool loop whose tool returns a big log: the model is
// sent a pointer, then calls the read-back tool for the lines it wants. The
// API is a scripted local server, so the example needs no network and no
// key.
func Example() {
	ctx := context.Background()
	store := hook.NewMemStore() // or store.Open(ctx, "tool_results", store.WithCreate())
	h, err := hook.New(store, policy.MustStrategies(policy.Default(policy.OverChars(2000))))
	if err != nil {
		log.Fatal(err)
	}
	api := &scriptedAPI{chat: func(msgs []chatMessage) map[string]any {
		switch len(msgs) {
		case 1:
			return map[string]any{"role": "assistant", "tool_calls": []any{toolCall("call-1", "fetch_log", map[string]any{})}}
		case 3:
			key := pointerKeys(msgs[2].text())[0]
			return map[string]any{"role": "assistant", "tool_calls": []any{toolCall("call-2", hook.ReadToolName, map[string]any{"ref": key, "pattern": "latency=8[89][0-9]ms"})}}
		}
		return map[string]any{"role": "assistant", "content": "Two slow requests."}
	}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("no-key"))

	off := toolcasopenai.Must(toolcasopenai.New(h, store, toolcasopenai.WithRun("run-7")))
	params := openai.ChatCompletionNewParams{
		Model:    "scripted",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Any slow requests?")},
		Tools:    []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "fetch_log"}), off.ReadTool()},
	}
	for {
		c, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			log.Fatal(err)
		}
		msg := c.Choices[0].Message
		params.Messages = append(params.Messages, msg.ToParam())
		if len(msg.ToolCalls) == 0 {
			break
		}
		var answers []openai.ChatCompletionMessageParamUnion
		for _, tc := range msg.ToolCalls {
			if tc.Function.Name == off.ReadToolName() {
				answers = append(answers, off.ReadMessage(ctx, tc.ID, tc.Function.Arguments))
			} else {
				answers = append(answers, openai.ToolMessage(bigLog("api", 100), tc.ID))
			}
		}
		// The one line that offloads: Append in place of append.
		if params.Messages, err = off.Append(ctx, params.Messages, answers...); err != nil {
			log.Fatal(err)
		}
	}

	for i, req := range api.chatRequests() {
		if last := req[len(req)-1]; last.Role == "tool" {
			t, _, _ := strings.Cut(last.text(), " Preview:")
			fmt.Printf("request %d, result of %s:\n  %s\n", i+1, last.ToolCallID, strings.ReplaceAll(t, "\n", "\n  "))
		}
	}
	// Output:
	// request 2, result of call-1:
	//   Tool result offloaded to text (3985 characters) at 'mem://blobs/a4/a4334b9b77965c9051b3c032ed12ab9c7c8895a43a8734b10833d6915a19416d.txt' (key 'run-7/1_fetch_log_call-1.txt').
	// request 3, result of call-2:
	//   [run-7/1_fetch_log_call-1.txt: matches 1-2 of 2 lines matching "latency=8[89][0-9]ms", of 100 lines]
	//   25	api line 00024: status=ok latency=888ms
	//   99	api line 00098: status=ok latency=893ms
}

// A Summarizer has a Chat Completions model write the summaries of
// compact.Summarization: here the old turn of a conversation grown too long
// becomes one summary. The API is a scripted local server, so the example
// needs no network and no key.
func ExampleNewSummarizer() {
	ctx := context.Background()
	api := &scriptedAPI{chat: func(msgs []chatMessage) map[string]any {
		return map[string]any{"role": "assistant", "content": "## Objective\n- How last week's deploy went: fine, after one retry."}
	}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("no-key"))

	s, err := toolcasopenai.NewSummarizer(client, openai.ChatModelGPT5_4Mini)
	if err != nil {
		log.Fatal(err)
	}
	c, err := compact.NewSummarization(s, compact.SummarizationOptions{})
	if err != nil {
		log.Fatal(err)
	}
	msgs := []compact.Message{
		{Role: compact.RoleSystem, Text: "You check deploys."},
		{Role: compact.RoleUser, Text: "How did last week's deploy go?"},
		{Role: compact.RoleAssistant, Text: "Fine, after one retry. " + strings.Repeat("Step ok. ", 100)},
		{Role: compact.RoleUser, Text: "And today's?"},
	}
	out, _, err := c.Compact(ctx, msgs, 100, compact.Approximate())
	if err != nil {
		log.Fatal(err)
	}

	for _, req := range api.chatRequests() {
		fmt.Printf("the model was sent: %s, %s\n", req[0].Role, req[1].Role)
	}
	for _, m := range out {
		fmt.Printf("%s: %s\n", m.Role, m.Text)
	}
	// Output:
	// the model was sent: system, user
	// system: You check deploys.
	// user: <conversation_summary>
	// ## Objective
	// - How last week's deploy went: fine, after one retry.
	// </conversation_summary>
	// user: And today's?
}
