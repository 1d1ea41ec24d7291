package toolcaseino_test

import (
	"cmp"
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	toolcaseino "github.com/toolcas/toolcas/adapters/eino"
	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/compact/summarizertest"
)

// replyModel is an eino chat model with one fixed answer, a message or an
// error; it records the messages and the common options of every call.
type replyModel struct {
	reply *schema.Message
	err   error

	mu   sync.Mutex
	sent [][]*schema.Message
	opts []*model.Options
}

var _ model.BaseChatModel = (*replyModel)(nil)

func (m *replyModel) Generate(_ context.Context, in []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, in)
	m.opts = append(m.opts, model.GetCommonOptions(nil, opts...))
	return m.reply, m.err
}

func (m *replyModel) Stream(context.Context, []*schema.Message, ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	return nil, errors.New("replyModel: the summarizer streams")
}

func (m *replyModel) requests() [][]*schema.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]*schema.Message(nil), m.sent...)
}

// roleTexts renders messages as role:text.
func roleTexts(msgs []*schema.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+":"+m.Content)
	}
	return out
}

func summarizer(t *testing.T, m model.BaseChatModel, opts ...model.Option) *toolcaseino.Summarizer {
	t.Helper()
	s, err := toolcaseino.NewSummarizer(m, opts...)
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
	summary := "## Objective\n- find the slow requests"
	t.Run("default", func(t *testing.T) {
		m := &replyModel{reply: schema.AssistantMessage(summary, nil)}
		got, err := summarizer(t, m, model.WithMaxTokens(700), model.WithTemperature(0.5)).Summarize(ctx, prompt("Summarize.", "user: hi\nassistant: hello"))
		if err != nil {
			t.Fatal(err)
		}
		if got != summary {
			t.Errorf("reply %q, want %q", got, summary)
		}
		reqs := m.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d calls, want 1", len(reqs))
		}
		want := []*schema.Message{{Role: schema.System, Content: "Summarize."}, {Role: schema.User, Content: "user: hi\nassistant: hello"}}
		if !reflect.DeepEqual(reqs[0], want) {
			t.Errorf("the model was sent %q, want %q", roleTexts(reqs[0]), roleTexts(want))
		}
		if o := m.opts[0]; o.MaxTokens == nil || *o.MaxTokens != 700 || o.Temperature == nil || *o.Temperature != 0.5 {
			t.Errorf("options %+v, want max tokens 700 and temperature 0.5", o)
		}
	})
	t.Run("text parts", func(t *testing.T) {
		m := &replyModel{reply: &schema.Message{Role: schema.Assistant, ReasoningContent: "hmm", AssistantGenMultiContent: []schema.MessageOutputPart{
			{Type: schema.ChatMessagePartTypeReasoning, Reasoning: &schema.MessageOutputReasoning{Text: "hmm"}},
			{Type: schema.ChatMessagePartTypeText, Text: "## Objective\n"},
			{Type: schema.ChatMessagePartTypeText, Text: "- find the slow requests"},
		}}}
		got, err := summarizer(t, m).Summarize(ctx, prompt("Summarize.", "transcript"))
		if err != nil || got != summary {
			t.Errorf("Summarize = %q, %v, want %q", got, err, summary)
		}
	})
	t.Run("any plain conversation", func(t *testing.T) {
		m := &replyModel{reply: schema.AssistantMessage(summary, nil)}
		msgs := []compact.Message{
			{Role: compact.RoleSystem, Text: "rules"}, {Role: compact.RoleUser, Text: "q1"},
			{Role: compact.RoleAssistant, Text: "a1"}, {Role: compact.RoleSystem, Text: ""}, {Role: compact.RoleUser, Text: "q2"},
		}
		if _, err := summarizer(t, m).Summarize(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		if got, want := roleTexts(m.requests()[0]), []string{"system:rules", "user:q1", "assistant:a1", "user:q2"}; !reflect.DeepEqual(got, want) {
			t.Errorf("messages %v, want %v", got, want)
		}
	})
}

func TestSummarizerErrors(t *testing.T) {
	ok := schema.AssistantMessage("a summary", nil)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	withFinish := func(m *schema.Message, finish string) *schema.Message {
		m.ResponseMeta = &schema.ResponseMeta{FinishReason: finish}
		return m
	}
	errModel := errors.New("rate limited")
	for _, tc := range []struct {
		name   string
		model  *replyModel
		ctx    context.Context
		prompt []compact.Message
		want   string // in the error
		sent   int    // calls the model gets
	}{
		{name: "model error", model: &replyModel{err: errModel}, want: "rate limited", sent: 1},
		{name: "no message", model: &replyModel{}, want: "no message", sent: 1},
		{name: "empty reply", model: &replyModel{reply: schema.AssistantMessage("", nil)}, want: "no text", sent: 1},
		{name: "blank reply", model: &replyModel{reply: schema.AssistantMessage(" \n", nil)}, want: "no text", sent: 1},
		{name: "content filter", model: &replyModel{reply: withFinish(schema.AssistantMessage("", nil), "content_filter")}, want: `no text (finish reason "content_filter")`, sent: 1},
		{name: "reasoning only", model: &replyModel{reply: &schema.Message{Role: schema.Assistant, ReasoningContent: "hmm"}}, want: "no text", sent: 1},
		{name: "tool calls only", model: &replyModel{reply: schema.AssistantMessage("", []schema.ToolCall{{ID: "c1", Function: schema.FunctionCall{Name: "search"}}})}, want: "no text", sent: 1},
		{name: "cut off", model: &replyModel{reply: withFinish(schema.AssistantMessage("## Objective\n- half a", nil), "length")}, want: "cut off", sent: 1},
		{name: "cancelled", model: &replyModel{reply: ok}, ctx: cancelled, want: "context canceled"},
		{name: "empty prompt", model: &replyModel{reply: ok}, prompt: []compact.Message{}, want: "empty prompt"},
		{name: "system only", model: &replyModel{reply: ok}, prompt: []compact.Message{{Role: compact.RoleSystem, Text: "rules"}}, want: "no user or assistant text"},
		{name: "tool message", model: &replyModel{reply: ok}, prompt: []compact.Message{{Role: compact.RoleUser, Text: "q"}, {Role: compact.RoleTool, Text: "r"}}, want: "message 1 is a tool message"},
		{name: "tool calls", model: &replyModel{reply: ok}, prompt: []compact.Message{{Role: compact.RoleUser, Text: "q"}, {Role: compact.RoleAssistant, ToolCalls: []compact.ToolCall{{Tool: "search", ID: "c1"}}}}, want: "message 1 (assistant) carries tool calls"},
		{name: "unknown role", model: &replyModel{reply: ok}, prompt: []compact.Message{{Role: "developer", Text: "q"}}, want: `role "developer"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.prompt
			if p == nil {
				p = prompt("Summarize.", "transcript")
			}
			got, err := summarizer(t, tc.model).Summarize(cmp.Or(tc.ctx, context.Background()), p)
			if err == nil {
				t.Fatalf("Summarize = %q, want an error", got)
			}
			if !strings.HasPrefix(err.Error(), "toolcaseino: summarize: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want one of toolcaseino naming %q", err, tc.want)
			}
			if n := len(tc.model.requests()); n != tc.sent {
				t.Errorf("%d calls, want %d", n, tc.sent)
			}
		})
	}
	t.Run("the model's error is wrapped", func(t *testing.T) {
		_, err := summarizer(t, &replyModel{err: errModel}).Summarize(context.Background(), prompt("Summarize.", "transcript"))
		if !errors.Is(err, errModel) {
			t.Errorf("error %v, want the model's", err)
		}
		_, err = summarizer(t, &replyModel{reply: ok}).Summarize(cancelled, prompt("Summarize.", "transcript"))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	})
	t.Run("no model", func(t *testing.T) {
		if _, err := toolcaseino.NewSummarizer(nil); err == nil {
			t.Error("NewSummarizer with no model: no error")
		}
	})
}

// The Summarizer does the work of compact.Summarization: the model's
// summary takes the place of the old turn in the conversation.
func TestSummarizationCompactsThroughTheModel(t *testing.T) {
	summary := "## Objective\n- the user asked about the old deploy"
	m := &replyModel{reply: schema.AssistantMessage(summary, nil)}
	summarizertest.Compacts(t, summarizer(t, m), summary)
	reqs := m.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d calls, want 1", len(reqs))
	}
	sent := reqs[0]
	if len(sent) != 2 || sent[0].Role != schema.System || sent[0].Content != compact.DefaultSummaryInstruction || sent[1].Role != schema.User ||
		!strings.Contains(sent[1].Content, summarizertest.OldQuestion) || strings.Contains(sent[1].Content, summarizertest.Question) {
		t.Errorf("the model was sent %q, want the instruction and the old turn", roleTexts(sent))
	}
}
