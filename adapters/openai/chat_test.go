package toolcasopenai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	toolcasopenai "github.com/toolcas/toolcas/adapters/openai"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
)

const logLines = 300

// chatScript drives a whole Chat Completions tool loop: a big log, then the
// read-back tool on its pointer, then an answer.
func chatScript(msgs []chatMessage) map[string]any {
	seed := msgs[0].text()
	turns := 0
	for _, m := range msgs {
		if m.Role == "assistant" {
			turns++
		}
	}
	switch turns {
	case 0:
		return map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{toolCall("call_1", "fetch_log", map[string]any{"seed": seed})}}
	case 1:
		keys := pointerKeys(msgs[len(msgs)-1].text())
		if len(keys) == 0 {
			return map[string]any{"role": "assistant", "content": "no pointer"}
		}
		return map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{toolCall("call_2", hook.ReadToolName, map[string]any{"ref": keys[0], "limit": hook.MaxReadLimit})}}
	}
	return map[string]any{"role": "assistant", "content": "done"}
}

type fixture struct {
	api    *scriptedAPI
	client openai.Client
	hook   *hook.Hook
	store  *store.Store
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir(), store.WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hook.New(st, policy.MustStrategies(policy.For("screenshot", policy.Always), policy.Default(policy.OverChars(2000))))
	if err != nil {
		t.Fatal(err)
	}
	api := &scriptedAPI{chat: chatScript, responses: responsesScript}
	return &fixture{api: api, client: newClient(t, api), hook: h, store: st}
}

// chatLoop is the loop a user of the SDK writes, with Append in place of
// append for the tool messages.
func chatLoop(ctx context.Context, client openai.Client, off *toolcasopenai.Offloader, seed string) error {
	params := openai.ChatCompletionNewParams{
		Model:    "scripted",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(seed)},
		Tools: []openai.ChatCompletionToolUnionParam{
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "fetch_log"}),
			off.ReadTool(),
		},
	}
	for range 10 {
		c, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			return err
		}
		msg := c.Choices[0].Message
		params.Messages = append(params.Messages, msg.ToParam())
		if len(msg.ToolCalls) == 0 {
			return nil
		}
		var answers []openai.ChatCompletionMessageParamUnion
		for _, tc := range msg.ToolCalls {
			if tc.Function.Name == off.ReadToolName() {
				answers = append(answers, off.ReadMessage(ctx, tc.ID, tc.Function.Arguments))
				continue
			}
			var a struct{ Seed string }
			if err := json.Unmarshal([]byte(tc.Function.Arguments), &a); err != nil {
				return err
			}
			answers = append(answers, openai.ToolMessage(bigLog(a.Seed, logLines), tc.ID))
		}
		if params.Messages, err = off.Append(ctx, params.Messages, answers...); err != nil {
			return err
		}
	}
	return fmt.Errorf("no answer after 10 turns")
}

// checkChat asserts what the model was sent in one run: the pointer, never
// the log; then the log's exact bytes from the read-back tool.
func checkChat(t *testing.T, reqs [][]chatMessage, seed string) string {
	t.Helper()
	var mine [][]chatMessage
	for _, r := range reqs {
		if r[0].text() == seed {
			mine = append(mine, r)
		}
	}
	if len(mine) != 3 {
		t.Fatalf("run %s: model got %d requests, want 3", seed, len(mine))
	}
	ptr := mine[1][len(mine[1])-1]
	if ptr.Role != "tool" || !strings.HasPrefix(ptr.text(), "Tool result offloaded to") || strings.Contains(ptr.text(), "line 00150") {
		t.Errorf("run %s: model was sent %s %.120q, want a pointer", seed, ptr.Role, ptr.text())
	}
	read := mine[2][len(mine[2])-1]
	if got, err := unpage(read.text()); err != nil || got != bigLog(seed, logLines) {
		t.Errorf("run %s: read back %d bytes (%v), want the log's exact bytes", seed, len(got), err)
	}
	return pointerKeys(ptr.text())[0]
}

func TestChatLoop(t *testing.T) {
	f := newFixture(t)
	off := toolcasopenai.Must(toolcasopenai.New(f.hook, f.store, toolcasopenai.WithRun("run-7")))
	if err := chatLoop(context.Background(), f.client, off, "s7"); err != nil {
		t.Fatal(err)
	}
	key := checkChat(t, f.api.chatRequests(), "s7")
	if want := (hook.Key{Run: "run-7", Step: 1, Tool: "fetch_log", CallID: "call_1", Part: -1, Ext: ".txt"}).String(); key != want {
		t.Errorf("key %s, want %s", key, want)
	}
}

func TestChatConcurrentRuns(t *testing.T) {
	f := newFixture(t)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			off, err := toolcasopenai.New(f.hook, f.store, toolcasopenai.WithRun(fmt.Sprintf("run-%d", i)))
			if err == nil {
				err = chatLoop(context.Background(), f.client, off, fmt.Sprintf("s%d", i))
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		key := checkChat(t, f.api.chatRequests(), fmt.Sprintf("s%d", i))
		if !strings.HasPrefix(key, fmt.Sprintf("run-%d/1_fetch_log_", i)) {
			t.Errorf("run %d: key %s", i, key)
		}
	}
}

// Small results, messages that are not tool messages, and the read-back
// tool's own results are appended as they are.
func TestAppendLeavesTheRest(t *testing.T) {
	f := newFixture(t)
	off := toolcasopenai.Must(toolcasopenai.New(f.hook, f.store))
	asst := openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ChatCompletionMessageToolCallUnion{}}
	_ = json.Unmarshal([]byte(`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_time","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"`+hook.ReadToolName+`","arguments":"{}"}}]}`), &asst)
	history := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi"), asst.ToParam()}
	big := strings.Repeat("x", 5000)
	got, err := off.Append(context.Background(), history, openai.ToolMessage("12:00", "c1"), openai.ToolMessage(big, "c2"), openai.UserMessage(big))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("%d messages, want 5", len(got))
	}
	if got[2].OfTool.Content.OfString.Value != "12:00" || got[3].OfTool.Content.OfString.Value != big || got[4].OfUser == nil {
		t.Errorf("Append rewrote what it should leave: %+v", got[2:])
	}
}
