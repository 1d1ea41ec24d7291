package toolcasanthropic_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	toolcasanthropic "github.com/toolcas/toolcas/adapters/anthropic"
	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/compact/summarizertest"
)

// replyAPI stands in for the Messages API with one fixed answer, a status
// and a JSON body, and records the path and body of every request.
type replyAPI struct {
	status int
	body   any

	mu    sync.Mutex
	paths []string
	sent  []map[string]any
}

func (a *replyAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.paths = append(a.paths, r.Method+" "+r.URL.Path)
	a.sent = append(a.sent, body)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_ = json.NewEncoder(w).Encode(a.body)
}

func (a *replyAPI) requests() []map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]map[string]any(nil), a.sent...)
}

func replying(status int, body any) *replyAPI { return &replyAPI{status: status, body: body} }

// reply is a Messages API answer.
func reply(stop string, content ...map[string]any) map[string]any {
	if content == nil {
		content = []map[string]any{}
	}
	return map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "scripted",
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1}}
}

// apiError is the body of a Messages API error.
func apiError(kind, msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": msg}}
}

func summarizer(t *testing.T, api *replyAPI, opts ...toolcasanthropic.SummarizerOption) *toolcasanthropic.Summarizer {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("no-key"), option.WithMaxRetries(0))
	s, err := toolcasanthropic.NewSummarizer(client, "claude-test", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// prompt is a prompt as compact.Summarization writes one.
func prompt(instruction, transcript string) []compact.Message {
	return []compact.Message{{Role: compact.RoleSystem, Text: instruction}, {Role: compact.RoleUser, Text: transcript}}
}

func textBlock(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func TestSummarizerRequest(t *testing.T) {
	ctx := context.Background()
	summary := "## Objective\n- find the slow requests"
	t.Run("default", func(t *testing.T) {
		// Text blocks are joined; thinking is left out.
		api := replying(http.StatusOK, reply("end_turn", map[string]any{"type": "thinking", "thinking": "hmm", "signature": "sig"},
			text("## Objective\n"), text("- find the slow requests")))
		got, err := summarizer(t, api).Summarize(ctx, prompt("Summarize.", "user: hi\nassistant: hello"))
		if err != nil {
			t.Fatal(err)
		}
		if got != summary {
			t.Errorf("reply %q, want %q", got, summary)
		}
		if !reflect.DeepEqual(api.paths, []string{"POST /v1/messages"}) {
			t.Errorf("requests %v, want one POST /v1/messages", api.paths)
		}
		want := map[string]any{"model": "claude-test", "max_tokens": 2048.0,
			"system":   []any{textBlock("Summarize.")},
			"messages": []any{map[string]any{"role": "user", "content": []any{textBlock("user: hi\nassistant: hello")}}},
		}
		if reqs := api.requests(); len(reqs) != 1 || !reflect.DeepEqual(reqs[0], want) {
			t.Errorf("request\n%v\nwant\n%v", reqs, want)
		}
	})
	t.Run("with max tokens and params", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			opts []toolcasanthropic.SummarizerOption
			max  float64
			stop bool
		}{
			{"max tokens", []toolcasanthropic.SummarizerOption{toolcasanthropic.WithMaxTokens(512)}, 512, false},
			{"params keep max tokens", []toolcasanthropic.SummarizerOption{toolcasanthropic.WithMaxTokens(512),
				toolcasanthropic.WithMessageParams(anthropic.MessageNewParams{StopSequences: []string{"</summary>"}})}, 512, true},
			{"params set max tokens", []toolcasanthropic.SummarizerOption{
				toolcasanthropic.WithMessageParams(anthropic.MessageNewParams{StopSequences: []string{"</summary>"}, MaxTokens: 900, Model: "ignored",
					System: []anthropic.TextBlockParam{{Text: "ignored"}}})}, 900, true},
		} {
			api := replying(http.StatusOK, reply("end_turn", text(summary)))
			if _, err := summarizer(t, api, tc.opts...).Summarize(ctx, prompt("Summarize.", "transcript")); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"model": "claude-test", "max_tokens": tc.max,
				"system":   []any{textBlock("Summarize.")},
				"messages": []any{map[string]any{"role": "user", "content": []any{textBlock("transcript")}}},
			}
			if tc.stop {
				want["stop_sequences"] = []any{"</summary>"}
			}
			if reqs := api.requests(); len(reqs) != 1 || !reflect.DeepEqual(reqs[0], want) {
				t.Errorf("%s: request\n%v\nwant\n%v", tc.name, reqs, want)
			}
		}
	})
	t.Run("any plain conversation", func(t *testing.T) {
		api := replying(http.StatusOK, reply("end_turn", text(summary)))
		msgs := []compact.Message{
			{Role: compact.RoleSystem, Text: "rules"}, {Role: compact.RoleUser, Text: "q1"}, {Role: compact.RoleUser, Text: "q1 again"},
			{Role: compact.RoleAssistant, Text: "a1"}, {Role: compact.RoleSystem, Text: "more rules"}, {Role: compact.RoleUser, Text: ""},
			{Role: compact.RoleUser, Text: "q2"},
		}
		if _, err := summarizer(t, api).Summarize(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		req := api.requests()[0]
		if want := []any{textBlock("rules"), textBlock("more rules")}; !reflect.DeepEqual(req["system"], want) {
			t.Errorf("system %v, want %v", req["system"], want)
		}
		want := []any{
			map[string]any{"role": "user", "content": []any{textBlock("q1"), textBlock("q1 again")}},
			map[string]any{"role": "assistant", "content": []any{textBlock("a1")}},
			map[string]any{"role": "user", "content": []any{textBlock("q2")}},
		}
		if !reflect.DeepEqual(req["messages"], want) {
			t.Errorf("messages\n%v\nwant\n%v", req["messages"], want)
		}
	})
}

func TestSummarizerErrors(t *testing.T) {
	ok := reply("end_turn", text("a summary"))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		api    *replyAPI
		ctx    context.Context
		prompt []compact.Message
		want   string // in the error
		sent   int    // requests the API gets
	}{
		{name: "server error", api: replying(http.StatusInternalServerError, apiError("api_error", "Internal server error")), want: "500 Internal Server Error", sent: 1},
		{name: "bad request", api: replying(http.StatusBadRequest, apiError("invalid_request_error", "model: claude-test is not a model")), want: "claude-test is not a model", sent: 1},
		{name: "no content", api: replying(http.StatusOK, reply("end_turn")), want: `no text (stop reason "end_turn")`, sent: 1},
		{name: "blank text", api: replying(http.StatusOK, reply("end_turn", text(" \n"))), want: "no text", sent: 1},
		{name: "thinking only", api: replying(http.StatusOK, reply("end_turn", map[string]any{"type": "thinking", "thinking": "hmm", "signature": "sig"})), want: "no text", sent: 1},
		{name: "refusal", api: replying(http.StatusOK, reply("refusal")), want: "refused", sent: 1},
		{name: "cut off", api: replying(http.StatusOK, reply("max_tokens", text("## Objective\n- half a"))), want: "cut off at max_tokens (2048)", sent: 1},
		{name: "cancelled", api: replying(http.StatusOK, ok), ctx: cancelled, want: "context canceled"},
		{name: "empty prompt", api: replying(http.StatusOK, ok), prompt: []compact.Message{}, want: "empty prompt"},
		{name: "system only", api: replying(http.StatusOK, ok), prompt: []compact.Message{{Role: compact.RoleSystem, Text: "rules"}}, want: "no user or assistant text"},
		{name: "tool message", api: replying(http.StatusOK, ok), prompt: []compact.Message{{Role: compact.RoleUser, Text: "q"}, {Role: compact.RoleTool, Text: "r"}}, want: "message 1 is a tool message"},
		{name: "tool calls", api: replying(http.StatusOK, ok), prompt: []compact.Message{{Role: compact.RoleUser, Text: "q"}, {Role: compact.RoleAssistant, ToolCalls: []compact.ToolCall{{Tool: "search", ID: "c1"}}}}, want: "message 1 (assistant) carries tool calls"},
		{name: "unknown role", api: replying(http.StatusOK, ok), prompt: []compact.Message{{Role: "developer", Text: "q"}}, want: `role "developer"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.prompt
			if p == nil {
				p = prompt("Summarize.", "transcript")
			}
			got, err := summarizer(t, tc.api).Summarize(cmp.Or(tc.ctx, context.Background()), p)
			if err == nil {
				t.Fatalf("Summarize = %q, want an error", got)
			}
			if !strings.HasPrefix(err.Error(), "toolcasanthropic: summarize: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want one of toolcasanthropic naming %q", err, tc.want)
			}
			if n := len(tc.api.requests()); n != tc.sent {
				t.Errorf("%d requests, want %d", n, tc.sent)
			}
		})
	}
	t.Run("the SDK's error is wrapped", func(t *testing.T) {
		api := replying(http.StatusBadRequest, apiError("invalid_request_error", "bad"))
		_, err := summarizer(t, api).Summarize(context.Background(), prompt("Summarize.", "transcript"))
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
			t.Errorf("error %v, want an *anthropic.Error of status 400", err)
		}
		_, err = summarizer(t, api).Summarize(cancelled, prompt("Summarize.", "transcript"))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	})
	t.Run("bad configuration", func(t *testing.T) {
		client := anthropic.NewClient(option.WithAPIKey("no-key"))
		if _, err := toolcasanthropic.NewSummarizer(client, ""); err == nil {
			t.Error("NewSummarizer with no model: no error")
		}
		if _, err := toolcasanthropic.NewSummarizer(client, "claude-test", toolcasanthropic.WithMaxTokens(0)); err == nil {
			t.Error("NewSummarizer with max_tokens 0: no error")
		}
	})
}

// The Summarizer does the work of compact.Summarization: the model's
// summary takes the place of the old turn in the conversation.
func TestSummarizationCompactsThroughTheAPI(t *testing.T) {
	summary := "## Objective\n- the user asked about the old deploy"
	api := replying(http.StatusOK, reply("end_turn", text(summary)))
	summarizertest.Compacts(t, summarizer(t, api), summary)
	reqs := api.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	sent, _ := reqs[0]["messages"].([]any)
	user, _ := json.Marshal(sent)
	if !reflect.DeepEqual(reqs[0]["system"], []any{textBlock(compact.DefaultSummaryInstruction)}) || len(sent) != 1 ||
		sent[0].(map[string]any)["role"] != "user" || !strings.Contains(string(user), summarizertest.OldQuestion) || strings.Contains(string(user), summarizertest.Question) {
		t.Errorf("the model was sent %v, want the instruction as the system and the old turn", reqs[0])
	}
}
