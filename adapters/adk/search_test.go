package toolcasadk_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/genai"

	toolcasadk "github.com/toolcas/toolcas/adapters/adk"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

// TestReadToolSearch: a model that calls the read tool with a pattern and
// no ref, as its schema allows, gets the matching lines of its session's
// results, never another session's.
func TestReadToolSearch(t *testing.T) {
	ctx := context.Background()
	store := hook.NewMemStore()
	h, err := hook.New(store, policy.MustStrategies(policy.Default(policy.OverChars(2000))))
	if err != nil {
		t.Fatal(err)
	}
	llm := &scriptedLLM{next: func(contents []*genai.Content) *genai.Content {
		last := responses(contents[len(contents)-1])
		switch {
		case len(last) == 0:
			return calls(&genai.FunctionCall{ID: "fc-1", Name: "fetch_log", Args: map[string]any{"seed": userText(contents)}})
		case last[0].Name == "fetch_log":
			return calls(&genai.FunctionCall{ID: "fc-2", Name: hook.ReadToolName,
				Args: map[string]any{"pattern": "LATENCY=8[89][0-9]MS", "ignore_case": true, "tool": "fetch_log"}})
		}
		return answer("done")
	}}
	a, err := llmagent.New(llmagent.Config{Name: "assistant", Description: "reads logs", Model: llm,
		Tools: []tool.Tool{fetchLogTool(100), toolcasadk.MustReadTool(store)}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{AppName: "logs", Agent: a, SessionService: session.InMemoryService(), AutoCreateSession: true,
		PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{toolcasadk.MustPlugin(h)}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ sess, seed string }{{"sess-1", "api"}, {"sess-2", "db"}} {
		for _, err := range r.Run(ctx, "user-1", s.sess, genai.NewContentFromText(s.seed, "user"), agent.RunConfig{}) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	var pages []string
	for _, req := range llm.requests() {
		for _, resp := range responses(req[len(req)-1]) {
			if resp.Name == hook.ReadToolName {
				if e, ok := resp.Response["error"]; ok {
					t.Fatalf("search failed: %v", e)
				}
				pages = append(pages, resp.Response["result"].(string))
			}
		}
	}
	if len(pages) != 2 {
		t.Fatalf("%d search results, want 2: %q", len(pages), pages)
	}
	for i, want := range []string{"sess-1/1_fetch_log_fc-1.log.txt:25:api line 00024: status=ok latency=888ms", "sess-2/1_fetch_log_fc-1.log.txt:"} {
		other := []string{"sess-2/", "sess-1/"}[i]
		if !strings.Contains(pages[i], "\n"+want) || strings.Contains(pages[i], other) {
			t.Errorf("session %d's search =\n%s\nwant a hit %q and nothing of %s", i+1, pages[i], want, other)
		}
	}
}
