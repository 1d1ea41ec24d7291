package toolcaseino_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	toolcaseino "github.com/toolcas/toolcas/adapters/eino"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
)

const logLines = 300

// loopScript drives a whole agent loop: three tools whose results are big
// (a log, the same log streamed, a screenshot), then the read-back tool on
// every key their pointers name, then an answer.
func loopScript(in []*schema.Message) *schema.Message {
	var seed string
	for _, m := range in {
		if m.Role == schema.User {
			seed = m.Content
		}
	}
	last := in[len(in)-1]
	switch {
	case last.Role == schema.User:
		msg := callTool("call-1", "fetch_log", map[string]string{"seed": seed})
		msg.ToolCalls = append(msg.ToolCalls,
			callTool("call-2", "stream_log", map[string]string{"seed": seed}).ToolCalls[0],
			callTool("call-3", "screenshot", map[string]string{}).ToolCalls[0])
		return msg
	case last.Role == schema.Tool && last.ToolName != hook.ReadToolName:
		msg := schema.AssistantMessage("", nil)
		for _, m := range tail(in) {
			for _, k := range pointerKeys(toolText(m)) {
				args := map[string]any{"ref": k}
				if strings.HasSuffix(k, ".txt") {
					args["limit"] = hook.MaxReadLimit
				}
				msg.ToolCalls = append(msg.ToolCalls, callTool(fmt.Sprintf("read-%d", len(msg.ToolCalls)+1), hook.ReadToolName, args).ToolCalls[0])
			}
		}
		return msg
	}
	return schema.AssistantMessage("done", nil)
}

type fixture struct {
	model *scriptedModel
	mw    *toolcaseino.Middleware
	store *store.Store
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir(), store.WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hook.New(st, policy.MustStrategies(
		policy.ForGroup([]string{"screenshot", "stream_shot"}, policy.Always),
		policy.Default(policy.OverChars(2000))))
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{model: &scriptedModel{next: loopScript}, mw: toolcaseino.MustNew(h, st), store: st}
}

// run runs an agent on one user message and returns the error any event
// carried. Each run has an agent of its own, as eino v0.9.13's
// ChatModelAgent is not safe for concurrent runs (the race detector finds
// its Run writing shared state); the model, the middleware, the hook and the
// store are shared.
func (f *fixture) run(ctx context.Context, seed string, opts ...adk.AgentRunOption) error {
	log := textTool{name: "fetch_log", out: func(seed string) string { return bigLog(seed, logLines) }}
	agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name:        "assistant",
		Description: "reads logs",
		Model:       f.model,
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{
			log, streamTool{textTool{name: "stream_log", out: log.out}}, screenshotTool{},
		}}},
		Handlers: []adk.ChatModelAgentMiddleware{f.mw},
	})
	if err != nil {
		return err
	}
	it := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent}).Run(ctx, []adk.Message{schema.UserMessage(seed)}, opts...)
	for {
		ev, ok := it.Next()
		if !ok {
			return nil
		}
		if ev.Err != nil {
			return ev.Err
		}
	}
}

// checkRun asserts what the model was sent in the run of one seed: after
// the tools, pointers and never the big results; after the read-back tool,
// the exact bytes. It returns the keys the pointers named.
func checkRun(t *testing.T, reqs [][]*schema.Message, seed string) []string {
	t.Helper()
	var mine [][]*schema.Message
	for _, r := range reqs {
		for _, m := range r {
			if m.Role == schema.User && m.Content == seed {
				mine = append(mine, r)
				break
			}
		}
	}
	if len(mine) != 3 {
		t.Fatalf("run %s: model got %d requests, want 3 (tools, read back, answer)", seed, len(mine))
	}
	want := bigLog(seed, logLines)
	var keys []string
	for _, m := range tail(mine[1]) {
		text := toolText(m)
		if !strings.HasPrefix(text, "Tool result offloaded to") {
			t.Errorf("run %s: %s result sent to the model is not a pointer: %.120q", seed, m.ToolName, text)
		}
		if strings.Contains(text, "line 00150") || len(text) > 2000 {
			t.Errorf("run %s: %s result sent to the model carries the big result (%d bytes)", seed, m.ToolName, len(text))
		}
		if imgs := toolImages(m); len(imgs) > 0 {
			t.Errorf("run %s: %s result sent to the model carries %d images", seed, m.ToolName, len(imgs))
		}
		keys = append(keys, pointerKeys(text)...)
	}
	reads := tail(mine[2])
	if len(reads) != len(keys) || len(keys) != 4 {
		t.Fatalf("run %s: %d read-back results for keys %q, want 4", seed, len(reads), keys)
	}
	for i, m := range reads {
		switch k := keys[i]; {
		case strings.HasSuffix(k, ".png"):
			if imgs := toolImages(m); len(imgs) != 1 || !bytes.Equal(imgs[0], pngBytes) {
				t.Errorf("run %s: read back %s: images %v, want the screenshot's %d bytes", seed, k, imgs, len(pngBytes))
			}
		case strings.Contains(k, "_log_"):
			got, err := unpage(toolText(m))
			if err != nil {
				t.Errorf("run %s: read back %s: %v", seed, k, err)
			} else if got != want {
				t.Errorf("run %s: read back %s: %d bytes, want the tool's exact %d bytes", seed, k, len(got), len(want))
			}
		default:
			if got, _ := unpage(toolText(m)); got != "the page as rendered" {
				t.Errorf("run %s: read back %s = %q", seed, k, got)
			}
		}
	}
	return keys
}

// tail returns the tool messages that end a request.
func tail(req []*schema.Message) []*schema.Message {
	i := len(req)
	for i > 0 && req[i-1].Role == schema.Tool {
		i--
	}
	return req[i:]
}

func TestAgentLoop(t *testing.T) {
	f := newFixture(t)
	if err := f.run(context.Background(), "s7", toolcaseino.RunOption("run-7")); err != nil {
		t.Fatal(err)
	}
	keys := checkRun(t, f.model.requests(), "s7")
	want := []string{"run-7/1_fetch_log_call-1.txt", "run-7/1_stream_log_call-2.txt", "run-7/1_screenshot_call-3_0.txt", "run-7/1_screenshot_call-3_1.png"}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("keys = %q, want %q", keys, want)
	}
}

// Concurrent runs share one middleware, one model and one store on disk;
// each sees only its own results, named runs and runs named by the
// middleware alike.
func TestConcurrentRuns(t *testing.T) {
	f := newFixture(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			var opts []adk.AgentRunOption
			if i%2 == 0 {
				opts = append(opts, toolcaseino.RunOption(fmt.Sprintf("run-%d", i)))
			}
			errs[i] = f.run(context.Background(), fmt.Sprintf("s%d", i), opts...)
		})
	}
	wg.Wait()
	runs := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		keys := checkRun(t, f.model.requests(), fmt.Sprintf("s%d", i))
		run, _, _ := strings.Cut(keys[0], "/")
		if i%2 == 0 && run != fmt.Sprintf("run-%d", i) || i%2 == 1 && !strings.HasPrefix(run, "eino-") {
			t.Errorf("run %d offloaded under %q", i, run)
		}
		runs[run] = true
	}
	if len(runs) != n {
		t.Errorf("%d distinct runs, want %d", len(runs), n)
	}
}

func TestBadRunName(t *testing.T) {
	f := newFixture(t)
	err := f.run(context.Background(), "s1", toolcaseino.RunOption("bad\x00run"))
	if err == nil || !strings.Contains(err.Error(), toolcaseino.RunKey) {
		t.Fatalf("run name with NUL: err = %v, want an error naming %s", err, toolcaseino.RunKey)
	}
}

// A multimodal result streamed in chunks is collected, offloaded part by
// part, and read back byte for byte.
func TestEnhancedStreamable(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.model.next = func(in []*schema.Message) *schema.Message {
		last := in[len(in)-1]
		switch {
		case last.Role == schema.User:
			return callTool("call-1", "stream_shot", map[string]string{})
		case last.ToolName == "stream_shot":
			msg := schema.AssistantMessage("", nil)
			for i, k := range pointerKeys(toolText(last)) {
				msg.ToolCalls = append(msg.ToolCalls, callTool(fmt.Sprintf("read-%d", i), hook.ReadToolName, map[string]string{"ref": k}).ToolCalls[0])
			}
			return msg
		}
		return schema.AssistantMessage("done", nil)
	}
	agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name: "assistant", Description: "looks", Model: f.model,
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{streamShotTool{}}}},
		Handlers:    []adk.ChatModelAgentMiddleware{f.mw},
	})
	if err != nil {
		t.Fatal(err)
	}
	it := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent}).Run(ctx, []adk.Message{schema.UserMessage("look")}, toolcaseino.RunOption("run-s"))
	for ev, ok := it.Next(); ok; ev, ok = it.Next() {
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
	}
	reqs := f.model.requests()
	if len(reqs) != 3 {
		last := reqs[len(reqs)-1][len(reqs[len(reqs)-1])-1]
		t.Fatalf("model got %d requests, want 3; the last ended with %s %s %.200q", len(reqs), last.Role, last.ToolName, toolText(last))
	}
	ptr := reqs[1][len(reqs[1])-1]
	if imgs := toolImages(ptr); len(imgs) > 0 || !strings.HasPrefix(toolText(ptr), "Tool result offloaded to 2 files") {
		t.Errorf("model was sent %q and %d images, want a pointer to 2 files", toolText(ptr), len(imgs))
	}
	reads := tail(reqs[2])
	if len(reads) != 2 {
		t.Fatalf("%d read-back results, want 2", len(reads))
	}
	if got, _ := unpage(toolText(reads[0])); got != "the page as rendered" {
		t.Errorf("read back the caption: %q", got)
	}
	if imgs := toolImages(reads[1]); len(imgs) != 1 || !bytes.Equal(imgs[0], pngBytes) {
		t.Errorf("read back the image: %d images, want the screenshot's bytes", len(imgs))
	}
}
