package toolcasadk_test

import (
	"cmp"
	"context"
	"errors"
	"iter"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"google.golang.org/adk/v2/model"
	"google.golang.org/genai"

	toolcasadk "github.com/toolcas/toolcas/adapters/adk"
	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/compact/summarizertest"
)

// replyLLM is an adk-go model with fixed answers: it yields each of them,
// a response or an error, in turn, and records every request. Like
// Gemini's model, it sets a header on the request's config.
type replyLLM struct {
	replies []any // *model.LLMResponse or error

	mu      sync.Mutex
	sent    []*model.LLMRequest
	streams []bool
}

var _ model.LLM = (*replyLLM)(nil)

func (m *replyLLM) Name() string { return "gemini-test" }

func (m *replyLLM) GenerateContent(_ context.Context, req *model.LLMRequest, stream bool) iter.Seq2[*model.LLMResponse, error] {
	m.mu.Lock()
	m.sent = append(m.sent, req)
	m.streams = append(m.streams, stream)
	m.mu.Unlock()
	if req.Config != nil && req.Config.HTTPOptions != nil {
		if req.Config.HTTPOptions.Headers == nil {
			req.Config.HTTPOptions.Headers = http.Header{}
		}
		req.Config.HTTPOptions.Headers.Set("user-agent", "reply-llm")
	}
	return func(yield func(*model.LLMResponse, error) bool) {
		for _, r := range m.replies {
			var ok bool
			if err, isErr := r.(error); isErr {
				ok = yield(nil, err)
			} else {
				ok = yield(r.(*model.LLMResponse), nil)
			}
			if !ok {
				return
			}
		}
	}
}

func (m *replyLLM) requests() []*model.LLMRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*model.LLMRequest(nil), m.sent...)
}

// replying returns a model answering with responses and errors, in turn.
func replying(replies ...any) *replyLLM { return &replyLLM{replies: replies} }

func modelText(s string) *model.LLMResponse {
	return &model.LLMResponse{Content: genai.NewContentFromText(s, genai.RoleModel), FinishReason: genai.FinishReasonStop}
}

func summarizer(t *testing.T, llm model.LLM, config *genai.GenerateContentConfig) *toolcasadk.Summarizer {
	t.Helper()
	s, err := toolcasadk.NewSummarizer(llm, config)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// prompt is a prompt as compact.Summarization writes one.
func prompt(instruction, transcript string) []compact.Message {
	return []compact.Message{{Role: compact.RoleSystem, Text: instruction}, {Role: compact.RoleUser, Text: transcript}}
}

// roleTexts renders contents as role:text, a part each.
func roleTexts(contents []*genai.Content) []string {
	var out []string
	for _, c := range contents {
		for _, p := range c.Parts {
			out = append(out, c.Role+":"+p.Text)
		}
	}
	return out
}

func TestSummarizerRequest(t *testing.T) {
	ctx := context.Background()
	summary := "## Objective\n- find the slow requests"
	t.Run("default", func(t *testing.T) {
		llm := replying(modelText(summary))
		got, err := summarizer(t, llm, nil).Summarize(ctx, prompt("Summarize.", "user: hi\nassistant: hello"))
		if err != nil {
			t.Fatal(err)
		}
		if got != summary {
			t.Errorf("reply %q, want %q", got, summary)
		}
		reqs := llm.requests()
		if len(reqs) != 1 || llm.streams[0] {
			t.Fatalf("%d requests (streaming %v), want 1 not streaming", len(reqs), llm.streams)
		}
		want := &model.LLMRequest{
			Model:    "gemini-test",
			Contents: []*genai.Content{{Role: genai.RoleUser, Parts: []*genai.Part{{Text: "user: hi\nassistant: hello"}}}},
			Config:   &genai.GenerateContentConfig{SystemInstruction: &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{Text: "Summarize."}}}},
		}
		if !reflect.DeepEqual(reqs[0], want) {
			t.Errorf("request %+v\nwant %+v", reqs[0], want)
		}
	})
	t.Run("with config", func(t *testing.T) {
		temp := float32(0.5)
		config := &genai.GenerateContentConfig{
			MaxOutputTokens:   700,
			Temperature:       &temp,
			SystemInstruction: genai.NewContentFromText("ignored", genai.RoleUser),
			HTTPOptions:       &genai.HTTPOptions{Headers: http.Header{"X-Team": {"ops"}}},
		}
		llm := replying(modelText(summary))
		s := summarizer(t, llm, config)
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { _, errs[i] = s.Summarize(ctx, prompt("Summarize.", "transcript")) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		for _, req := range llm.requests() {
			c := req.Config
			if c.MaxOutputTokens != 700 || c.Temperature == nil || *c.Temperature != 0.5 || c.HTTPOptions.Headers.Get("X-Team") != "ops" ||
				!reflect.DeepEqual(roleTexts([]*genai.Content{c.SystemInstruction}), []string{"user:Summarize."}) {
				t.Errorf("config %+v, want the given one with the prompt's system instruction", c)
			}
		}
		// The model's header went to the request's copy, not the caller's.
		if !reflect.DeepEqual(config.HTTPOptions.Headers, http.Header{"X-Team": {"ops"}}) || config.SystemInstruction.Parts[0].Text != "ignored" {
			t.Errorf("the caller's config changed: %+v", config)
		}
	})
	t.Run("the last complete response", func(t *testing.T) {
		partial := modelText("## Obj")
		partial.Partial = true
		thought := &genai.Part{Text: "let me think", Thought: true}
		final := &model.LLMResponse{Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{thought, {Text: "## Objective\n"}, {Text: "- find the slow requests"}}}}
		got, err := summarizer(t, replying(partial, modelText("an earlier answer"), final, partial), nil).Summarize(ctx, prompt("Summarize.", "transcript"))
		if err != nil || got != summary {
			t.Errorf("Summarize = %q, %v, want %q", got, err, summary)
		}
	})
	t.Run("any plain conversation", func(t *testing.T) {
		llm := replying(modelText(summary))
		msgs := []compact.Message{
			{Role: compact.RoleSystem, Text: "rules"}, {Role: compact.RoleUser, Text: "q1"}, {Role: compact.RoleUser, Text: "q1 again"},
			{Role: compact.RoleAssistant, Text: "a1"}, {Role: compact.RoleSystem, Text: "more rules"}, {Role: compact.RoleUser, Text: ""},
			{Role: compact.RoleUser, Text: "q2"},
		}
		if _, err := summarizer(t, llm, nil).Summarize(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		req := llm.requests()[0]
		if got, want := roleTexts([]*genai.Content{req.Config.SystemInstruction}), []string{"user:rules", "user:more rules"}; !reflect.DeepEqual(got, want) {
			t.Errorf("system instruction %v, want %v", got, want)
		}
		if len(req.Contents) != 3 {
			t.Errorf("%d contents, want 3", len(req.Contents))
		}
		if got, want := roleTexts(req.Contents), []string{"user:q1", "user:q1 again", "model:a1", "user:q2"}; !reflect.DeepEqual(got, want) {
			t.Errorf("contents %v, want %v", got, want)
		}
	})
}

func TestSummarizerErrors(t *testing.T) {
	ok := modelText("a summary")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	errModel := errors.New("failed to call model: 429 resource exhausted")
	partial := modelText("## Obj")
	partial.Partial = true
	for _, tc := range []struct {
		name   string
		llm    *replyLLM
		ctx    context.Context
		prompt []compact.Message
		want   string // in the error
		sent   int    // requests the model gets
	}{
		{name: "model error", llm: replying(errModel), want: "429 resource exhausted", sent: 1},
		{name: "error after a response", llm: replying(ok, errModel), want: "429 resource exhausted", sent: 1},
		{name: "no response", llm: replying(), want: "no response", sent: 1},
		{name: "partial only", llm: replying(partial), want: "no response", sent: 1},
		{name: "nil response", llm: replying((*model.LLMResponse)(nil)), want: "no response", sent: 1},
		{name: "blocked", llm: replying(&model.LLMResponse{ErrorCode: "SAFETY", ErrorMessage: "blocked for safety", FinishReason: genai.FinishReasonSafety}), want: "error: SAFETY blocked for safety", sent: 1},
		{name: "no content", llm: replying(&model.LLMResponse{FinishReason: genai.FinishReasonStop}), want: "no text (finish reason STOP)", sent: 1},
		{name: "blank text", llm: replying(modelText(" \n")), want: "no text", sent: 1},
		{name: "thought only", llm: replying(&model.LLMResponse{Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{Text: "hmm", Thought: true}}}}), want: "no text", sent: 1},
		{name: "cut off", llm: replying(&model.LLMResponse{Content: genai.NewContentFromText("## Objective\n- half a", genai.RoleModel), FinishReason: genai.FinishReasonMaxTokens}), want: "cut off", sent: 1},
		{name: "cancelled", llm: replying(ok), ctx: cancelled, want: "context canceled"},
		{name: "empty prompt", llm: replying(ok), prompt: []compact.Message{}, want: "empty prompt"},
		{name: "system only", llm: replying(ok), prompt: []compact.Message{{Role: compact.RoleSystem, Text: "rules"}}, want: "no user or assistant text"},
		{name: "tool message", llm: replying(ok), prompt: []compact.Message{{Role: compact.RoleUser, Text: "q"}, {Role: compact.RoleTool, Text: "r"}}, want: "message 1 is a tool message"},
		{name: "tool calls", llm: replying(ok), prompt: []compact.Message{{Role: compact.RoleUser, Text: "q"}, {Role: compact.RoleAssistant, ToolCalls: []compact.ToolCall{{Tool: "search", ID: "c1"}}}}, want: "message 1 (assistant) carries tool calls"},
		{name: "unknown role", llm: replying(ok), prompt: []compact.Message{{Role: "developer", Text: "q"}}, want: `role "developer"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.prompt
			if p == nil {
				p = prompt("Summarize.", "transcript")
			}
			got, err := summarizer(t, tc.llm, nil).Summarize(cmp.Or(tc.ctx, context.Background()), p)
			if err == nil {
				t.Fatalf("Summarize = %q, want an error", got)
			}
			if !strings.HasPrefix(err.Error(), "toolcasadk: summarize: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want one of toolcasadk naming %q", err, tc.want)
			}
			if n := len(tc.llm.requests()); n != tc.sent {
				t.Errorf("%d requests, want %d", n, tc.sent)
			}
		})
	}
	t.Run("the model's error is wrapped", func(t *testing.T) {
		_, err := summarizer(t, replying(errModel), nil).Summarize(context.Background(), prompt("Summarize.", "transcript"))
		if !errors.Is(err, errModel) {
			t.Errorf("error %v, want the model's", err)
		}
		_, err = summarizer(t, replying(ok), nil).Summarize(cancelled, prompt("Summarize.", "transcript"))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	})
	t.Run("no model", func(t *testing.T) {
		if _, err := toolcasadk.NewSummarizer(nil, nil); err == nil {
			t.Error("NewSummarizer with no model: no error")
		}
	})
}

// The Summarizer does the work of compact.Summarization: the model's
// summary takes the place of the old turn in the conversation.
func TestSummarizationCompactsThroughTheModel(t *testing.T) {
	summary := "## Objective\n- the user asked about the old deploy"
	llm := replying(modelText(summary))
	summarizertest.Compacts(t, summarizer(t, llm, nil), summary)
	reqs := llm.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	sys, sent := roleTexts([]*genai.Content{reqs[0].Config.SystemInstruction}), roleTexts(reqs[0].Contents)
	if !reflect.DeepEqual(sys, []string{"user:" + compact.DefaultSummaryInstruction}) || len(sent) != 1 ||
		!strings.HasPrefix(sent[0], "user:") || !strings.Contains(sent[0], summarizertest.OldQuestion) || strings.Contains(sent[0], summarizertest.Question) {
		t.Errorf("the model was sent %q and %q, want the instruction and the old turn", sys, sent)
	}
}
