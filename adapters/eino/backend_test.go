package toolcaseino_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/adk/middlewares/reduction"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	toolcaseino "github.com/toolcas/toolcas/adapters/eino"
	"github.com/toolcas/toolcas/store"
)

var savedTo = regexp.MustCompile(`Full output saved to: (\S+)`)

// eino's own reduction middleware truncates a big result and offloads it to
// the toolcas backend; the model reads it back through the backend's
// read_file tool, byte for byte.
func TestReductionBackend(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), store.WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := toolcaseino.NewBackend(st)
	if err != nil {
		t.Fatal(err)
	}
	red, err := reduction.New(ctx, &reduction.Config{Backend: b, SkipClear: true, MaxLengthForTrunc: 2000, RootDir: "/offload",
		TruncExcludeTools: []string{"read_file"}})
	if err != nil {
		t.Fatal(err)
	}
	m := &scriptedModel{next: func(in []*schema.Message) *schema.Message {
		last := in[len(in)-1]
		switch {
		case last.Role == schema.User:
			return callTool("call-1", "fetch_log", map[string]string{"seed": "r"})
		case last.ToolName == "fetch_log":
			path := savedTo.FindStringSubmatch(last.Content)
			if path == nil {
				return schema.AssistantMessage("no path in the notice", nil)
			}
			return callTool("call-2", "read_file", map[string]any{"file_path": path[1], "limit": 2000})
		}
		return schema.AssistantMessage("done", nil)
	}}
	agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name: "assistant", Description: "reads logs", Model: m,
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{
			textTool{name: "fetch_log", out: func(seed string) string { return bigLog(seed, logLines) }},
			b.ReadFileTool(""),
		}}},
		Handlers: []adk.ChatModelAgentMiddleware{red},
	})
	if err != nil {
		t.Fatal(err)
	}
	it := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent}).Run(ctx, []adk.Message{schema.UserMessage("r")}, toolcaseino.RunOption("run-3"))
	for ev, ok := it.Next(); ok; ev, ok = it.Next() {
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
	}
	reqs := m.requests()
	if len(reqs) != 3 {
		t.Fatalf("model got %d requests, want 3", len(reqs))
	}
	want := bigLog("r", logLines)
	notice := reqs[1][len(reqs[1])-1].Content
	if !strings.Contains(notice, "/offload/trunc/call-1") || strings.Contains(notice, "line 00150") {
		t.Errorf("model was sent %.300q, want the truncation notice without the middle of the log", notice)
	}
	got, err := unpage(reqs[2][len(reqs[2])-1].Content)
	if err != nil || got != want {
		t.Errorf("read_file sent the model %d bytes (%v), want the log's exact %d", len(got), err, len(want))
	}
	c, err := st.Read(ctx, "run-3", b.Key("run-3", "/offload/trunc/call-1").String())
	if err != nil || string(c.Data) != want {
		t.Errorf("store holds %v (%v), want the log under the run's key", c, err)
	}
}

func TestReductionBackendRefusals(t *testing.T) {
	ctx := context.Background()
	if _, err := toolcaseino.NewBackend(nil); err == nil {
		t.Error("NewBackend(nil) succeeded")
	}
	st, err := store.Open(ctx, t.TempDir(), store.WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, _ := toolcaseino.NewBackend(st)
	rf := b.ReadFileTool("")
	for _, tc := range []struct{ args, want string }{
		{`{"file_path": "/offload/trunc/none"}`, "no such file was offloaded in this run"},
		{`{}`, "no file_path"},
		{`[1]`, "arguments are not"},
	} {
		got, err := rf.InvokableRun(ctx, tc.args)
		if err != nil || !strings.Contains(got, tc.want) {
			t.Errorf("read_file %s = %q, %v; want a result saying %q", tc.args, got, err, tc.want)
		}
	}
}
