package mcp_test

import (
	"context"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/mcp"
	"github.com/toolcas/toolcas/policy"
)

// TestReadToolQueryOverMCP: the server's read tool offers query in its
// input schema, as the hook's read tool defines it, and a query of a JSON
// part in the store (read as a stream) comes back paged as lines.
func TestReadToolQueryOverMCP(t *testing.T) {
	st := openStore(t)
	h, err := hook.New(st, policy.MustStrategies(policy.Default(policy.MustPreview(policy.Always, policy.PreviewJSONShape))))
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"items": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}], "total": 2}`
	out, err := h.Offload(context.Background(), hook.Step{Run: "r", Number: 1}, []hook.Result{{Tool: "api", CallID: "c1", Parts: []hook.Part{hook.Text(doc)}}})
	if err != nil {
		t.Fatal(err)
	}
	if p := out[0].Parts[0].Text; !strings.HasSuffix(p, `JSON shape: {"items": array[2] of {"id": number, "name": string}, "total": number}`) {
		t.Errorf("pointer = %q, want the JSON shape", p)
	}
	key := hook.References(out[0])[0].Key
	cs := serveClient(t, st)
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	for _, tl := range tools.Tools {
		if tl.Name == mcp.ReadToolName {
			remarshal(t, tl.InputSchema, &schema)
			if !strings.Contains(tl.Description, "query") {
				t.Errorf("read tool description does not mention query: %s", tl.Description)
			}
		}
	}
	if schema.Properties["query"].Type != "string" {
		t.Errorf("read tool's input schema has no query string: %+v", schema)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: map[string]any{"ref": key, "query": ".items[] | .name"}})
	if err != nil || res.IsError {
		t.Fatalf("query: %v %s", err, jsonOf(t, res))
	}
	want := "[" + key + ", query \".items[] | .name\": lines 1-2 of 2]\n1\t\"a\"\n2\t\"b\""
	if got := res.Content[0].(*sdk.TextContent).Text; got != want {
		t.Errorf("query over MCP =\n%s\nwant\n%s", got, want)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: map[string]any{"ref": key, "query": ".items["}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "query: parse error") {
		t.Errorf("bad query over MCP: %v %s", err, jsonOf(t, res))
	}
}
