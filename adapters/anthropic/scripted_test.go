package toolcasanthropic_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// message is a message as the Messages API receives it.
type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is any content block; only the fields the tests read.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source,omitempty"`
}

// UnmarshalJSON takes content given as a string too.
func (m *message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	m.Role = raw.Role
	var s string
	if json.Unmarshal(raw.Content, &s) == nil {
		m.Content = []block{{Type: "text", Text: s}}
		return nil
	}
	return json.Unmarshal(raw.Content, &m.Content)
}

// resultBlocks returns the blocks of a tool_result's content.
func (b block) resultBlocks() []block {
	var s string
	if json.Unmarshal(b.Content, &s) == nil {
		return []block{{Type: "text", Text: s}}
	}
	var out []block
	_ = json.Unmarshal(b.Content, &out)
	return out
}

// resultText returns the text of a tool_result.
func (b block) resultText() string {
	var t strings.Builder
	for _, c := range b.resultBlocks() {
		t.WriteString(c.Text)
	}
	return t.String()
}

// scriptedAPI stands in for the Messages API: it answers each request from
// the messages it carries, so that one server serves concurrent runs, and
// records every request.
type scriptedAPI struct {
	next func(msgs []message) []map[string]any

	mu   sync.Mutex
	sent [][]message
}

func (a *scriptedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []message `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.sent = append(a.sent, req.Messages)
	n := len(a.sent)
	a.mu.Unlock()
	content := a.next(req.Messages)
	stop := "end_turn"
	for _, c := range content {
		if c["type"] == "tool_use" {
			stop = "tool_use"
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": "scripted",
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1},
	})
}

func (a *scriptedAPI) requests() [][]message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([][]message(nil), a.sent...)
}

// newClient returns a client of the scripted API on a local test server.
func newClient(t testing.TB, api *scriptedAPI) anthropic.Client {
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("no-key"), option.WithMaxRetries(0))
}

func toolUse(id, name string, input any) map[string]any {
	return map[string]any{"type": "tool_use", "id": id, "name": name, "input": input}
}

func text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

var keyRE = regexp.MustCompile(`\(key '([^']+)'`)

func pointerKeys(s string) []string {
	var keys []string
	for _, m := range keyRE.FindAllStringSubmatch(s, -1) {
		keys = append(keys, m[1])
	}
	return keys
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

// logTool returns a big log for its seed.
type logTool struct{ lines int }

func (logTool) Name() string        { return "fetch_log" }
func (logTool) Description() string { return "returns a log" }
func (logTool) InputSchema() anthropic.BetaToolInputSchemaParam {
	return anthropic.BetaToolInputSchemaParam{Properties: map[string]any{"seed": map[string]any{"type": "string"}}}
}
func (t logTool) Execute(_ context.Context, input json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	var a struct{ Seed string }
	if err := json.Unmarshal(input, &a); err != nil {
		return nil, err
	}
	return []anthropic.BetaToolResultBlockParamContentUnion{{OfText: &anthropic.BetaTextBlockParam{Text: bigLog(a.Seed, t.lines)}}}, nil
}

// screenshotTool returns a caption and an image.
type screenshotTool struct{}

func (screenshotTool) Name() string        { return "screenshot" }
func (screenshotTool) Description() string { return "takes a screenshot" }
func (screenshotTool) InputSchema() anthropic.BetaToolInputSchemaParam {
	return anthropic.BetaToolInputSchemaParam{}
}
func (screenshotTool) Execute(context.Context, json.RawMessage) ([]anthropic.BetaToolResultBlockParamContentUnion, error) {
	return []anthropic.BetaToolResultBlockParamContentUnion{
		{OfText: &anthropic.BetaTextBlockParam{Text: "the page as rendered"}},
		{OfImage: &anthropic.BetaImageBlockParam{Source: anthropic.BetaImageBlockParamSourceUnion{OfBase64: &anthropic.BetaBase64ImageSourceParam{
			Data: base64.StdEncoding.EncodeToString(pngBytes), MediaType: "image/png"}}}},
	}, nil
}
