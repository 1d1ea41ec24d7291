package toolcaseino_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	toolcaseino "github.com/toolcas/toolcas/adapters/eino"
	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// An eino agent whose tool returns a big log: the model is sent a pointer,
// then calls the read-back tool for the lines it wants. The model is
// scripted, so the example needs no network and no key.
func Example() {
	ctx := context.Background()
	store := hook.NewMemStore() // or store.Open(ctx, "tool_results", store.WithCreate())
	h, err := hook.New(store, policy.MustStrategies(policy.Default(policy.OverChars(2000))))
	if err != nil {
		log.Fatal(err)
	}

	model := &scriptedModel{next: func(in []*schema.Message) *schema.Message {
		last := in[len(in)-1]
		switch {
		case last.Role == schema.User:
			return callTool("call-1", "fetch_log", map[string]string{"seed": "api"})
		case last.ToolName == "fetch_log":
			return callTool("call-2", hook.ReadToolName, map[string]any{"ref": pointerKeys(last.Content)[0], "pattern": "latency=8[89][0-9]ms"})
		}
		return schema.AssistantMessage("Two slow requests.", nil)
	}}
	agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name: "assistant", Description: "reads logs", Model: model,
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{
			textTool{name: "fetch_log", out: func(seed string) string { return bigLog(seed, 100) }},
		}}},
		// The one line that offloads, and adds the read-back tool:
		Handlers: []adk.ChatModelAgentMiddleware{toolcaseino.MustNew(h, store)},
	})
	if err != nil {
		log.Fatal(err)
	}
	runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent})
	it := runner.Run(ctx, []adk.Message{schema.UserMessage("Any slow requests?")}, toolcaseino.RunOption("run-7"))
	for ev, ok := it.Next(); ok; ev, ok = it.Next() {
		if ev.Err != nil {
			log.Fatal(ev.Err)
		}
	}

	for i, req := range model.requests() {
		last := req[len(req)-1]
		fmt.Printf("request %d ends with a %s message of %d bytes\n", i+1, last.Role, len(toolText(last)))
		if last.Role == schema.Tool {
			text := toolText(last)
			if strings.HasPrefix(text, "Tool result offloaded to") {
				before, _, _ := strings.Cut(text, " Preview:")
				fmt.Println(" ", before)
			} else {
				fmt.Println(" ", strings.ReplaceAll(text, "\n", "\n  "))
			}
		}
	}
	// Output:
	// request 1 ends with a user message of 18 bytes
	// request 2 ends with a tool message of 387 bytes
	//   Tool result offloaded to text (3985 characters) at 'mem://blobs/a4/a4334b9b77965c9051b3c032ed12ab9c7c8895a43a8734b10833d6915a19416d.txt' (key 'run-7/1_fetch_log_call-1.txt').
	// request 3 ends with a tool message of 186 bytes
	//   [run-7/1_fetch_log_call-1.txt: matches 1-2 of 2 lines matching "latency=8[89][0-9]ms", of 100 lines]
	//   25	api line 00024: status=ok latency=888ms
	//   99	api line 00098: status=ok latency=893ms
}

// A Summarizer has an eino chat model write the summaries of
// compact.Summarization: here the old turn of a conversation grown too long
// becomes one summary. The model is scripted, so the example needs no
// network and no key.
func ExampleNewSummarizer() {
	ctx := context.Background()
	chatModel := &scriptedModel{next: func(in []*schema.Message) *schema.Message {
		return schema.AssistantMessage("## Objective\n- How last week's deploy went: fine, after one retry.", nil)
	}}

	s, err := toolcaseino.NewSummarizer(chatModel, model.WithMaxTokens(2048))
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

	for _, req := range chatModel.requests() {
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
