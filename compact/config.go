package compact

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/strictjson"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/tokens"
)

// Type names written in configuration. Haystack's names for the same
// components (CompactionHook, SlidingWindowCompactor,
// ToolResultPruningCompactor, ToolResultOffloadCompactor,
// SummarizationCompactor, ApproximateTokenCounter, TiktokenCounter, under
// any haystack.* module) are accepted when loading, so that a Haystack
// configuration loads.
const (
	TypeTrigger           = "toolcas.compact.Trigger"
	TypeSlidingWindow     = "toolcas.compact.SlidingWindow"
	TypeToolResultPruning = "toolcas.compact.ToolResultPruning"
	TypeOffloading        = "toolcas.compact.Offloading"
	TypeSummarization     = "toolcas.compact.Summarization"
	TypeCounter           = "toolcas.compact.Counter"
)

var haystackTypes = map[string]string{
	"CompactionHook":             TypeTrigger,
	"SlidingWindowCompactor":     TypeSlidingWindow,
	"ToolResultPruningCompactor": TypeToolResultPruning,
	"ToolResultOffloadCompactor": TypeOffloading,
	"SummarizationCompactor":     TypeSummarization,
	"ApproximateTokenCounter":    TypeCounter,
	"TiktokenCounter":            TypeCounter,
}

// canonical maps a Haystack type name to toolcas's, and says whether it was
// Haystack's.
func canonical(name string) (string, bool) { return strictjson.Canonical(name, haystackTypes) }

type triggerParams struct {
	Compactor     json.RawMessage `json:"compactor"`
	ContextWindow *int            `json:"context_window"`
	CompactAt     *float64        `json:"compact_at,omitempty"`
	CompactTo     *float64        `json:"compact_to,omitempty"`
	TokenCounter  json.RawMessage `json:"token_counter,omitempty"`
}

type windowParams struct {
	MinKeepSteps *int    `json:"min_keep_steps,omitempty"`
	OmissionNote *string `json:"omission_note"`
}

type pruningParams struct {
	MinKeepSteps *int     `json:"min_keep_steps,omitempty"`
	MinTokens    *int     `json:"min_tokens,omitempty"`
	Placeholder  string   `json:"placeholder,omitempty"`
	SkipMetaKeys []string `json:"skip_meta_keys,omitempty"`
}

// offloadingParams are Haystack's ToolResultOffloadCompactor's (store,
// min_keep_steps, min_tokens, preview_chars) and toolcas's own: the run
// written to, and the hook's options that shape pointers.
type offloadingParams struct {
	Store         json.RawMessage `json:"store"`
	Run           string          `json:"run,omitempty"`
	MinKeepSteps  *int            `json:"min_keep_steps,omitempty"`
	MinTokens     *int            `json:"min_tokens,omitempty"`
	SkipMetaKeys  []string        `json:"skip_meta_keys,omitempty"`
	PreviewChars  *int            `json:"preview_chars,omitempty"`
	ReadTool      string          `json:"read_tool,omitempty"`
	ShortPointers bool            `json:"short_pointers,omitempty"`
}

type summarizationParams struct {
	// ChatGenerator is Haystack's model; here the Summarizer comes from
	// the program (LoadOptions), and the field is read and ignored.
	ChatGenerator  json.RawMessage `json:"chat_generator,omitempty"`
	MinKeepSteps   *int            `json:"min_keep_steps,omitempty"`
	SummaryTokens  *int            `json:"approximate_summary_tokens,omitempty"`
	Instruction    string          `json:"summary_instruction,omitempty"`
	RaiseOnFailure bool            `json:"raise_on_failure,omitempty"`
}

type counterParams struct {
	Text           string   `json:"text,omitempty"`
	Encoding       string   `json:"encoding,omitempty"` // Haystack's TiktokenCounter
	CharsPerToken  *float64 `json:"chars_per_token,omitempty"`
	TokensPerImage *int     `json:"tokens_per_image,omitempty"`
	TokensPerFile  *int     `json:"tokens_per_file,omitempty"`
}

// MarshalJSON saves the trigger, its compactor and its counter in
// Haystack's {"type", "init_parameters"} shape. An Offloading compactor is
// saved with its store, which must then be a hook.ConfigurableStore (or
// none, for per-run stores).
func (t *Trigger) MarshalJSON() ([]byte, error) {
	comp, err := marshalCompactor(t.compactor)
	if err != nil {
		return nil, err
	}
	counter, err := marshalCounter(t.counter)
	if err != nil {
		return nil, err
	}
	w := t.contextWindow
	p, err := json.Marshal(triggerParams{Compactor: comp, ContextWindow: &w, CompactAt: &t.compactAt, CompactTo: &t.compactTo, TokenCounter: counter})
	if err != nil {
		return nil, err
	}
	return json.Marshal(policy.Typed{Type: TypeTrigger, InitParameters: p})
}

func marshalCompactor(c Compactor) ([]byte, error) {
	var typ string
	var params any
	switch c := c.(type) {
	case *SlidingWindow:
		n := c.minKeepSteps
		p := windowParams{MinKeepSteps: &n}
		if c.note != "" {
			p.OmissionNote = &c.note
		}
		typ, params = TypeSlidingWindow, p
	case *ToolResultPruning:
		keep, min := c.opts.MinKeepSteps, c.opts.MinTokens
		typ, params = TypeToolResultPruning, pruningParams{MinKeepSteps: &keep, MinTokens: &min, Placeholder: c.placeholder, SkipMetaKeys: c.opts.SkipMetaKeys}
	case *Offloading:
		p, err := c.params()
		if err != nil {
			return nil, err
		}
		typ, params = TypeOffloading, p
	case *Summarization:
		keep, n := c.opts.MinKeepSteps, c.opts.SummaryTokens
		typ, params = TypeSummarization, summarizationParams{MinKeepSteps: &keep, SummaryTokens: &n, Instruction: c.opts.Instruction, RaiseOnFailure: c.opts.FailOnError}
	default:
		return nil, fmt.Errorf("compact: a %T cannot be saved as configuration", c)
	}
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return json.Marshal(policy.Typed{Type: typ, InitParameters: b})
}

func marshalCounter(c TokenCounter) ([]byte, error) {
	cc, ok := c.(Counter)
	if !ok {
		return nil, fmt.Errorf("compact: a %T counter cannot be saved as configuration", c)
	}
	text := cc.Text
	if text == nil {
		text = tokens.Approximate{}
	}
	p := counterParams{Text: text.Name()}
	if a, ok := text.(tokens.Approximate); ok {
		r := a.CharsPerToken
		if r == 0 {
			r = tokens.DefaultCharsPerToken
		}
		p.CharsPerToken = &r
	}
	img, file := cmp.Or(cc.TokensPerImage, DefaultTokensPerImage), cmp.Or(cc.TokensPerFile, DefaultTokensPerFile)
	if cc.NoMediaTokens {
		img, file = 0, 0
	}
	p.TokensPerImage, p.TokensPerFile = &img, &file
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return json.Marshal(policy.Typed{Type: TypeCounter, InitParameters: b})
}

// LoadOptions give LoadTrigger what configuration cannot hold.
type LoadOptions struct {
	// Summarizer writes the summaries of a Summarization compactor.
	Summarizer Summarizer
}

// LoadTrigger builds a trigger from configuration saved by MarshalJSON or
// by Haystack's CompactionHook.to_dict. Unknown types and fields are
// errors that name them.
func LoadTrigger(data []byte, o LoadOptions) (*Trigger, error) {
	var t policy.Typed
	if err := strictjson.Decode(data, &t); err != nil {
		return nil, fmt.Errorf("compact: load trigger: %w", err)
	}
	if typ, _ := canonical(t.Type); typ != TypeTrigger {
		return nil, fmt.Errorf("compact: load trigger: unknown type %q, want %s", t.Type, TypeTrigger)
	}
	var p triggerParams
	if err := strictjson.Decode(orEmpty(t.InitParameters), &p); err != nil {
		return nil, fmt.Errorf("compact: load %s: %w", t.Type, err)
	}
	if p.ContextWindow == nil {
		return nil, fmt.Errorf("compact: load %s: no context_window", t.Type)
	}
	if len(p.Compactor) == 0 || string(bytes.TrimSpace(p.Compactor)) == "null" {
		return nil, fmt.Errorf("compact: load %s: no compactor", t.Type)
	}
	comp, err := loadCompactor(p.Compactor, o)
	if err != nil {
		return nil, err
	}
	opts := []TriggerOption{}
	if p.CompactAt != nil {
		opts = append(opts, CompactAt(*p.CompactAt))
	}
	if p.CompactTo != nil {
		opts = append(opts, CompactTo(*p.CompactTo))
	}
	if len(p.TokenCounter) > 0 && string(bytes.TrimSpace(p.TokenCounter)) != "null" {
		c, err := loadCounter(p.TokenCounter)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithCounter(c))
	}
	return NewTrigger(comp, *p.ContextWindow, opts...)
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 || string(bytes.TrimSpace(b)) == "null" {
		return json.RawMessage(`{}`)
	}
	return b
}

func loadCompactor(data []byte, o LoadOptions) (Compactor, error) {
	var t policy.Typed
	if err := strictjson.Decode(data, &t); err != nil {
		return nil, fmt.Errorf("compact: load compactor: %w", err)
	}
	typ, _ := canonical(t.Type)
	params := orEmpty(t.InitParameters)
	fail := func(err error) (Compactor, error) { return nil, fmt.Errorf("compact: load %s: %w", t.Type, err) }
	switch typ {
	case TypeSlidingWindow:
		var p windowParams
		if err := strictjson.Decode(params, &p); err != nil {
			return fail(err)
		}
		// Haystack's default note when the field is absent; null
		// (None) removes silently.
		note := DefaultOmissionNote
		if bytes.Contains(params, []byte(`"omission_note"`)) {
			note = ""
			if p.OmissionNote != nil {
				note = *p.OmissionNote
			}
		}
		keep := 1
		if p.MinKeepSteps != nil {
			keep = *p.MinKeepSteps
		}
		return NewSlidingWindow(keep, note)
	case TypeToolResultPruning:
		var p pruningParams
		if err := strictjson.Decode(params, &p); err != nil {
			return fail(err)
		}
		var opts Options
		if p.MinKeepSteps != nil {
			if opts.MinKeepSteps = *p.MinKeepSteps; opts.MinKeepSteps < 1 {
				return fail(fmt.Errorf("min_keep_steps must be at least 1, got %d", opts.MinKeepSteps))
			}
		}
		if p.MinTokens != nil {
			opts.MinTokens = *p.MinTokens
			opts.NoMinTokens = opts.MinTokens == 0
		}
		opts.SkipMetaKeys = p.SkipMetaKeys
		return NewToolResultPruning(opts, p.Placeholder)
	case TypeOffloading:
		var p offloadingParams
		if err := strictjson.Decode(params, &p); err != nil {
			return fail(err)
		}
		c, err := loadOffloading(p)
		if err != nil {
			return fail(err)
		}
		return c, nil
	case TypeSummarization:
		var p summarizationParams
		if err := strictjson.Decode(params, &p); err != nil {
			return fail(err)
		}
		if o.Summarizer == nil {
			return fail(errors.New("a summarization compactor needs a Summarizer: pass one in LoadOptions"))
		}
		so := SummarizationOptions{Instruction: p.Instruction, FailOnError: p.RaiseOnFailure}
		if p.MinKeepSteps != nil {
			so.MinKeepSteps, so.KeepNoSteps = *p.MinKeepSteps, *p.MinKeepSteps == 0
		}
		if p.SummaryTokens != nil {
			if so.SummaryTokens = *p.SummaryTokens; so.SummaryTokens < 1 {
				return fail(fmt.Errorf("approximate_summary_tokens must be a positive number of tokens, got %d", so.SummaryTokens))
			}
		}
		return NewSummarization(o.Summarizer, so)
	}
	return nil, fmt.Errorf("compact: unknown compactor type %q (known: %s, %s, %s, %s)", t.Type, TypeSlidingWindow, TypeToolResultPruning, TypeOffloading, TypeSummarization)
}

func loadCounter(data []byte) (TokenCounter, error) {
	var t policy.Typed
	if err := strictjson.Decode(data, &t); err != nil {
		return nil, fmt.Errorf("compact: load token_counter: %w", err)
	}
	typ, haystack := canonical(t.Type)
	if typ != TypeCounter {
		if strings.HasSuffix(t.Type, ".OpenAITokenCounter") {
			return nil, fmt.Errorf("compact: load token_counter: %s counts through OpenAI's API; use %s with \"text\": \"o200k_base\", which counts the same offline", t.Type, TypeCounter)
		}
		return nil, fmt.Errorf("compact: load token_counter: unknown type %q, want %s", t.Type, TypeCounter)
	}
	var p counterParams
	if err := strictjson.Decode(orEmpty(t.InitParameters), &p); err != nil {
		return nil, fmt.Errorf("compact: load %s: %w", t.Type, err)
	}
	name := p.Text
	switch {
	case p.Encoding != "" && p.Text != "":
		return nil, fmt.Errorf("compact: load %s: give text or encoding, not both", t.Type)
	case p.Encoding != "":
		name = p.Encoding
	case name == "" && haystack && strings.HasSuffix(t.Type, ".TiktokenCounter"):
		name = tokens.O200kBase // TiktokenCounter's default
	case name == "":
		name = tokens.ApproximateName
	}
	text, err := tokens.ByName(name)
	if err != nil {
		return nil, fmt.Errorf("compact: load %s: %w", t.Type, err)
	}
	if p.CharsPerToken != nil {
		if _, ok := text.(tokens.Approximate); !ok {
			return nil, fmt.Errorf("compact: load %s: chars_per_token applies to the approximate counter only", t.Type)
		}
		if *p.CharsPerToken <= 0 {
			return nil, fmt.Errorf("compact: load %s: chars_per_token must be greater than 0, got %v", t.Type, *p.CharsPerToken)
		}
		text = tokens.Approximate{CharsPerToken: *p.CharsPerToken}
	}
	c := Counter{Text: text}
	img, file := DefaultTokensPerImage, DefaultTokensPerFile
	if p.TokensPerImage != nil {
		img = *p.TokensPerImage
	}
	if p.TokensPerFile != nil {
		file = *p.TokensPerFile
	}
	if img < 0 || file < 0 {
		return nil, fmt.Errorf("compact: load %s: tokens_per_image %d, tokens_per_file %d: want 0 or more", t.Type, img, file)
	}
	switch {
	case img == 0 && file == 0:
		c.NoMediaTokens = true
	case img == 0 || file == 0:
		return nil, fmt.Errorf("compact: load %s: tokens_per_image %d, tokens_per_file %d: charge both, or neither", t.Type, img, file)
	default:
		c.TokensPerImage, c.TokensPerFile = img, file
	}
	return c, nil
}

// params returns what saves the compactor: its options, its run, and its
// hook's store and pointer options, read back from the hook's own
// configuration.
func (c *Offloading) params() (offloadingParams, error) {
	b, err := json.Marshal(c.hook)
	if err != nil {
		return offloadingParams{}, fmt.Errorf("compact: save the offloading compactor: %w", err)
	}
	var h struct {
		InitParameters struct {
			Store         json.RawMessage `json:"store"`
			PreviewChars  *int            `json:"preview_chars"`
			ReadTool      string          `json:"read_tool"`
			ShortPointers bool            `json:"short_pointers"`
		} `json:"init_parameters"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return offloadingParams{}, fmt.Errorf("compact: save the offloading compactor: %w", err)
	}
	keep, min := c.opts.MinKeepSteps, c.opts.MinTokens
	hp := h.InitParameters
	return offloadingParams{Store: hp.Store, Run: c.run, MinKeepSteps: &keep, MinTokens: &min, SkipMetaKeys: c.opts.SkipMetaKeys,
		PreviewChars: hp.PreviewChars, ReadTool: hp.ReadTool, ShortPointers: hp.ShortPointers}, nil
}

// loadOffloading checks the parameters, as Haystack's compactor does, then
// opens the store; the compactor closes it (Close).
func loadOffloading(p offloadingParams) (*Offloading, error) {
	var opts Options
	if p.MinKeepSteps != nil {
		if opts.MinKeepSteps = *p.MinKeepSteps; opts.MinKeepSteps < 1 {
			return nil, fmt.Errorf("min_keep_steps must be at least 1, got %d", opts.MinKeepSteps)
		}
	}
	if p.MinTokens != nil {
		opts.MinTokens = *p.MinTokens
		opts.NoMinTokens = opts.MinTokens == 0
	}
	opts.SkipMetaKeys = p.SkipMetaKeys
	var hookOpts []hook.Option
	if p.PreviewChars != nil {
		hookOpts = append(hookOpts, hook.WithPreviewChars(*p.PreviewChars))
	}
	if p.ReadTool != "" {
		hookOpts = append(hookOpts, hook.WithReadToolName(p.ReadTool))
	}
	if p.ShortPointers {
		hookOpts = append(hookOpts, hook.WithShortPointers())
	}
	// Everything but the store is checked before the store is opened, so
	// that a bad configuration creates nothing.
	if _, err := NewOffloading(nil, p.Run, opts, hookOpts...); err != nil {
		return nil, err
	}
	store, err := hook.LoadStore(p.Store)
	if err != nil {
		return nil, err
	}
	c, err := NewOffloading(store, p.Run, opts, hookOpts...)
	if err != nil {
		if cl, ok := store.(io.Closer); ok {
			cl.Close()
		}
		return nil, err
	}
	if cl, ok := store.(io.Closer); ok {
		c.opened = cl
	}
	return c, nil
}
