package toolcaseino_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/schema"
)

// scriptedModel stands in for an LLM: it decides each turn from the
// messages it is sent, so that one model serves concurrent runs, and it
// records every request.
type scriptedModel struct {
	next func(in []*schema.Message) *schema.Message

	mu   sync.Mutex
	sent [][]*schema.Message
}

func (m *scriptedModel) Generate(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	cp := make([]*schema.Message, len(in))
	for i, msg := range in {
		c := *msg
		cp[i] = &c
	}
	m.mu.Lock()
	m.sent = append(m.sent, cp)
	m.mu.Unlock()
	return m.next(in), nil
}

func (m *scriptedModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	out, err := m.Generate(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{out}), nil
}

func (m *scriptedModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return m, nil
}

// requests returns what the model was sent, request by request.
func (m *scriptedModel) requests() [][]*schema.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]*schema.Message(nil), m.sent...)
}

func callTool(id, name string, args any) *schema.Message {
	b, _ := json.Marshal(args)
	return schema.AssistantMessage("", []schema.ToolCall{{ID: id, Type: "function", Function: schema.FunctionCall{Name: name, Arguments: string(b)}}})
}

var keyRE = regexp.MustCompile(`\(key '([^']+)'`)

// pointerKeys returns the keys a pointer names.
func pointerKeys(s string) []string {
	var keys []string
	for _, m := range keyRE.FindAllStringSubmatch(s, -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// toolText returns what a tool message says in text, whether it came as
// content or as multimodal parts.
func toolText(m *schema.Message) string {
	if m.Content != "" {
		return m.Content
	}
	var b strings.Builder
	for _, p := range m.UserInputMultiContent {
		if p.Type == schema.ChatMessagePartTypeText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// toolImages returns the decoded images of a tool message.
func toolImages(m *schema.Message) [][]byte {
	var out [][]byte
	for _, p := range m.UserInputMultiContent {
		if p.Type == schema.ChatMessagePartTypeImageURL && p.Image != nil && p.Image.Base64Data != nil {
			b, _ := base64.StdEncoding.DecodeString(*p.Image.Base64Data)
			out = append(out, b)
		}
	}
	return out
}

// unpage reassembles the text of a read-back page: the header line dropped,
// each line's number and tab stripped.
func unpage(page string) (string, error) {
	head, body, ok := strings.Cut(page, "\n")
	if !ok || !strings.HasPrefix(head, "[") {
		return "", fmt.Errorf("no page header in %.80q", page)
	}
	var b strings.Builder
	for i, l := range strings.SplitAfter(body, "\n") {
		n, rest, ok := strings.Cut(l, "\t")
		if !ok || n != fmt.Sprint(i+1) {
			return "", fmt.Errorf("line %d of the page is %.40q", i+1, l)
		}
		b.WriteString(rest)
	}
	return b.String(), nil
}

// bigLog is a tool result far over any threshold: lines a model would
// rather not carry. It ends without a line break, as a page of the
// read-back tool shows its last line either way.
func bigLog(seed string, lines int) string {
	var b strings.Builder
	for i := range lines {
		fmt.Fprintf(&b, "%s line %05d: status=ok latency=%dms\n", seed, i, (i*37)%911)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// pngBytes is a small valid PNG (1x1, red).
var pngBytes, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")

// textTool is an invokable tool returning fixed text for its "seed" argument.
type textTool struct {
	name string
	out  func(seed string) string
}

func (t textTool) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: t.name, Desc: "returns a log",
		ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{"seed": {Type: schema.String}})}, nil
}

func (t textTool) InvokableRun(_ context.Context, args string, _ ...tool.Option) (string, error) {
	var a struct{ Seed string }
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		return "", err
	}
	return t.out(a.Seed), nil
}

// streamTool streams the same text in chunks.
type streamTool struct{ textTool }

func (t streamTool) StreamableRun(ctx context.Context, args string, opts ...tool.Option) (*schema.StreamReader[string], error) {
	s, err := t.InvokableRun(ctx, args, opts...)
	if err != nil {
		return nil, err
	}
	var chunks []string
	for len(s) > 0 {
		n := min(len(s), 1000)
		chunks = append(chunks, s[:n])
		s = s[n:]
	}
	return schema.StreamReaderFromArray(chunks), nil
}

// screenshotTool is an enhanced tool returning a caption and an image.
type screenshotTool struct{}

func (screenshotTool) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: "screenshot", Desc: "takes a screenshot"}, nil
}

func (screenshotTool) InvokableRun(context.Context, *schema.ToolArgument, ...tool.Option) (*schema.ToolResult, error) {
	b64 := base64.StdEncoding.EncodeToString(pngBytes)
	return &schema.ToolResult{Parts: []schema.ToolOutputPart{
		{Type: schema.ToolPartTypeText, Text: "the page as rendered"},
		{Type: schema.ToolPartTypeImage, Image: &schema.ToolOutputImage{MessagePartCommon: schema.MessagePartCommon{Base64Data: &b64, MIMEType: "image/png"}}},
	}}, nil
}

// streamShotTool streams a caption and an image in two chunks.
type streamShotTool struct{}

func (streamShotTool) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: "stream_shot", Desc: "streams a screenshot"}, nil
}

func (streamShotTool) StreamableRun(ctx context.Context, arg *schema.ToolArgument, opts ...tool.Option) (*schema.StreamReader[*schema.ToolResult], error) {
	r, _ := screenshotTool{}.InvokableRun(ctx, arg, opts...)
	return schema.StreamReaderFromArray([]*schema.ToolResult{{Parts: r.Parts[:1]}, {Parts: r.Parts[1:]}}), nil
}
