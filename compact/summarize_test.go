package compact

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/tokens"
)

// The cases below are Haystack's own tests of SummarizationCompactor, with
// their inputs, targets and expectations, and their counter: a token a
// character of the rendered conversation.
var charCounter = Counter{Text: tokens.Approximate{CharsPerToken: 1}, NoMediaTokens: true}

func sm(role Role, text string) Message { return Message{Role: role, Text: text} }

func toolCall(ids ...string) Message {
	m := Message{Role: RoleAssistant}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, ToolCall{Tool: "search", ID: id})
	}
	return m
}

func toolResult(text, id string) Message {
	return Message{Role: RoleTool, Result: &hook.Result{Tool: "search", CallID: id, Parts: []hook.Part{hook.Text(text)}}}
}

func summaryMsg(text string, n int) Message {
	return Message{Role: RoleUser, Text: "<conversation_summary>\n" + text + "\n</conversation_summary>",
		Meta: map[string]any{MetaKey: map[string]any{"strategy": "summarization", "summarized_messages": n}}}
}

func twoSteps() []Message {
	return []Message{
		sm(RoleSystem, "rules"), sm(RoleUser, "start"),
		toolCall("c1"), toolResult(strings.Repeat("first result ", 12), "c1"),
		toolCall("c2"), toolResult(strings.Repeat("second result ", 12), "c2"),
	}
}

// script is a Summarizer that answers from a list and records its prompts.
type script struct {
	replies []any // string or error
	prompts []string
}

func (s *script) Summarize(_ context.Context, prompt []Message) (string, error) {
	var texts []string
	for _, m := range prompt {
		texts = append(texts, m.Text)
	}
	s.prompts = append(s.prompts, strings.Join(texts, "\n"))
	if len(s.replies) == 0 {
		return "", errors.New("script: no reply left")
	}
	r := s.replies[0]
	s.replies = s.replies[1:]
	if err, ok := r.(error); ok {
		return "", err
	}
	return r.(string), nil
}

// always answers every prompt with the same text.
type always string

func (a always) Summarize(context.Context, []Message) (string, error) { return string(a), nil }

func summarization(t *testing.T, s Summarizer, o SummarizationOptions) *Summarization {
	t.Helper()
	c, err := NewSummarization(s, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func cc(parts ...[]Message) []Message {
	var out []Message
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestSummarizationPlanHaystackCases(t *testing.T) {
	plan := func(c *Summarization, msgs []Message, target int) []int { return c.next(msgs, target, charCounter) }
	t.Run("only one historical turn", func(t *testing.T) {
		msgs := []Message{sm(RoleSystem, "rules"), sm(RoleUser, strings.Repeat("oldest question ", 30)), sm(RoleAssistant, strings.Repeat("oldest answer ", 30)),
			sm(RoleUser, "recent question"), sm(RoleAssistant, "recent answer"), sm(RoleUser, "current task"), sm(RoleAssistant, "current step")}
		target := charCounter.Count(cc(msgs[:1], msgs[3:])) + 100
		if got := plan(summarization(t, always("x"), SummarizationOptions{SummaryTokens: 100}), msgs, target); !reflect.DeepEqual(got, []int{1, 2}) {
			t.Errorf("plan %v, want [1 2]", got)
		}
	})
	t.Run("historical turns first", func(t *testing.T) {
		msgs := []Message{sm(RoleSystem, "rules"), sm(RoleUser, strings.Repeat("old question ", 40)), sm(RoleAssistant, strings.Repeat("old answer ", 40)), sm(RoleUser, "current task"),
			toolCall("first"), toolResult(strings.Repeat("first result ", 12), "first"), toolCall("newest"), toolResult(strings.Repeat("newest result ", 12), "newest")}
		if got := plan(summarization(t, always("x"), SummarizationOptions{SummaryTokens: 1}), msgs, 1); !reflect.DeepEqual(got, []int{1, 2}) {
			t.Errorf("plan %v, want [1 2]", got)
		}
	})
	t.Run("a summary inside a historical turn", func(t *testing.T) {
		msgs := []Message{sm(RoleSystem, "rules"), sm(RoleUser, "past task"), summaryMsg("early steps", 1), sm(RoleAssistant, "late step"), sm(RoleUser, "current task")}
		if got := plan(summarization(t, always("x"), SummarizationOptions{SummaryTokens: 1}), msgs, 1); !reflect.DeepEqual(got, []int{1, 2, 3}) {
			t.Errorf("plan %v, want [1 2 3]", got)
		}
	})
	t.Run("at least two historical summaries", func(t *testing.T) {
		msgs := []Message{sm(RoleSystem, "rules"), summaryMsg(strings.Repeat("first history ", 20), 1), summaryMsg(strings.Repeat("second history ", 20), 1),
			summaryMsg(strings.Repeat("third history ", 20), 1), sm(RoleUser, "current task")}
		target := charCounter.Count(cc(msgs[:1], msgs[2:])) + 1
		if got := plan(summarization(t, always("x"), SummarizationOptions{SummaryTokens: 1}), msgs, target); !reflect.DeepEqual(got, []int{1, 2}) {
			t.Errorf("plan %v, want [1 2]", got)
		}
	})
	t.Run("current steps before current summaries", func(t *testing.T) {
		msgs := []Message{sm(RoleSystem, "rules"), sm(RoleUser, "current task"), summaryMsg(strings.Repeat("first step summary ", 20), 1), summaryMsg(strings.Repeat("second step summary ", 20), 1),
			toolCall("first"), toolResult(strings.Repeat("first result ", 12), "first"), toolCall("newest"), toolResult(strings.Repeat("newest result ", 12), "newest")}
		if got := plan(summarization(t, always("x"), SummarizationOptions{SummaryTokens: 1}), msgs, 1); !reflect.DeepEqual(got, []int{4, 5}) {
			t.Errorf("plan %v, want [4 5]", got)
		}
	})
	t.Run("only two current summaries", func(t *testing.T) {
		msgs := []Message{sm(RoleSystem, "rules"), sm(RoleUser, "current task"), summaryMsg(strings.Repeat("first step summary ", 20), 1), summaryMsg(strings.Repeat("second step summary ", 20), 1),
			summaryMsg(strings.Repeat("third step summary ", 20), 1), toolCall("new"), toolResult("new result", "new")}
		target := charCounter.Count(cc(msgs[:2], msgs[4:])) + 1
		if got := plan(summarization(t, always("x"), SummarizationOptions{MinKeepSteps: 1, SummaryTokens: 1}), msgs, target); !reflect.DeepEqual(got, []int{2, 3}) {
			t.Errorf("plan %v, want [2 3]", got)
		}
	})
	for _, tc := range []struct {
		keep int
		want []int
	}{{0, []int{2, 3, 4, 5}}, {1, []int{2, 3}}, {2, nil}, {20, nil}} {
		o := SummarizationOptions{MinKeepSteps: tc.keep, KeepNoSteps: tc.keep == 0, SummaryTokens: 1}
		if got := plan(summarization(t, always("x"), o), twoSteps(), 1); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("min_keep_steps %d: plan %v, want %v", tc.keep, got, tc.want)
		}
	}
	t.Run("nothing at the floor", func(t *testing.T) {
		msgs := []Message{sm(RoleSystem, "rules"), summaryMsg(strings.Repeat("all history ", 20), 1), sm(RoleUser, "current task"), summaryMsg(strings.Repeat("all earlier steps ", 20), 1),
			toolCall("new"), toolResult(strings.Repeat("new result ", 20), "new")}
		if got := plan(summarization(t, always("x"), SummarizationOptions{MinKeepSteps: 1, SummaryTokens: 1}), msgs, 1); got != nil {
			t.Errorf("plan %v, want none", got)
		}
	})
}

func summariesIn(msgs []Message) []Message {
	var out []Message
	for _, m := range msgs {
		if isSummary(m) {
			out = append(out, m)
		}
	}
	return out
}

func TestSummarizationHaystackCases(t *testing.T) {
	ctx := context.Background()
	t.Run("does not change its input, declines when it fits", func(t *testing.T) {
		msgs := twoSteps()
		summarization(t, always("summary"), SummarizationOptions{SummaryTokens: 1}).Compact(ctx, msgs, 1, charCounter)
		if !reflect.DeepEqual(msgs, twoSteps()) {
			t.Error("Compact changed its input")
		}
		s := &script{}
		small := []Message{sm(RoleSystem, "rules"), sm(RoleUser, "task")}
		if _, changed, _ := summarization(t, s, SummarizationOptions{}).Compact(ctx, small, 10_000, charCounter); changed || len(s.prompts) != 0 {
			t.Errorf("changed %v, %d prompts", changed, len(s.prompts))
		}
	})
	grow := func(c *Summarization, start []Message, adds [][]Message, target int) [][]Message {
		msgs := start
		var snaps [][]Message
		for _, a := range adds {
			msgs = cc(msgs, a)
			if out, changed, err := c.Compact(ctx, msgs, target, charCounter); err != nil {
				t.Fatal(err)
			} else if changed {
				msgs = out
			}
			snaps = append(snaps, msgs)
		}
		return snaps
	}
	want := summaryMsg("summary", 2)
	t.Run("historical summaries accumulate", func(t *testing.T) {
		var adds [][]Message
		for i := range 4 {
			adds = append(adds, []Message{sm(RoleUser, strings.Repeat("question "+string(rune('0'+i))+" ", 30)), sm(RoleAssistant, strings.Repeat("answer "+string(rune('0'+i))+" ", 30))})
		}
		snaps := grow(summarization(t, always("summary"), SummarizationOptions{SummaryTokens: 10}), []Message{sm(RoleSystem, "rules")}, adds, 1100)
		for i, s := range snaps {
			got := summariesIn(s)
			if len(got) != i || len(got) > 0 && !reflect.DeepEqual(got[0], want) {
				t.Errorf("after addition %d: summaries %v, want %d of %v", i, got, i, want)
			}
		}
	})
	t.Run("current-task summaries accumulate", func(t *testing.T) {
		var adds [][]Message
		for i := range 4 {
			id := "c" + string(rune('0'+i))
			adds = append(adds, []Message{toolCall(id), toolResult(strings.Repeat("result "+string(rune('0'+i))+" ", 30), id)})
		}
		snaps := grow(summarization(t, always("summary"), SummarizationOptions{MinKeepSteps: 1, SummaryTokens: 10}), []Message{sm(RoleSystem, "rules"), sm(RoleUser, "current task")}, adds, 650)
		for i, s := range snaps {
			got := summariesIn(s)
			if len(got) != i || len(got) > 0 && !reflect.DeepEqual(got[0], want) {
				t.Errorf("after addition %d: summaries %v, want %d of %v", i, got, i, want)
			}
		}
	})
	t.Run("the prompt of a completed mixed turn", func(t *testing.T) {
		msgs := []Message{sm(RoleSystem, "rules"), summaryMsg("older history", 8), sm(RoleUser, "previous task"), summaryMsg("early previous-task work", 4),
			toolCall("previous"), toolResult("previous result", "previous"), sm(RoleAssistant, "previous final answer"),
			sm(RoleUser, "current task"), toolCall("current"), toolResult("current result", "current")}
		s := &script{replies: []any{"completed previous task", "combined history"}}
		out, changed, err := summarization(t, s, SummarizationOptions{SummaryTokens: 5, Instruction: "Summarize this conversation."}).Compact(ctx, msgs, 1, charCounter)
		if err != nil || !changed {
			t.Fatal(changed, err)
		}
		wantPrompt := "Summarize this conversation.\n<conversation_to_summarize>\n[user] previous task\n[conversation_summary]\nearly previous-task work\n" +
			"[assistant -> tool_call id=previous] search({})\n[tool:search id=previous] previous result\n[assistant] previous final answer\n</conversation_to_summarize>"
		if len(s.prompts) == 0 || s.prompts[0] != wantPrompt {
			t.Errorf("first prompt:\n%s\nwant:\n%s", s.prompts, wantPrompt)
		}
		if !reflect.DeepEqual(out[len(out)-3:], msgs[len(msgs)-3:]) || out[0].Text != "rules" {
			t.Errorf("the current task changed: %v", out)
		}
	})
	t.Run("a failure keeps what worked, or is an error", func(t *testing.T) {
		// The first round summarizes the one earlier turn, the second the
		// current task's older step, which fails.
		msgs := []Message{sm(RoleSystem, "rules"), sm(RoleUser, strings.Repeat("q1 ", 50)), sm(RoleAssistant, strings.Repeat("a1 ", 50)),
			sm(RoleUser, "current task"), toolCall("c1"), toolResult(strings.Repeat("r1 ", 50), "c1"), toolCall("c2"), toolResult("r2", "c2")}
		s := &script{replies: []any{"first", errors.New("model down")}}
		out, changed, err := summarization(t, s, SummarizationOptions{SummaryTokens: 1}).Compact(ctx, msgs, 1, charCounter)
		if err != nil || !changed || len(summariesIn(out)) != 1 || len(s.prompts) != 2 || len(out) != 7 {
			t.Errorf("Compact = %d messages, %d summaries, %d prompts, %v, %v; want the first summary kept", len(out), len(summariesIn(out)), len(s.prompts), changed, err)
		}
		s = &script{replies: []any{"first", errors.New("model down")}}
		if _, _, err := summarization(t, s, SummarizationOptions{SummaryTokens: 1, FailOnError: true}).Compact(ctx, msgs, 1, charCounter); err == nil || !strings.Contains(err.Error(), "model down") {
			t.Errorf("FailOnError: %v", err)
		}
		for _, bad := range []string{"", "  \n", strings.Repeat("far too long a summary ", 100)} {
			if _, _, err := summarization(t, always(bad), SummarizationOptions{SummaryTokens: 1, FailOnError: true}).Compact(ctx, msgs, 1, charCounter); err == nil {
				t.Errorf("summary %.20q: no error", bad)
			}
		}
	})
	t.Run("bad options", func(t *testing.T) {
		for _, o := range []SummarizationOptions{{MinKeepSteps: -1}, {SummaryTokens: -1}} {
			if _, err := NewSummarization(always("x"), o); err == nil {
				t.Errorf("NewSummarization(%+v) took it", o)
			}
		}
		if _, err := NewSummarization(nil, SummarizationOptions{}); err == nil {
			t.Error("NewSummarization(nil) took it")
		}
	})
}

func TestCheckPrompt(t *testing.T) {
	r := &hook.Result{Tool: "t", CallID: "c"}
	for _, c := range []struct {
		name   string
		prompt []Message
		want   string // "" for none
	}{
		{"summary prompt", []Message{{Role: RoleSystem, Text: "rules"}, {Role: RoleUser, Text: "text"}}, ""},
		{"assistant text", []Message{{Role: RoleAssistant, Text: "so far"}}, ""},
		{"empty", nil, "empty prompt"},
		{"system only", []Message{{Role: RoleSystem, Text: "rules"}, {Role: RoleUser}}, "no user or assistant text"},
		{"tool message", []Message{{Role: RoleUser, Text: "a"}, {Role: RoleTool, Result: r}}, "message 1 is a tool message"},
		{"tool call", []Message{{Role: RoleAssistant, Text: "a", ToolCalls: []ToolCall{{Tool: "t", ID: "c"}}}}, "message 0 (assistant) carries tool calls"},
		{"unknown role", []Message{{Role: "critic", Text: "a"}}, `message 0 has role "critic"`},
	} {
		err := CheckPrompt(c.prompt)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

func TestPromptMessages(t *testing.T) {
	tag := func(role string) func(string) string { return func(text string) string { return role + ":" + text } }
	prompt := []Message{
		{Role: RoleSystem, Text: "rules"},
		{Role: RoleUser, Text: "question"},
		{Role: RoleAssistant},
		{Role: RoleAssistant, Text: "answer"},
		{Role: RoleUser, Text: "more"},
	}
	got, err := PromptMessages(prompt, tag("s"), tag("u"), tag("a"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"s:rules", "u:question", "a:answer", "u:more"}
	if !slices.Equal(got, want) {
		t.Errorf("PromptMessages = %q, want %q", got, want)
	}
	if _, err := PromptMessages([]Message{{Role: RoleTool, Text: "x"}}, tag("s"), tag("u"), tag("a")); err == nil {
		t.Error("PromptMessages took a tool message")
	}
}
