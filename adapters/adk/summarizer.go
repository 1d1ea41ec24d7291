package toolcasadk

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/adk/v2/model"
	"google.golang.org/genai"

	"github.com/toolcas/toolcas/compact"
)

// Summarizer is a compact.Summarizer that has an adk-go model write the
// summaries of compact.Summarization:
//
//	s, err := toolcasadk.NewSummarizer(llm, &genai.GenerateContentConfig{MaxOutputTokens: 2048})
//	c, err := compact.NewSummarization(s, compact.SummarizationOptions{})
//
// A prompt's system messages become, in order, the parts of the request's
// SystemInstruction; its user and assistant messages are the request's
// contents, of roles "user" and "model", a run of one role joined into one
// content. A message with no text is left out. A tool message, or an
// assistant message with tool calls, is refused: a summary prompt is plain
// text. It is as safe for concurrent use as its model.
type Summarizer struct {
	llm    model.LLM
	config genai.GenerateContentConfig
}

var _ compact.Summarizer = (*Summarizer)(nil)

// NewSummarizer returns a Summarizer asking llm, without streaming. config
// (nil for none) is copied into every request: MaxOutputTokens,
// Temperature, ThinkingConfig and the like; its SystemInstruction is
// replaced by the prompt's system messages.
func NewSummarizer(llm model.LLM, config *genai.GenerateContentConfig) (*Summarizer, error) {
	if llm == nil {
		return nil, errors.New("toolcasadk: summarizer with no model")
	}
	s := &Summarizer{llm: llm}
	if config != nil {
		s.config = *config
	}
	return s, nil
}

// Summarize implements compact.Summarizer: it returns the text parts of the
// model's last complete (not partial) response, joined; thoughts are left
// out. No response, a response with an error code, one with no text, and
// one cut off at the token limit (finish reason MAX_TOKENS) are errors.
func (s *Summarizer) Summarize(ctx context.Context, prompt []compact.Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("toolcasadk: summarize: %w", err)
	}
	system, contents, err := contentsOf(prompt)
	if err != nil {
		return "", err
	}
	config := s.config
	config.SystemInstruction = system
	if config.HTTPOptions != nil {
		// A model may set headers on the request's options (Gemini does):
		// give each request its own.
		o := *config.HTTPOptions
		o.Headers = o.Headers.Clone()
		config.HTTPOptions = &o
	}
	req := &model.LLMRequest{Model: s.llm.Name(), Contents: contents, Config: &config}
	var last *model.LLMResponse
	for resp, err := range s.llm.GenerateContent(ctx, req, false) {
		if err != nil {
			return "", fmt.Errorf("toolcasadk: summarize: %w", err)
		}
		if resp != nil && !resp.Partial {
			last = resp
		}
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("toolcasadk: summarize: %w", err)
	}
	if last == nil {
		return "", errors.New("toolcasadk: summarize: the model returned no response")
	}
	if last.ErrorCode != "" || last.ErrorMessage != "" {
		return "", fmt.Errorf("toolcasadk: summarize: the model answered with an error: %s", strings.TrimSpace(last.ErrorCode+" "+last.ErrorMessage))
	}
	var b strings.Builder
	if last.Content != nil {
		for _, p := range last.Content.Parts {
			if p != nil && !p.Thought {
				b.WriteString(p.Text)
			}
		}
	}
	switch {
	case last.FinishReason == genai.FinishReasonMaxTokens:
		return "", errors.New("toolcasadk: summarize: the reply was cut off at the token limit (finish reason MAX_TOKENS)")
	case strings.TrimSpace(b.String()) == "" && last.FinishReason != "":
		return "", fmt.Errorf("toolcasadk: summarize: the model returned no text (finish reason %s)", last.FinishReason)
	case strings.TrimSpace(b.String()) == "":
		return "", errors.New("toolcasadk: summarize: the model returned no text")
	}
	return b.String(), nil
}

// contentsOf turns a summary prompt into a system instruction (nil when
// there is none) and contents.
func contentsOf(prompt []compact.Message) (*genai.Content, []*genai.Content, error) {
	if err := compact.CheckPrompt(prompt); err != nil {
		return nil, nil, fmt.Errorf("toolcasadk: summarize: %w", err)
	}
	var (
		system   *genai.Content
		contents []*genai.Content
	)
	for _, m := range prompt {
		switch {
		case m.Text == "":
			continue
		case m.Role == compact.RoleSystem:
			if system == nil {
				// adk-go's own system instructions are of the user role.
				system = &genai.Content{Role: genai.RoleUser}
			}
			system.Parts = append(system.Parts, genai.NewPartFromText(m.Text))
			continue
		}
		role := genai.RoleUser
		if m.Role == compact.RoleAssistant {
			role = genai.RoleModel
		}
		if n := len(contents); n > 0 && contents[n-1].Role == role {
			contents[n-1].Parts = append(contents[n-1].Parts, genai.NewPartFromText(m.Text))
			continue
		}
		contents = append(contents, genai.NewContentFromText(m.Text, genai.Role(role)))
	}
	return system, contents, nil
}
