package toolcaseino

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/toolcas/toolcas/compact"
)

// Summarizer is a compact.Summarizer that has an eino chat model write the
// summaries of compact.Summarization:
//
//	s, err := toolcaseino.NewSummarizer(chatModel, model.WithMaxTokens(2048))
//	c, err := compact.NewSummarization(s, compact.SummarizationOptions{})
//
// A prompt's system, user and assistant messages go to Generate as
// schema.Message of those roles, in order; a message with no text is left
// out. A tool message, or an assistant message with tool calls, is
// refused: a summary prompt is plain text. It is as safe for concurrent
// use as its model.
type Summarizer struct {
	model model.BaseChatModel
	opts  []model.Option
}

var _ compact.Summarizer = (*Summarizer)(nil)

// NewSummarizer returns a Summarizer calling m's Generate with opts.
func NewSummarizer(m model.BaseChatModel, opts ...model.Option) (*Summarizer, error) {
	if m == nil {
		return nil, errors.New("toolcaseino: summarizer with no model")
	}
	return &Summarizer{model: m, opts: opts}, nil
}

// Summarize implements compact.Summarizer: it returns the reply's Content,
// or, when that is empty, its text parts (AssistantGenMultiContent),
// joined; reasoning is left out. A reply with no text, and one cut off at
// the token limit (finish reason "length"), are errors.
func (s *Summarizer) Summarize(ctx context.Context, prompt []compact.Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("toolcaseino: summarize: %w", err)
	}
	in, err := messagesOf(prompt)
	if err != nil {
		return "", err
	}
	out, err := s.model.Generate(ctx, in, s.opts...)
	if err != nil {
		return "", fmt.Errorf("toolcaseino: summarize: %w", err)
	}
	if out == nil {
		return "", errors.New("toolcaseino: summarize: the model returned no message")
	}
	text := out.Content
	if text == "" {
		var b strings.Builder
		for _, p := range out.AssistantGenMultiContent {
			if p.Type == schema.ChatMessagePartTypeText {
				b.WriteString(p.Text)
			}
		}
		text = b.String()
	}
	finish := ""
	if out.ResponseMeta != nil {
		finish = out.ResponseMeta.FinishReason
	}
	switch {
	case finish == "length":
		return "", errors.New("toolcaseino: summarize: the reply was cut off at the token limit (finish reason \"length\")")
	case strings.TrimSpace(text) == "" && finish != "":
		return "", fmt.Errorf("toolcaseino: summarize: the model returned no text (finish reason %q)", finish)
	case strings.TrimSpace(text) == "":
		return "", errors.New("toolcaseino: summarize: the model returned no text")
	}
	return text, nil
}

// messagesOf turns a summary prompt into eino messages.
func messagesOf(prompt []compact.Message) ([]*schema.Message, error) {
	assistant := func(text string) *schema.Message { return schema.AssistantMessage(text, nil) }
	out, err := compact.PromptMessages(prompt, schema.SystemMessage, schema.UserMessage, assistant)
	if err != nil {
		return nil, fmt.Errorf("toolcaseino: summarize: %w", err)
	}
	return out, nil
}
