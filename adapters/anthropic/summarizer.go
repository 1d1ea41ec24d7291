package toolcasanthropic

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolcas/toolcas/compact"
)

// DefaultSummaryMaxTokens is the max_tokens a Summarizer asks for unless
// told otherwise: room for a summary of compact.Summarization's default
// length (about 1024 tokens), twice over.
const DefaultSummaryMaxTokens = 2048

// Summarizer is a compact.Summarizer that has a model of the Messages API
// write the summaries of compact.Summarization:
//
//	s, err := toolcasanthropic.NewSummarizer(client, anthropic.ModelClaudeHaiku4_5)
//	c, err := compact.NewSummarization(s, compact.SummarizationOptions{})
//
// A prompt's system messages go, in order, to the request's System; its
// user and assistant messages are the request's messages, a run of one
// role joined into one message. A message with no text is left out. A
// tool message, or an assistant message with tool calls, is refused: a
// summary prompt is plain text. It is safe for concurrent use.
type Summarizer struct {
	client  anthropic.Client
	params  anthropic.MessageNewParams
	reqOpts []option.RequestOption
}

var _ compact.Summarizer = (*Summarizer)(nil)

// A SummarizerOption configures NewSummarizer.
type SummarizerOption func(*Summarizer) error

// WithMaxTokens sets the max_tokens of every request (default
// DefaultSummaryMaxTokens).
func WithMaxTokens(n int64) SummarizerOption {
	return func(s *Summarizer) error {
		if n < 1 {
			return fmt.Errorf("toolcasanthropic: summarizer max_tokens must be at least 1, got %d", n)
		}
		s.params.MaxTokens = n
		return nil
	}
}

// WithMessageParams sets the rest of every request: Thinking, Metadata,
// StopSequences and the like, and MaxTokens when it is not 0. Its Model,
// Messages and System are replaced by the Summarizer's.
func WithMessageParams(p anthropic.MessageNewParams) SummarizerOption {
	return func(s *Summarizer) error {
		if p.MaxTokens < 0 {
			return fmt.Errorf("toolcasanthropic: summarizer max_tokens must be at least 1, got %d", p.MaxTokens)
		}
		if p.MaxTokens == 0 {
			p.MaxTokens = s.params.MaxTokens
		}
		s.params = p
		return nil
	}
}

// WithRequestOptions adds options to every request, after the client's.
func WithRequestOptions(opts ...option.RequestOption) SummarizerOption {
	return func(s *Summarizer) error {
		s.reqOpts = append(s.reqOpts, opts...)
		return nil
	}
}

// NewSummarizer returns a Summarizer asking model through client.
func NewSummarizer(client anthropic.Client, model anthropic.Model, opts ...SummarizerOption) (*Summarizer, error) {
	if model == "" {
		return nil, errors.New("toolcasanthropic: summarizer with no model")
	}
	s := &Summarizer{client: client, params: anthropic.MessageNewParams{MaxTokens: DefaultSummaryMaxTokens}}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	s.params.Model = model
	return s, nil
}

// Summarize implements compact.Summarizer: it returns the text blocks of
// the reply, joined. A reply with no text, a refusal, and a reply cut off
// at max_tokens or at the context window are errors.
func (s *Summarizer) Summarize(ctx context.Context, prompt []compact.Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("toolcasanthropic: summarize: %w", err)
	}
	params := s.params
	var err error
	if params.System, params.Messages, err = messagesOf(prompt); err != nil {
		return "", err
	}
	msg, err := s.client.Messages.New(ctx, params, s.reqOpts...)
	if err != nil {
		return "", fmt.Errorf("toolcasanthropic: summarize: %w", err)
	}
	var b strings.Builder
	for _, c := range msg.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	switch {
	case msg.StopReason == anthropic.StopReasonRefusal:
		return "", errors.New("toolcasanthropic: summarize: the model refused (stop reason \"refusal\")")
	case msg.StopReason == anthropic.StopReasonMaxTokens:
		return "", fmt.Errorf("toolcasanthropic: summarize: the reply was cut off at max_tokens (%d)", params.MaxTokens)
	case msg.StopReason == anthropic.StopReasonModelContextWindowExceeded:
		return "", errors.New("toolcasanthropic: summarize: the reply was cut off at the model's context window (stop reason \"model_context_window_exceeded\")")
	case strings.TrimSpace(b.String()) == "":
		return "", fmt.Errorf("toolcasanthropic: summarize: the model returned no text (stop reason %q)", msg.StopReason)
	}
	return b.String(), nil
}

// messagesOf turns a summary prompt into the System and the messages of a
// request.
func messagesOf(prompt []compact.Message) ([]anthropic.TextBlockParam, []anthropic.MessageParam, error) {
	if err := compact.CheckPrompt(prompt); err != nil {
		return nil, nil, fmt.Errorf("toolcasanthropic: summarize: %w", err)
	}
	var (
		system []anthropic.TextBlockParam
		msgs   []anthropic.MessageParam
	)
	for _, m := range prompt {
		switch {
		case m.Text == "":
			continue
		case m.Role == compact.RoleSystem:
			system = append(system, anthropic.TextBlockParam{Text: m.Text})
			continue
		}
		block := anthropic.NewTextBlock(m.Text)
		last := len(msgs) - 1
		switch {
		case m.Role == compact.RoleUser && last >= 0 && msgs[last].OfUser != nil:
			msgs[last].OfUser.Content = append(msgs[last].OfUser.Content, block)
		case m.Role == compact.RoleUser:
			msgs = append(msgs, anthropic.NewUserMessage(block))
		case last >= 0 && msgs[last].OfAssistant != nil:
			msgs[last].OfAssistant.Content = append(msgs[last].OfAssistant.Content, block)
		default:
			msgs = append(msgs, anthropic.NewAssistantMessage(block))
		}
	}
	return system, msgs, nil
}
