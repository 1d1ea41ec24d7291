package toolcasopenai

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolcas/toolcas/compact"
)

// Summarizer is a compact.Summarizer that has a Chat Completions model
// write the summaries of compact.Summarization:
//
//	s, err := toolcasopenai.NewSummarizer(client, openai.ChatModelGPT5_4Mini)
//	c, err := compact.NewSummarization(s, compact.SummarizationOptions{})
//
// A prompt's system, user and assistant messages go as messages of those
// roles, in order; a message with no text is left out. A tool message, or
// an assistant message with tool calls, is refused: a summary prompt is
// plain text. It is safe for concurrent use.
type Summarizer struct {
	client  openai.Client
	params  openai.ChatCompletionNewParams
	reqOpts []option.RequestOption
}

var _ compact.Summarizer = (*Summarizer)(nil)

// A SummarizerOption configures NewSummarizer.
type SummarizerOption func(*Summarizer) error

// WithChatParams sets the rest of every request: MaxCompletionTokens,
// Temperature, ReasoningEffort and the like. Its Model and Messages are
// replaced by the Summarizer's.
func WithChatParams(p openai.ChatCompletionNewParams) SummarizerOption {
	return func(s *Summarizer) error {
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
func NewSummarizer(client openai.Client, model openai.ChatModel, opts ...SummarizerOption) (*Summarizer, error) {
	if model == "" {
		return nil, errors.New("toolcasopenai: summarizer with no model")
	}
	s := &Summarizer{client: client}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	s.params.Model = model
	return s, nil
}

// Summarize implements compact.Summarizer: it returns the content of the
// reply's first choice. A reply with no text, a refusal, and a reply cut
// off at the token limit (finish reason "length") are errors.
func (s *Summarizer) Summarize(ctx context.Context, prompt []compact.Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("toolcasopenai: summarize: %w", err)
	}
	msgs, err := chatMessages(prompt)
	if err != nil {
		return "", err
	}
	params := s.params
	params.Messages = msgs
	c, err := s.client.Chat.Completions.New(ctx, params, s.reqOpts...)
	if err != nil {
		return "", fmt.Errorf("toolcasopenai: summarize: %w", err)
	}
	if len(c.Choices) == 0 {
		return "", errors.New("toolcasopenai: summarize: the model returned no choice")
	}
	choice := c.Choices[0]
	switch {
	case choice.Message.Refusal != "":
		return "", fmt.Errorf("toolcasopenai: summarize: the model refused: %s", choice.Message.Refusal)
	case choice.FinishReason == "length":
		return "", errors.New("toolcasopenai: summarize: the reply was cut off at the token limit (finish reason \"length\")")
	case strings.TrimSpace(choice.Message.Content) == "":
		return "", fmt.Errorf("toolcasopenai: summarize: the model returned no text (finish reason %q)", choice.FinishReason)
	}
	return choice.Message.Content, nil
}

// chatMessages turns a summary prompt into Chat Completions messages.
func chatMessages(prompt []compact.Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	out, err := compact.PromptMessages(prompt, openai.SystemMessage[string], openai.UserMessage[string], openai.AssistantMessage[string])
	if err != nil {
		return nil, fmt.Errorf("toolcasopenai: summarize: %w", err)
	}
	return out, nil
}
