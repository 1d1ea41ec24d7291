package toolcasadk_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"iter"
	"regexp"
	"strings"
	"sync"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"
	"google.golang.org/genai"
)

// scriptedLLM stands in for a model: it decides each turn from the request
// it is sent, so that one model serves concurrent sessions, and it records
// every request.
type scriptedLLM struct {
	next func(contents []*genai.Content) *genai.Content

	mu   sync.Mutex
	sent [][]*genai.Content
}

func (m *scriptedLLM) Name() string { return "scripted" }

func (m *scriptedLLM) GenerateContent(_ context.Context, req *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	m.mu.Lock()
	m.sent = append(m.sent, append([]*genai.Content(nil), req.Contents...))
	m.mu.Unlock()
	out := m.next(req.Contents)
	return func(yield func(*model.LLMResponse, error) bool) {
		yield(&model.LLMResponse{Content: out}, nil)
	}
}

func (m *scriptedLLM) requests() [][]*genai.Content {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]*genai.Content(nil), m.sent...)
}

func calls(fcs ...*genai.FunctionCall) *genai.Content {
	c := &genai.Content{Role: "model"}
	for _, fc := range fcs {
		c.Parts = append(c.Parts, &genai.Part{FunctionCall: fc})
	}
	return c
}

func answer(s string) *genai.Content { return genai.NewContentFromText(s, "model") }

// responses returns the function responses of a content.
func responses(c *genai.Content) []*genai.FunctionResponse {
	var out []*genai.FunctionResponse
	for _, p := range c.Parts {
		if p.FunctionResponse != nil {
			out = append(out, p.FunctionResponse)
		}
	}
	return out
}

// userText returns the first user text of a request: the run's seed.
func userText(contents []*genai.Content) string {
	for _, c := range contents {
		if c.Role == "user" {
			for _, p := range c.Parts {
				if p.Text != "" {
					return p.Text
				}
			}
		}
	}
	return ""
}

var keyRE = regexp.MustCompile(`\(key '([^']+)'`)

func pointerKey(s string) string {
	if m := keyRE.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// unpage reassembles the text of a read-back page.
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

// bigLog is a tool result far over any threshold; it ends without a line
// break, as a page of the read-back tool shows its last line either way.
func bigLog(seed string, lines int) string {
	var b strings.Builder
	for i := range lines {
		fmt.Fprintf(&b, "%s line %05d: status=ok latency=%dms\n", seed, i, (i*37)%911)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

var pngBytes, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")

type seedArgs struct {
	Seed string `json:"seed"`
}

// fetchLogTool returns a big log and a small status in its result map.
func fetchLogTool(lines int) tool.Tool {
	t, err := functiontool.New(functiontool.Config{Name: "fetch_log", Description: "returns a log"},
		func(_ agent.Context, a seedArgs) (map[string]any, error) {
			return map[string]any{"log": bigLog(a.Seed, lines), "status": "ok"}, nil
		})
	if err != nil {
		panic(err)
	}
	return t
}

// screenshotTool saves a screenshot as an artifact of the session, as adk
// tools hand images over.
func screenshotTool() tool.Tool {
	t, err := functiontool.New(functiontool.Config{Name: "screenshot", Description: "takes a screenshot"},
		func(ctx agent.Context, _ seedArgs) (map[string]any, error) {
			r, err := ctx.Artifacts().Save(ctx, "shot.png", &genai.Part{InlineData: &genai.Blob{Data: pngBytes, MIMEType: "image/png"}})
			if err != nil {
				return nil, err
			}
			return map[string]any{"saved": "shot.png", "version": r.Version}, nil
		})
	if err != nil {
		panic(err)
	}
	return t
}
