package mcp_test

import (
	"context"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/mcp"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
)

// offloadInto writes one result of each given tool through the hook, as
// a program using the library does, and returns the references.
func offloadInto(t *testing.T, st *store.Store, run string, tools ...string) []hook.Reference {
	t.Helper()
	h, err := hook.New(st, policy.MustStrategies(policy.Default(policy.Fixed(true))))
	if err != nil {
		t.Fatal(err)
	}
	var refs []hook.Reference
	for i, tool := range tools {
		parts := []hook.Part{hook.Text(bigText)}
		if tool == "screenshot" {
			parts = []hook.Part{hook.Image("image/png", pngBytes)}
		}
		out, err := h.Offload(context.Background(), hook.Step{Run: run, Number: i + 1}, []hook.Result{{Tool: tool, CallID: "c1", Parts: parts}})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, hook.References(out[0])...)
	}
	return refs
}

func serveClient(t *testing.T, st *store.Store, opts ...mcp.Option) *sdk.ClientSession {
	t.Helper()
	s, err := mcp.NewStoreServer(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, b := sdk.NewInMemoryTransports()
	if _, err := s.Server().Connect(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestStoreServer(t *testing.T) {
	st := openStore(t)
	a := offloadInto(t, st, "run-a", "search_web", "screenshot")
	b := offloadInto(t, st, "run-b", "search_web")
	cs := serveClient(t, st)
	ctx := context.Background()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "read_tool_result,search,stats" {
		t.Errorf("tools = %v, want read_tool_result, search, stats", names)
	}

	// Read back any run's parts, text and image, by tool and by resource.
	for _, ref := range append(a, b...) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: map[string]any{"ref": ref.Key}})
		if err != nil || res.IsError {
			t.Fatalf("read %s: %v %s", ref.Key, err, jsonOf(t, res))
		}
		rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ResourceURI(ref.Key)})
		if err != nil {
			t.Fatalf("resources/read %s: %v", ref.Key, err)
		}
		c := rr.Contents[0]
		if strings.Contains(ref.Key, "screenshot") {
			if img, ok := res.Content[1].(*sdk.ImageContent); !ok || string(img.Data) != string(pngBytes) {
				t.Errorf("read %s: not the image back: %s", ref.Key, jsonOf(t, res.Content[0]))
			}
			if string(c.Blob) != string(pngBytes) || c.MIMEType != "image/png" {
				t.Errorf("resources/read %s: %d bytes of %s", ref.Key, len(c.Blob), c.MIMEType)
			}
		} else if c.Text != bigText {
			t.Errorf("resources/read %s: not the text back", ref.Key)
		}
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "toolcas://run-a/99_none_call0.txt"}); err == nil {
		t.Error("resources/read of a missing part succeeded")
	}

	// search lists what ls does, filtered.
	for _, tc := range []struct {
		args map[string]any
		want int
	}{
		{nil, 3},
		{map[string]any{"run": "run-a"}, 2},
		{map[string]any{"tool": "search_web"}, 2},
		{map[string]any{"kind": "image"}, 1},
		{map[string]any{"key": "screenshot"}, 1},
		{map[string]any{"limit": 1}, 1},
		{map[string]any{"since": "1h"}, 3},
	} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "search", Arguments: tc.args})
		if err != nil || res.IsError {
			t.Fatalf("search %v: %v %s", tc.args, err, jsonOf(t, res))
		}
		var out mcp.SearchResult
		remarshal(t, res.StructuredContent, &out)
		if len(out.Parts) != tc.want {
			t.Errorf("search %v: %d parts, want %d", tc.args, len(out.Parts), tc.want)
		}
		for _, p := range out.Parts {
			if p.URI != mcp.ResourceURI(p.Key) || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, p.Key) {
				t.Errorf("search %v: part %+v not listed with its URI and in the text", tc.args, p)
			}
		}
	}
	for _, bad := range []map[string]any{{"kind": "video"}, {"since": "soon"}, {"limit": 5000}} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "search", Arguments: bad})
		if err == nil && !res.IsError {
			t.Errorf("search %v succeeded", bad)
		}
	}

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "stats", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("stats: %v", err)
	}
	var stats struct{ Runs, Parts int64 }
	remarshal(t, res.StructuredContent, &stats)
	if stats.Runs != 2 || stats.Parts != 3 {
		t.Errorf("stats = %+v, want 2 runs, 3 parts", stats)
	}
}

func TestStoreServerOneRun(t *testing.T) {
	st := openStore(t)
	a := offloadInto(t, st, "run-a", "search_web")
	b := offloadInto(t, st, "run-b", "search_web")
	cs := serveClient(t, st, mcp.WithRun("run-a"))
	ctx := context.Background()
	for ref, wantErr := range map[string]bool{a[0].Key: false, b[0].Key: true} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: map[string]any{"ref": ref}})
		if err != nil || res.IsError != wantErr {
			t.Errorf("read %s: error %v, want %v", ref, res.IsError, wantErr)
		}
		_, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ResourceURI(ref)})
		if (err != nil) != wantErr {
			t.Errorf("resources/read %s: %v, want error %v", ref, err, wantErr)
		}
	}
	res, _ := cs.CallTool(ctx, &sdk.CallToolParams{Name: "search", Arguments: map[string]any{}})
	var out mcp.SearchResult
	remarshal(t, res.StructuredContent, &out)
	if len(out.Parts) != 1 || out.Parts[0].Run != "run-a" {
		t.Errorf("search on run-a's server: %+v", out.Parts)
	}
	if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "search", Arguments: map[string]any{"run": "run-b"}}); err == nil && !res.IsError {
		t.Errorf("search of another run succeeded")
	}
}

func remarshal(t *testing.T, from, to any) {
	t.Helper()
	if err := jsonUnmarshal([]byte(jsonOf(t, from)), to); err != nil {
		t.Fatal(err)
	}
}

// TestStoreServerPacked: parts moved into a pack read back the same, through
// the read tool and as resources.
func TestStoreServerPacked(t *testing.T) {
	st := openStore(t)
	refs := offloadInto(t, st, "run-a", "search_web", "screenshot")
	ctx := context.Background()
	if res, err := st.Pack(ctx, store.PackOptions{}); err != nil || res.Blobs != 2 || res.RemovedLoose != 2 {
		t.Fatalf("pack = %+v, %v", res, err)
	}
	cs := serveClient(t, st)
	for _, ref := range refs {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: map[string]any{"ref": ref.Path}})
		if err != nil || res.IsError {
			t.Fatalf("read %s by its old path after packing: %v %s", ref.Key, err, jsonOf(t, res))
		}
		rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ResourceURI(ref.Key)})
		if err != nil {
			t.Fatalf("resources/read %s after packing: %v", ref.Key, err)
		}
		c := rr.Contents[0]
		if strings.Contains(ref.Key, "screenshot") {
			if string(c.Blob) != string(pngBytes) {
				t.Errorf("resources/read %s after packing: %d bytes", ref.Key, len(c.Blob))
			}
		} else if c.Text != bigText {
			t.Errorf("resources/read %s after packing: not the text back", ref.Key)
		}
	}
}
