package toolcasopenai_test

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

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"

	toolcasopenai "github.com/toolcas/toolcas/adapters/openai"
	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/compact/summarizertest"
)

// replyAPI stands in for the Chat Completions API with one fixed answer,
// a status and a JSON body, and records the path and body of every
// request.
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

// completion is a Chat Completions answer of one choice.
func completion(msg map[string]any, finish string) map[string]any {
	msg["role"] = "assistant"
	return map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "scripted",
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": msg}}}
}

func replying(status int, body any) *replyAPI { return &replyAPI{status: status, body: body} }

func summarizer(t *testing.T, api *replyAPI, opts ...toolcasopenai.SummarizerOption) *toolcasopenai.Summarizer {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("no-key"), option.WithMaxRetries(0))
	s, err := toolcasopenai.NewSummarizer(client, "gpt-test", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// prompt is a prompt as compact.Summarization writes one.
func prompt(instruction, transcript string) []compact.Message {
	return []compact.Message{{Role: compact.RoleSystem, Text: instruction}, {Role: compact.RoleUser, Text: transcript}}
}

func TestSummarizerRequest(t *testing.T) {
	ctx := context.Background()
	reply := "## Objective\n- find the slow requests"
	t.Run("default", func(t *testing.T) {
		api := replying(http.StatusOK, completion(map[string]any{"content": reply}, "stop"))
		got, err := summarizer(t, api).Summarize(ctx, prompt("Summarize.", "user: hi\nassistant: hello"))
		if err != nil {
			t.Fatal(err)
		}
		if got != reply {
			t.Errorf("reply %q, want %q", got, reply)
		}
		if !reflect.DeepEqual(api.paths, []string{"POST /v1/chat/completions"}) {
			t.Errorf("requests %v, want one POST /v1/chat/completions", api.paths)
		}
		want := map[string]any{"model": "gpt-test", "messages": []any{
			map[string]any{"role": "system", "content": "Summarize."},
			map[string]any{"role": "user", "content": "user: hi\nassistant: hello"},
		}}
		if reqs := api.requests(); len(reqs) != 1 || !reflect.DeepEqual(reqs[0], want) {
			t.Errorf("request\n%v\nwant\n%v", reqs, want)
		}
	})
	t.Run("with chat params", func(t *testing.T) {
		api := replying(http.StatusOK, completion(map[string]any{"content": reply}, "stop"))
		s := summarizer(t, api, toolcasopenai.WithChatParams(openai.ChatCompletionNewParams{
			Model:               "ignored",
			Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("ignored")},
			MaxCompletionTokens: param.NewOpt[int64](700),
			Temperature:         param.NewOpt(0.5),
		}))
		if _, err := s.Summarize(ctx, prompt("Summarize.", "transcript")); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"model": "gpt-test", "max_completion_tokens": 700.0, "temperature": 0.5, "messages": []any{
			map[string]any{"role": "system", "content": "Summarize."},
			map[string]any{"role": "user", "content": "transcript"},
		}}
		if reqs := api.requests(); len(reqs) != 1 || !reflect.DeepEqual(reqs[0], want) {
			t.Errorf("request\n%v\nwant\n%v", reqs, want)
		}
	})
	t.Run("any plain conversation", func(t *testing.T) {
		api := replying(http.StatusOK, completion(map[string]any{"content": reply}, "stop"))
		msgs := []compact.Message{
			{Role: compact.RoleSystem, Text: "rules"}, {Role: compact.RoleUser, Text: "q1"},
			{Role: compact.RoleAssistant, Text: "a1"}, {Role: compact.RoleSystem, Text: ""}, {Role: compact.RoleUser, Text: "q2"},
		}
		if _, err := summarizer(t, api).Summarize(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range api.requests()[0]["messages"].([]any) {
			m := m.(map[string]any)
			got = append(got, m["role"].(string)+":"+m["content"].(string))
		}
		if want := []string{"system:rules", "user:q1", "assistant:a1", "user:q2"}; !reflect.DeepEqual(got, want) {
			t.Errorf("messages %v, want %v", got, want)
		}
	})
}

func TestSummarizerErrors(t *testing.T) {
	ok := completion(map[string]any{"content": "a summary"}, "stop")
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
		{name: "server error", api: replying(http.StatusInternalServerError, map[string]any{"error": map[string]any{"message": "overloaded", "type": "server_error"}}), want: "500", sent: 1},
		{name: "bad request", api: replying(http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "model gpt-test does not exist", "type": "invalid_request_error"}}), want: "400 Bad Request", sent: 1},
		{name: "empty reply", api: replying(http.StatusOK, completion(map[string]any{"content": ""}, "stop")), want: "no text", sent: 1},
		{name: "blank reply", api: replying(http.StatusOK, completion(map[string]any{"content": " \n"}, "stop")), want: "no text", sent: 1},
		{name: "content filter", api: replying(http.StatusOK, completion(map[string]any{"content": nil}, "content_filter")), want: `no text (finish reason "content_filter")`, sent: 1},
		{name: "refusal", api: replying(http.StatusOK, completion(map[string]any{"content": nil, "refusal": "I can't help with that."}, "stop")), want: "refused: I can't help with that.", sent: 1},
		{name: "cut off", api: replying(http.StatusOK, completion(map[string]any{"content": "## Objective\n- half a"}, "length")), want: "cut off", sent: 1},
		{name: "no choice", api: replying(http.StatusOK, map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "scripted", "choices": []any{}}), want: "no choice", sent: 1},
		{name: "cancelled", api: replying(http.StatusOK, ok), ctx: cancelled, want: "context canceled"},
		{name: "empty prompt", api: replying(http.StatusOK, ok), prompt: []compact.Message{}, want: "empty prompt"},
		{name: "system only", api: replying(http.StatusOK, ok), prompt: []compact.Message{{Role: compact.RoleSystem, Text: "rules"}}, want: "no user or assistant text"},
		{name: "tool message", api: replying(http.StatusOK, ok), prompt: []compact.Message{{Role: compact.RoleUser, Text: "q"}, {Role: compact.RoleTool, Text: "r"}}, want: "message 1 is a tool message"},
		{name: "tool calls", api: replying(http.StatusOK, ok), prompt: []compact.Message{{Role: compact.RoleUser, Text: "q"}, {Role: compact.RoleAssistant, ToolCalls: []compact.ToolCall{{Tool: "search", ID: "c1"}}}}, want: "message 1 (assistant) carries tool calls"},
		{name: "unknown role", api: replying(http.StatusOK, ok), prompt: []compact.Message{{Role: "developer", Text: "q"}}, want: `role "developer"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := cmp.Or(tc.ctx, context.Background())
			p := tc.prompt
			if p == nil {
				p = prompt("Summarize.", "transcript")
			}
			got, err := summarizer(t, tc.api).Summarize(ctx, p)
			if err == nil {
				t.Fatalf("Summarize = %q, want an error", got)
			}
			if !strings.HasPrefix(err.Error(), "toolcasopenai: summarize: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want one of toolcasopenai naming %q", err, tc.want)
			}
			if n := len(tc.api.requests()); n != tc.sent {
				t.Errorf("%d requests, want %d", n, tc.sent)
			}
		})
	}
	t.Run("the SDK's error is wrapped", func(t *testing.T) {
		api := replying(http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "bad", "type": "invalid_request_error"}})
		_, err := summarizer(t, api).Summarize(context.Background(), prompt("Summarize.", "transcript"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Message != "bad" {
			t.Errorf("error %v, want an *openai.Error of status 400", err)
		}
		_, err = summarizer(t, api).Summarize(cancelled, prompt("Summarize.", "transcript"))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	})
	t.Run("no model", func(t *testing.T) {
		if _, err := toolcasopenai.NewSummarizer(openai.NewClient(), ""); err == nil {
			t.Error("NewSummarizer with no model: no error")
		}
	})
}

// The Summarizer does the work of compact.Summarization: the model's
// summary takes the place of the old turn in the conversation.
func TestSummarizationCompactsThroughTheAPI(t *testing.T) {
	summary := "## Objective\n- the user asked about the old deploy"
	api := replying(http.StatusOK, completion(map[string]any{"content": summary}, "stop"))
	summarizertest.Compacts(t, summarizer(t, api), summary)
	reqs := api.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	sent := reqs[0]["messages"].([]any)
	sys, user := sent[0].(map[string]any), sent[1].(map[string]any)
	if len(sent) != 2 || sys["role"] != "system" || sys["content"] != compact.DefaultSummaryInstruction || user["role"] != "user" ||
		!strings.Contains(user["content"].(string), summarizertest.OldQuestion) || strings.Contains(user["content"].(string), summarizertest.Question) {
		t.Errorf("the model was sent %v, want the instruction and the old turn", sent)
	}
}
