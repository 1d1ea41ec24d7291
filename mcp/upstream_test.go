//lint:file-ignore SA1019 sampling, elicitation, roots and logging are deprecated in the newest protocol, and clients of older ones still use them: the proxy relays them, and these tests check it does.

package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fake is an upstream MCP server whose tools cover every kind of result,
// and which records what reaches it.
type fake struct {
	server *sdk.Server

	mu        sync.Mutex
	metas     []sdk.Meta
	cancelled chan struct{} // closed when a call to "slow" is cancelled
	release   chan struct{} // closes to let "slow" answer
	started   chan struct{} // closed when a call to "slow" begins
	startOnce sync.Once
}

// Content the fake's tools return, to compare with what comes back.
var (
	pngBytes  = append([]byte("\x89PNG\r\n\x1a\n"), []byte(strings.Repeat("pixels", 2000))...)
	wavBytes  = append([]byte("RIFF\x00\x00\x00\x00WAVE"), []byte(strings.Repeat("\x01\x02", 3000))...)
	pdfBytes  = append([]byte("%PDF-1.7\n"), []byte(strings.Repeat("\x00\xff obj", 2000))...)
	bigText   = numbered(400) // about 16 KiB, over the default threshold
	docText   = strings.Repeat("# Heading\n\nsome markdown ∑ text\n", 400)
	smallText = "ok: small"
)

// numbered returns n numbered lines, the last without a newline.
func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %04d of the big result: %s", i, strings.Repeat("x", 24))
		if i < n {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func text(s string) []sdk.Content { return []sdk.Content{&sdk.TextContent{Text: s}} }

var objectSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)

// newFake returns the fake upstream; opts narrow its server options.
func newFake(opts *sdk.ServerOptions) *fake {
	f := &fake{cancelled: make(chan struct{}), release: make(chan struct{}), started: make(chan struct{})}
	if opts == nil {
		opts = &sdk.ServerOptions{}
	}
	f.server = sdk.NewServer(&sdk.Implementation{Name: "fake", Version: "1"}, opts)
	add := func(t *sdk.Tool, h sdk.ToolHandler) {
		if t.InputSchema == nil {
			t.InputSchema = objectSchema
		}
		f.server.AddTool(t, func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			f.mu.Lock()
			f.metas = append(f.metas, r.Params.Meta)
			f.mu.Unlock()
			return h(ctx, r)
		})
	}
	add(&sdk.Tool{Name: "small", Description: "a small result", Title: "Small",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, Title: "small one"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: smallText, Annotations: &sdk.Annotations{Priority: 0.5}}}, Meta: sdk.Meta{"x/upstream": "kept"}}, nil
		})
	add(&sdk.Tool{Name: "big", Description: "a big text result"}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: text(bigText)}, nil
	})
	add(&sdk.Tool{Name: "echo", Description: "a big text result that ends with its arguments"},
		func(_ context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: text(bigText + string(r.Params.Arguments))}, nil
		})
	add(&sdk.Tool{Name: "mixed", Description: "every kind of content"}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: bigText},
			&sdk.ImageContent{MIMEType: "image/png", Data: pngBytes},
			&sdk.AudioContent{MIMEType: "audio/wav", Data: wavBytes},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///docs/guide.md", MIMEType: "text/markdown", Text: docText}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///docs/q3.pdf", MIMEType: "application/pdf", Blob: pdfBytes}},
			&sdk.ResourceLink{URI: "file:///docs/other.txt", Name: "other.txt"},
		}}, nil
	})
	add(&sdk.Tool{Name: "fails", Description: "an error result"}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{IsError: true, Content: text(bigText)}, nil
	})
	add(&sdk.Tool{Name: "structured", Description: "structured content",
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"rows":{"type":"array"}}}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			rows := make([]int, 3000)
			return &sdk.CallToolResult{Content: text(bigText), StructuredContent: map[string]any{"rows": rows}}, nil
		})
	add(&sdk.Tool{Name: "links", Description: "only resource links"}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.ResourceLink{URI: "file:///a", Name: "a"}}}, nil
	})
	add(&sdk.Tool{Name: "slow", Description: "reports progress, answers when released"}, func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		f.startOnce.Do(func() { close(f.started) })
		if tok := r.Params.GetProgressToken(); tok != nil {
			for i := 1; i <= 3; i++ {
				r.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)})
			}
		}
		select {
		case <-ctx.Done():
			close(f.cancelled)
			return nil, ctx.Err()
		case <-f.release:
			return &sdk.CallToolResult{Content: text("released")}, nil
		}
	})
	add(&sdk.Tool{Name: "steps", Description: "reports progress, then answers at once"}, func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if tok := r.Params.GetProgressToken(); tok != nil {
			for i := 1; i <= 3; i++ {
				r.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3})
			}
		}
		return &sdk.CallToolResult{Content: text("done")}, nil
	})
	add(&sdk.Tool{Name: "many", Description: "n small text parts"}, func(_ context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var a struct{ N int }
		json.Unmarshal(r.Params.Arguments, &a)
		content := make([]sdk.Content, a.N)
		for i := range content {
			content[i] = &sdk.TextContent{Text: fmt.Sprintf("item %05d: a small part of a long list", i)}
		}
		return &sdk.CallToolResult{Content: content}, nil
	})
	add(&sdk.Tool{Name: "ask", Description: "asks the client: sampling, elicitation, roots; logs"}, func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var b strings.Builder
		if m, err := r.Session.CreateMessage(ctx, &sdk.CreateMessageParams{MaxTokens: 10,
			Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: "hello"}}}}); err != nil {
			fmt.Fprintf(&b, "sampling: %v; ", err)
		} else {
			fmt.Fprintf(&b, "sampling: %s; ", m.Content.(*sdk.TextContent).Text)
		}
		if e, err := r.Session.Elicit(ctx, &sdk.ElicitParams{Message: "which?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}}); err != nil {
			fmt.Fprintf(&b, "elicitation: %v; ", err)
		} else {
			fmt.Fprintf(&b, "elicitation: %s %v; ", e.Action, e.Content["answer"])
		}
		if roots, err := r.Session.ListRoots(ctx, nil); err != nil {
			fmt.Fprintf(&b, "roots: %v", err)
		} else {
			for _, root := range roots.Roots {
				fmt.Fprintf(&b, "root %s ", root.URI)
			}
		}
		r.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Data: "asked the client"})
		return &sdk.CallToolResult{Content: text(b.String())}, nil
	})
	f.server.AddPrompt(&sdk.Prompt{Name: "greet", Description: "a greeting", Arguments: []*sdk.PromptArgument{{Name: "who", Required: true}}},
		func(_ context.Context, r *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: "hello " + r.Params.Arguments["who"]}}}}, nil
		})
	f.server.AddResource(&sdk.Resource{URI: "test://static/a", Name: "a", MIMEType: "text/plain"},
		func(_ context.Context, r *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: r.Params.URI, MIMEType: "text/plain", Text: "static a"}}}, nil
		})
	f.server.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: "test://dyn/{id}", Name: "dyn"},
		func(_ context.Context, r *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: r.Params.URI, Text: "dynamic " + r.Params.URI}}}, nil
		})
	return f
}

// lastMeta returns the _meta of the last call the fake got.
func (f *fake) lastMeta() sdk.Meta {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.metas[len(f.metas)-1]
}

// TestMain lets the test binary be an upstream server or a proxy in its
// own process, for the tests that need real processes.
func TestMain(m *testing.M) {
	switch os.Getenv("TOOLCAS_TEST_ROLE") {
	case "upstream":
		os.Exit(runUpstreamProcess())
	case "proxy":
		os.Exit(runProxyProcess())
	}
	os.Exit(m.Run())
}

// deadline is how long a test waits for something that should happen at
// once, before it fails.
const deadline = 20 * time.Second

// quietLog is a logger for tests that provoke warnings.
func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var jsonUnmarshal = json.Unmarshal
