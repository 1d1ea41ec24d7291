package toolcasanthropic_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	toolcasanthropic "github.com/toolcas/toolcas/adapters/anthropic"
	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// A BetaToolRunner whose tool returns a big log: the model is sent a
// pointer, then calls the read-back tool for the lines it wants. The
// Messages API is a scripted local server, so the example needs no network
// and no key.
func Example() {
	ctx := context.Background()
	store := hook.NewMemStore() // or store.Open(ctx, "tool_results", store.WithCreate())
	h, err := hook.New(store, policy.MustStrategies(policy.Default(policy.OverChars(2000))))
	if err != nil {
		log.Fatal(err)
	}
	api := &scriptedAPI{next: func(msgs []message) []map[string]any {
		last := msgs[len(msgs)-1].Content[0]
		switch {
		case len(msgs) == 1:
			return []map[string]any{toolUse("toolu01", "fetch_log", map[string]any{"seed": "api"})}
		case len(msgs) == 3:
			key := pointerKeys(last.resultText())[0]
			return []map[string]any{toolUse("toolu02", hook.ReadToolName, map[string]any{"ref": key, "pattern": "latency=8[89][0-9]ms"})}
		}
		return []map[string]any{text("Two slow requests.")}
	}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("no-key"))

	// The one line that offloads: the Offloader makes the runner.
	off := toolcasanthropic.Must(toolcasanthropic.New(h, store, toolcasanthropic.WithRun("run-7")))
	runner := off.NewToolRunner(&client.Beta.Messages, []anthropic.BetaTool{logTool{100}}, anthropic.BetaToolRunnerParams{
		BetaMessageNewParams: anthropic.BetaMessageNewParams{
			Model: "scripted", MaxTokens: 1024,
			Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("Any slow requests?"))},
		},
		DisableThread: true,
	})
	if _, err := runner.RunToCompletion(ctx); err != nil {
		log.Fatal(err)
	}

	for i, req := range api.requests() {
		for _, b := range req[len(req)-1].Content {
			if b.Type == "tool_result" {
				t, _, _ := strings.Cut(b.resultText(), " Preview:")
				fmt.Printf("request %d, result of %s:\n  %s\n", i+1, b.ToolUseID, strings.ReplaceAll(t, "\n", "\n  "))
			}
		}
	}
	// Output:
	// request 2, result of toolu01:
	//   Tool result offloaded to text (3985 characters) at 'mem://blobs/a4/a4334b9b77965c9051b3c032ed12ab9c7c8895a43a8734b10833d6915a19416d.txt' (key 'run-7/1_fetch_log_toolu01.txt').
	// request 3, result of toolu02:
	//   [run-7/1_fetch_log_toolu01.txt: matches 1-2 of 2 lines matching "latency=8[89][0-9]ms", of 100 lines]
	//   25	api line 00024: status=ok latency=888ms
	//   99	api line 00098: status=ok latency=893ms
}

// A Summarizer has a model of the Messages API write the summaries of
// compact.Summarization: here the old turn of a conversation grown too long
// becomes one summary. The API is a scripted local server, so the example
// needs no network and no key.
func ExampleNewSummarizer() {
	ctx := context.Background()
	api := &scriptedAPI{next: func(msgs []message) []map[string]any {
		return []map[string]any{text("## Objective\n- How last week's deploy went: fine, after one retry.")}
	}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("no-key"))

	s, err := toolcasanthropic.NewSummarizer(client, anthropic.ModelClaudeHaiku4_5)
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

	for _, req := range api.requests() {
		fmt.Printf("the model was sent %d message, from the %s\n", len(req), req[0].Role)
	}
	for _, m := range out {
		fmt.Printf("%s: %s\n", m.Role, m.Text)
	}
	// Output:
	// the model was sent 1 message, from the user
	// system: You check deploys.
	// user: <conversation_summary>
	// ## Objective
	// - How last week's deploy went: fine, after one retry.
	// </conversation_summary>
	// user: And today's?
}
