package toolcasopenai_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// scriptedAPI stands in for the OpenAI API: it answers each request from
// what it carries, so that one server serves concurrent runs, and records
// every request body.
type scriptedAPI struct {
	chat      func(msgs []chatMessage) map[string]any
	responses func(items []item) []map[string]any

	mu   sync.Mutex
	sent []json.RawMessage
}

// chatMessage is a Chat Completions message as the API receives it.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// text returns a message's content as text.
func (m chatMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// item is a Responses input item as the API receives it.
type item struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Name    string          `json:"name"`
	Output  json.RawMessage `json:"output"`
}

// outputItems returns a function_call_output's output as items.
func (it item) outputItems() []struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url"`
	FileData string `json:"file_data"`
} {
	var s string
	if json.Unmarshal(it.Output, &s) == nil {
		return []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL string `json:"image_url"`
			FileData string `json:"file_data"`
		}{{Type: "input_text", Text: s}}
	}
	var out []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL string `json:"image_url"`
		FileData string `json:"file_data"`
	}
	_ = json.Unmarshal(it.Output, &out)
	return out
}

func (it item) outputText() string {
	var b strings.Builder
	for _, o := range it.outputItems() {
		b.WriteString(o.Text)
	}
	return b.String()
}

func (a *scriptedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.sent = append(a.sent, body)
	n := len(a.sent)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		var req struct{ Messages []chatMessage }
		_ = json.Unmarshal(body, &req)
		msg := a.chat(req.Messages)
		finish := "stop"
		if msg["tool_calls"] != nil {
			finish = "tool_calls"
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 0, "model": "scripted",
			"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": msg}}})
	case strings.HasSuffix(r.URL.Path, "/responses"):
		var req struct{ Input []item }
		_ = json.Unmarshal(body, &req)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 0, "model": "scripted",
			"status": "completed", "output": a.responses(req.Input)})
	default:
		http.NotFound(w, r)
	}
}

// chatRequests returns the messages of every Chat Completions request.
func (a *scriptedAPI) chatRequests() [][]chatMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out [][]chatMessage
	for _, b := range a.sent {
		var req struct{ Messages []chatMessage }
		if json.Unmarshal(b, &req) == nil && req.Messages != nil {
			out = append(out, req.Messages)
		}
	}
	return out
}

// responsesRequests returns the input of every Responses request.
func (a *scriptedAPI) responsesRequests() [][]item {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out [][]item
	for _, b := range a.sent {
		var req struct{ Input []item }
		if json.Unmarshal(b, &req) == nil && req.Input != nil {
			out = append(out, req.Input)
		}
	}
	return out
}

func newClient(t testing.TB, api *scriptedAPI) openai.Client {
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("no-key"), option.WithMaxRetries(0))
}

func toolCall(id, name string, args any) map[string]any {
	b, _ := json.Marshal(args)
	return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(b)}}
}

func functionCall(id, name string, args any) map[string]any {
	b, _ := json.Marshal(args)
	return map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": id, "name": name, "arguments": string(b), "status": "completed"}
}

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
