package toolcasadk_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/genai"

	toolcasadk "github.com/toolcas/toolcas/adapters/adk"
	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// An adk-go agent whose tool returns a big log in its result map: the model
// is sent a pointer in place of the log, then calls the read-back tool for
// the lines it wants. The model is scripted, so the example needs no
// network and no key.
func Example() {
	ctx := context.Background()
	store := hook.NewMemStore() // or store.Open(ctx, "tool_results", store.WithCreate())
	h, err := hook.New(store, policy.MustStrategies(policy.Default(policy.OverChars(2000))))
	if err != nil {
		log.Fatal(err)
	}
	llm := &scriptedLLM{next: func(contents []*genai.Content) *genai.Content {
		last := responses(contents[len(contents)-1])
		switch {
		case len(last) == 0:
			return calls(&genai.FunctionCall{ID: "fc-1", Name: "fetch_log", Args: map[string]any{"seed": "api"}})
		case last[0].Name == "fetch_log":
			key := pointerKey(last[0].Response["log"].(string))
			return calls(&genai.FunctionCall{ID: "fc-2", Name: hook.ReadToolName, Args: map[string]any{"ref": key, "pattern": "latency=8[89][0-9]ms"}})
		}
		return answer("Two slow requests.")
	}}
	a, err := llmagent.New(llmagent.Config{
		Name: "assistant", Description: "reads logs", Model: llm,
		Tools: []tool.Tool{fetchLogTool(100), toolcasadk.MustReadTool(store)},
	})
	if err != nil {
		log.Fatal(err)
	}
	r, err := runner.New(runner.Config{
		AppName: "logs", Agent: a, SessionService: session.InMemoryService(), AutoCreateSession: true,
		// The one line that offloads every tool result of the runner's agents:
		PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{toolcasadk.MustPlugin(h)}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, err := range r.Run(ctx, "user-1", "sess-7", genai.NewContentFromText("Any slow requests?", "user"), agent.RunConfig{}) {
		if err != nil {
			log.Fatal(err)
		}
	}

	for i, req := range llm.requests() {
		for _, resp := range responses(req[len(req)-1]) {
			fmt.Printf("request %d: %s returned\n", i+1, resp.Name)
			for _, k := range []string{"log", "status", "result"} {
				if v, ok := resp.Response[k].(string); ok {
					v, _, _ = strings.Cut(v, " Preview:")
					fmt.Printf("  %s: %s\n", k, strings.ReplaceAll(v, "\n", "\n    "))
				}
			}
		}
	}
	// Output:
	// request 2: fetch_log returned
	//   log: Tool result offloaded to text (3985 characters) at 'mem://blobs/a4/a4334b9b77965c9051b3c032ed12ab9c7c8895a43a8734b10833d6915a19416d.txt' (key 'sess-7/1_fetch_log_fc-1.log.txt').
	//   status: ok
	// request 3: read_tool_result returned
	//   result: [sess-7/1_fetch_log_fc-1.log.txt: matches 1-2 of 2 lines matching "latency=8[89][0-9]ms", of 100 lines]
	//     25	api line 00024: status=ok latency=888ms
	//     99	api line 00098: status=ok latency=893ms
}

// A Summarizer has an adk-go model write the summaries of
// compact.Summarization: here the old turn of a conversation grown too long
// becomes one summary. The model is scripted, so the example needs no
// network and no key.
func ExampleNewSummarizer() {
	ctx := context.Background()
	llm := &scriptedLLM{next: func(contents []*genai.Content) *genai.Content {
		return answer("## Objective\n- How last week's deploy went: fine, after one retry.")
	}}

	s, err := toolcasadk.NewSummarizer(llm, &genai.GenerateContentConfig{MaxOutputTokens: 2048})
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

	for _, req := range llm.requests() {
		fmt.Printf("the model was sent %d content, from the %s\n", len(req), req[0].Role)
	}
	for _, m := range out {
		fmt.Printf("%s: %s\n", m.Role, m.Text)
	}
	// Output:
	// the model was sent 1 content, from the user
	// system: You check deploys.
	// user: <conversation_summary>
	// ## Objective
	// - How last week's deploy went: fine, after one retry.
	// </conversation_summary>
	// user: And today's?
}
