package mcp_test

import (
	"context"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/mcp"
)

// hitsOf returns the hit lines (KEY:LINE:text) of a search page.
func hitsOf(t *testing.T, res *sdk.CallToolResult) []string {
	t.Helper()
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("search = %s, want one text block", jsonOf(t, res))
	}
	var hits []string
	for _, l := range strings.Split(res.Content[0].(*sdk.TextContent).Text, "\n") {
		if !strings.HasPrefix(l, "[") {
			hits = append(hits, l)
		}
	}
	return hits
}

// TestReadToolSearchOverMCP: the server's read tool offers the search in
// its input schema, as the hook's read tool defines it, and a search
// through it finds the hits of the server's run, never another run's,
// even where both runs hold the same bytes.
func TestReadToolSearchOverMCP(t *testing.T) {
	st := openStore(t)
	a := offloadInto(t, st, "run-a", "search_web", "fetch")
	b := offloadInto(t, st, "run-b", "search_web")
	cs := serveClient(t, st, mcp.WithRun("run-a"))
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	for _, tl := range tools.Tools {
		if tl.Name == mcp.ReadToolName {
			remarshal(t, tl.InputSchema, &schema)
			if !strings.Contains(tl.Description, "leave ref out and give pattern") {
				t.Errorf("read tool description does not say how to search: %s", tl.Description)
			}
		}
	}
	for name, typ := range map[string]string{"ref": "string", "pattern": "string", "ignore_case": "boolean", "fixed": "boolean", "tool": "string"} {
		if schema.Properties[name].Type != typ {
			t.Errorf("read tool's input schema: %s is %q, want %s", name, schema.Properties[name].Type, typ)
		}
	}
	if len(schema.Required) != 0 {
		t.Errorf("read tool's input schema requires %q: a search has no ref", schema.Required)
	}
	for _, tc := range []struct {
		args map[string]any
		want []string
	}{
		{map[string]any{"pattern": "line 0400 "}, []string{a[0].Key + ":400:line 0400 of the big result: " + strings.Repeat("x", 24),
			a[1].Key + ":400:line 0400 of the big result: " + strings.Repeat("x", 24)}},
		{map[string]any{"pattern": "LINE 0400 ", "ignore_case": true, "tool": "fetch"}, []string{a[1].Key + ":400:line 0400 of the big result: " + strings.Repeat("x", 24)}},
		{map[string]any{"pattern": "line 0...", "fixed": true}, nil},
		{map[string]any{"pattern": "line 0", "limit": 3, "offset": 10},
			[]string{a[0].Key + ":11:line 0011 of the big result: " + strings.Repeat("x", 24),
				a[0].Key + ":12:line 0012 of the big result: " + strings.Repeat("x", 24),
				a[0].Key + ":13:line 0013 of the big result: " + strings.Repeat("x", 24)}},
		// run-b's key names a part of another run: nothing of it shows.
		{map[string]any{"pattern": b[0].Key, "fixed": true}, nil},
		{map[string]any{"pattern": "run-b"}, nil},
	} {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: tc.args})
		if err != nil {
			t.Fatal(err)
		}
		got := hitsOf(t, res)
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("search %v =\n%s\nwant\n%s", tc.args, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
	// Everything matches: still run-a's parts alone, a page at a time.
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: map[string]any{"pattern": ".", "limit": 2000}})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hitsOf(t, res) {
		if !strings.HasPrefix(h, "run-a/") {
			t.Errorf("run-a's server showed %q", h)
		}
	}
	// A jq query needs a ref.
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: map[string]any{"pattern": "x", "query": "."}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "query needs a ref") {
		t.Errorf("search with a query: %v %s", err, jsonOf(t, res))
	}
}

// TestReadToolSearchNeedsARun: a server of every run has no run to search,
// and says so; it still reads any part by its ref.
func TestReadToolSearchNeedsARun(t *testing.T) {
	st := openStore(t)
	a := offloadInto(t, st, "run-a", "search_web")
	offloadInto(t, st, "run-b", "search_web")
	cs := serveClient(t, st)
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: map[string]any{"pattern": "line 0001"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "store cannot search: this server reads every run of the store, and a search looks in one run only"
	if !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, want) {
		t.Errorf("search on a server of every run = %s, want an error saying %q", jsonOf(t, res), want)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: map[string]any{"ref": a[0].Key, "limit": 1}})
	if err != nil || res.IsError {
		t.Errorf("read by ref on a server of every run: %v %s", err, jsonOf(t, res))
	}
}

// TestProxyReadToolSearch: through the proxy, each client session searches
// its own run: the same result stored by two sessions (one blob for both)
// shows under the caller's key only.
func TestProxyReadToolSearch(t *testing.T) {
	r := newRig(t, newFake(nil))
	other := r.connect(t)
	ctx := context.Background()
	mine := offloaded(t, r.call(t, "big", nil))[0]["key"].(string)
	res, err := other.CallTool(ctx, &sdk.CallToolParams{Name: "big"})
	if err != nil {
		t.Fatal(err)
	}
	theirs := offloaded(t, res)[0]["key"].(string)
	if strings.Split(mine, "/")[0] == strings.Split(theirs, "/")[0] {
		t.Fatalf("two sessions wrote %s and %s, want two runs", mine, theirs)
	}
	for sess, key := range map[*sdk.ClientSession]string{r.client: mine, other: theirs} {
		res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: r.proxy.ReadToolName(), Arguments: map[string]any{"pattern": "line 0(007|123) "}})
		if err != nil {
			t.Fatal(err)
		}
		got := hitsOf(t, res)
		want := []string{key + ":7:line 0007 of the big result: " + strings.Repeat("x", 24), key + ":123:line 0123 of the big result: " + strings.Repeat("x", 24)}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("session of %s searched:\n%s\nwant\n%s", key, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
