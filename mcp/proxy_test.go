package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/mcp"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
)

// openStore returns a fresh store in a temporary directory.
func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir(), store.WithCreate(), store.WithDurability(store.SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// dialFake is an upstream reached in memory: every connection is a new
// session of f's server.
func dialFake(f *fake) *mcp.Dial {
	return &mcp.Dial{Name: "fake-upstream", Connect: func(ctx context.Context) (sdk.Transport, error) {
		a, b := sdk.NewInMemoryTransports()
		if _, err := f.server.Connect(ctx, a, nil); err != nil {
			return nil, err
		}
		return b, nil
	}}
}

// rig is a proxy in front of the fake, with a client connected to it.
type rig struct {
	fake   *fake
	store  *store.Store
	proxy  *mcp.Proxy
	client *sdk.ClientSession
	// changed gets a value for every tools/list_changed the client sees.
	changed  chan struct{}
	progress chan *sdk.ProgressNotificationParams
}

func newRig(t *testing.T, f *fake, opts ...mcp.Option) *rig {
	t.Helper()
	ctx := context.Background()
	r := &rig{fake: f, store: openStore(t), changed: make(chan struct{}, 16), progress: make(chan *sdk.ProgressNotificationParams, 1000)}
	p, err := mcp.NewProxy(ctx, dialFake(f), r.store, append([]mcp.Option{mcp.WithLogger(quietLog())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	r.proxy = p
	r.client = r.connect(t)
	return r
}

// connect opens one more client session to the proxy.
func (r *rig) connect(t *testing.T) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	a, b := sdk.NewInMemoryTransports()
	go r.proxy.Run(ctx, a)
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { r.changed <- struct{}{} },
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			r.progress <- req.Params
		},
	})
	cs, err := c.Connect(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func (r *rig) call(t *testing.T, tool string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := r.client.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return res
}

// direct calls the fake without the proxy, for what the client would get
// without it.
func direct(t *testing.T, f *fake, tool string) *sdk.CallToolResult {
	t.Helper()
	ctx := context.Background()
	tr, err := dialFake(f).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "direct"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// offloaded returns the records a pointer's _meta carries.
func offloaded(t *testing.T, res *sdk.CallToolResult) []map[string]any {
	t.Helper()
	raw, ok := res.Meta[hook.MetaKey]
	if !ok {
		t.Fatalf("result has no %s in _meta: %s", hook.MetaKey, jsonOf(t, res))
	}
	var recs []map[string]any
	if err := json.Unmarshal([]byte(jsonOf(t, raw)), &recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestMirrorsUpstreamFeatures(t *testing.T) {
	f := newFake(nil)
	r := newRig(t, f)
	ctx := context.Background()

	tr, _ := dialFake(f).Connect(ctx)
	up, err := sdk.NewClient(&sdk.Implementation{Name: "direct"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	want, err := up.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.client.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tl := range got.Tools {
		byName[tl.Name] = tl
	}
	for _, w := range want.Tools {
		g, ok := byName[w.Name]
		if !ok {
			t.Errorf("tool %q not mirrored", w.Name)
			continue
		}
		if jsonOf(t, g) != jsonOf(t, w) {
			t.Errorf("tool %q mirrored as\n%s\nwant\n%s", w.Name, jsonOf(t, g), jsonOf(t, w))
		}
		delete(byName, w.Name)
	}
	if len(byName) != 1 || byName[mcp.ReadToolName] == nil {
		t.Errorf("tools beyond the upstream's: %v, want only %s", reflect.ValueOf(byName).MapKeys(), mcp.ReadToolName)
	}
	if rt := byName[mcp.ReadToolName]; rt != nil && (rt.Annotations == nil || !rt.Annotations.ReadOnlyHint) {
		t.Errorf("read tool is not marked read-only: %s", jsonOf(t, rt))
	}

	prompts, err := r.client.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "greet" || prompts.Prompts[0].Arguments[0].Name != "who" {
		t.Fatalf("prompts/list = %s, %v", jsonOf(t, prompts), err)
	}
	pr, err := r.client.GetPrompt(ctx, &sdk.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "ada"}})
	if err != nil || pr.Messages[0].Content.(*sdk.TextContent).Text != "hello ada" {
		t.Fatalf("prompts/get = %s, %v", jsonOf(t, pr), err)
	}

	res, err := r.client.ListResources(ctx, nil)
	if err != nil || len(res.Resources) != 1 || res.Resources[0].URI != "test://static/a" {
		t.Fatalf("resources/list = %s, %v", jsonOf(t, res), err)
	}
	tmpls, err := r.client.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tm := range tmpls.ResourceTemplates {
		names = append(names, tm.URITemplate)
	}
	if strings.Join(names, " ") != "test://dyn/{id} "+mcp.ResourceURITemplate && strings.Join(names, " ") != mcp.ResourceURITemplate+" test://dyn/{id}" {
		t.Errorf("resource templates = %v, want the upstream's and %s", names, mcp.ResourceURITemplate)
	}
	for uri, want := range map[string]string{"test://static/a": "static a", "test://dyn/42": "dynamic test://dyn/42"} {
		rr, err := r.client.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		if err != nil || rr.Contents[0].Text != want {
			t.Errorf("resources/read %s = %s, %v; want %q", uri, jsonOf(t, rr), err, want)
		}
	}
}

func TestSmallResultPassesUntouched(t *testing.T) {
	f := newFake(nil)
	r := newRig(t, f)
	for _, tool := range []string{"small", "fails", "links"} {
		got, want := jsonOf(t, r.call(t, tool, nil)), jsonOf(t, direct(t, f, tool))
		if got != want {
			t.Errorf("%s through the proxy = %s\nwant %s", tool, got, want)
		}
	}
	ps, err := r.store.List(context.Background(), store.ListOptions{})
	if err != nil || len(ps) != 0 {
		t.Errorf("store holds %d parts after untouched results, want 0 (%v)", len(ps), err)
	}
}

func TestBigResultBecomesPointerAndReadsBack(t *testing.T) {
	r := newRig(t, newFake(nil))
	ctx := context.Background()
	r.call(t, "small", nil) // step 1
	res := r.call(t, "big", nil)
	if res.IsError {
		t.Fatalf("big: error result %s", jsonOf(t, res))
	}
	ptr, ok := res.Content[0].(*sdk.TextContent)
	if !ok || !strings.HasPrefix(ptr.Text, "Tool result offloaded to text") || len(ptr.Text) > 1000 {
		t.Fatalf("big: first block is not a pointer: %s", jsonOf(t, res.Content[0]))
	}
	recs := offloaded(t, res)
	if len(recs) != 1 {
		t.Fatalf("big: %d offloaded parts, want 1", len(recs))
	}
	key, uri := recs[0]["key"].(string), recs[0]["uri"].(string)
	if !strings.Contains(ptr.Text, key) {
		t.Errorf("pointer %q does not name key %q", ptr.Text, key)
	}
	link, ok := res.Content[1].(*sdk.ResourceLink)
	if !ok || link.URI != uri || link.MIMEType != "text/plain" || link.Size == nil || *link.Size != int64(len(bigText)) {
		t.Errorf("pointer's resource link = %s, want %s of %d bytes", jsonOf(t, res.Content[1]), uri, len(bigText))
	}

	// The store holds it under this session's run, at step 2.
	ps, err := r.store.List(ctx, store.ListOptions{})
	if err != nil || len(ps) != 1 {
		t.Fatalf("store parts = %d, %v; want 1", len(ps), err)
	}
	if ps[0].Key != key || ps[0].Step != 2 || ps[0].Tool != "big" || !strings.HasPrefix(key, ps[0].Run+"/") {
		t.Errorf("stored part %+v, want key %s at step 2 of tool big", ps[0], key)
	}

	// resources/read gives the bytes back exactly.
	rr, err := r.client.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Contents[0].Text != bigText || rr.Contents[0].MIMEType != "text/plain" {
		t.Errorf("resources/read %s: %d bytes (%s), want the %d bytes offloaded", uri, len(rr.Contents[0].Text), rr.Contents[0].MIMEType, len(bigText))
	}

	// The read tool pages through the same lines.
	if got := readAllLines(t, r, key); got != bigText {
		t.Errorf("read tool gave back %d bytes that differ from the %d offloaded", len(got), len(bigText))
	}
}

// readAllLines pages through a text part with the read tool and returns
// its lines joined as they were. It goes by the numbered lines alone
// ("N<tab>line"), not by the wording of the page's header, and stops at
// the first page with none.
func readAllLines(t *testing.T, r *rig, ref string) string {
	t.Helper()
	var lines []string
	for offset := 0; ; {
		res := r.call(t, r.proxy.ReadToolName(), map[string]any{"ref": ref, "offset": offset, "limit": 100})
		if res.IsError {
			t.Fatalf("read %s at %d: %s", ref, offset, jsonOf(t, res))
		}
		n := 0
		for _, l := range strings.Split(res.Content[0].(*sdk.TextContent).Text, "\n") {
			num, line, ok := strings.Cut(l, "\t")
			k, err := strconv.Atoi(num)
			if !ok || err != nil {
				continue // the page's header
			}
			if k != offset+n+1 {
				t.Fatalf("read %s: line %d where %d was due", ref, k, offset+n+1)
			}
			lines = append(lines, line)
			n++
		}
		if n == 0 {
			break
		}
		offset += n
	}
	return strings.Join(lines, "\n")
}

func TestEveryKindOfPartIsOffloadedAndReadsBack(t *testing.T) {
	s := policy.MustStrategies(policy.Default(policy.Fixed(true)))
	r := newRig(t, newFake(nil), mcp.WithStrategies(s))
	ctx := context.Background()
	res := r.call(t, "mixed", nil)
	recs := offloaded(t, res)
	type want struct {
		mime string
		data []byte
	}
	wants := []want{
		{"text/plain", []byte(bigText)},
		{"image/png", pngBytes},
		{"audio/wav", wavBytes},
		{"text/markdown", []byte(docText)},
		{"application/pdf", pdfBytes},
	}
	if len(recs) != len(wants) {
		t.Fatalf("%d parts offloaded, want %d: %s", len(recs), len(wants), jsonOf(t, res))
	}
	// The pointer, a link per part, then the upstream's own resource link.
	if len(res.Content) != 1+len(wants)+1 {
		t.Fatalf("content has %d blocks, want pointer + %d links + the kept link: %s", len(res.Content), len(wants), jsonOf(t, res.Content))
	}
	if l, ok := res.Content[len(res.Content)-1].(*sdk.ResourceLink); !ok || l.URI != "file:///docs/other.txt" {
		t.Errorf("upstream's resource link not kept as it was: %s", jsonOf(t, res.Content[len(res.Content)-1]))
	}
	for i, w := range wants {
		uri, key := recs[i]["uri"].(string), recs[i]["key"].(string)
		rr, err := r.client.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("part %d: resources/read %s: %v", i, uri, err)
		}
		c := rr.Contents[0]
		got := c.Blob
		if c.Blob == nil {
			got = []byte(c.Text)
		}
		if !bytes.Equal(got, w.data) || c.MIMEType != w.mime {
			t.Errorf("part %d: resources/read gave %d bytes of %s, want %d bytes of %s", i, len(got), c.MIMEType, len(w.data), w.mime)
		}
		if strings.HasPrefix(w.mime, "text/") {
			if got := readAllLines(t, r, key); got != strings.TrimSuffix(string(w.data), "\n") {
				t.Errorf("part %d: read tool gave back other text", i)
			}
			continue
		}
		rt := r.call(t, r.proxy.ReadToolName(), map[string]any{"ref": key})
		if rt.IsError || len(rt.Content) != 2 {
			t.Fatalf("part %d: read tool: %s", i, jsonOf(t, rt))
		}
		var data []byte
		var mime string
		switch c := rt.Content[1].(type) {
		case *sdk.ImageContent:
			data, mime = c.Data, c.MIMEType
			if w.mime != "image/png" {
				t.Errorf("part %d (%s) came back as an image", i, w.mime)
			}
		case *sdk.AudioContent:
			data, mime = c.Data, c.MIMEType
		case *sdk.EmbeddedResource:
			data, mime = c.Resource.Blob, c.Resource.MIMEType
			if c.Resource.URI != uri {
				t.Errorf("part %d: embedded resource URI %q, want %q", i, c.Resource.URI, uri)
			}
		default:
			t.Fatalf("part %d: read tool returned %T", i, c)
		}
		if !bytes.Equal(data, w.data) || mime != w.mime {
			t.Errorf("part %d: read tool gave %d bytes of %s, want %d bytes of %s", i, len(data), mime, len(w.data), w.mime)
		}
	}
	if _, ok := (func() (sdk.Content, bool) {
		rt := r.call(t, r.proxy.ReadToolName(), map[string]any{"ref": recs[1]["key"]})
		c, ok := rt.Content[1].(*sdk.ImageContent)
		return c, ok
	})(); !ok {
		t.Errorf("image part not returned as image content by the read tool")
	}
}

func TestPointerWithoutLinks(t *testing.T) {
	r := newRig(t, newFake(nil), mcp.WithResourceLinks(false))
	res := r.call(t, "big", nil)
	if len(res.Content) != 1 || len(offloaded(t, res)) != 1 {
		t.Errorf("WithResourceLinks(false): content %s, want the pointer's text alone", jsonOf(t, res.Content))
	}
}

func TestErrorAndStructuredResults(t *testing.T) {
	f := newFake(nil)
	r := newRig(t, f)
	if got, want := jsonOf(t, r.call(t, "fails", nil)), jsonOf(t, direct(t, f, "fails")); got != want {
		t.Errorf("error result changed:\n%s\nwant\n%s", got, want)
	}
	res := r.call(t, "structured", nil)
	want := direct(t, f, "structured")
	if jsonOf(t, res.StructuredContent) != jsonOf(t, want.StructuredContent) {
		t.Errorf("structured content changed: %s", jsonOf(t, res.StructuredContent))
	}
	if len(offloaded(t, res)) != 1 {
		t.Errorf("the text content beside structured content was not offloaded")
	}
}

func TestPoliciesFromFlags(t *testing.T) {
	s, err := mcp.ParseOffload([]string{"big=never", "small=always"})
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(nil)
	r := newRig(t, f, mcp.WithStrategies(s))
	if got, want := jsonOf(t, r.call(t, "big", nil)), jsonOf(t, direct(t, f, "big")); got != want {
		t.Errorf("big=never: result changed")
	}
	if res := r.call(t, "small", nil); len(offloaded(t, res)) != 1 {
		t.Errorf("small=always: not offloaded")
	} else if res.Meta["x/upstream"] != "kept" {
		t.Errorf("upstream's own _meta lost on the pointer: %s", jsonOf(t, res.Meta))
	}
	// "*" applies to tools without their own entry; structured uses it.
	s, _ = mcp.ParseOffload([]string{"*=over:100000"})
	r = newRig(t, f, mcp.WithStrategies(s))
	if _, ok := r.call(t, "big", nil).Meta[hook.MetaKey]; ok {
		t.Errorf("*=over:100000 offloaded a 16 KiB result")
	}
}

func TestPoliciesFromConfig(t *testing.T) {
	// What casctl mcp proxy --config reads: a hook configuration, as
	// hook.Load takes it (here naming a memory store, which the proxy does
	// not use: it writes to its own).
	h, err := hook.Load([]byte(`{"type": "toolcas.hook.Hook", "init_parameters": {
		"store": {"type": "toolcas.hook.MemStore", "init_parameters": {}},
		"offload_strategies": {"small": {"type": "haystack.components.tools.offload.AlwaysOffload", "init_parameters": {}},
			"*": {"type": "haystack.components.tools.offload.NeverOffload", "init_parameters": {}}},
		"preview_chars": 3}}`))
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(nil)
	r := newRig(t, f, mcp.WithHook(h))
	res := r.call(t, "small", nil)
	recs := offloaded(t, res)
	if ps, _ := r.store.List(context.Background(), store.ListOptions{}); len(ps) != 1 || ps[0].Key != recs[0]["key"] {
		t.Errorf("offloaded to %v, not to the proxy's store", recs)
	}
	if p := res.Content[0].(*sdk.TextContent).Text; !strings.HasSuffix(p, "Preview: ok:...") {
		t.Errorf("pointer %q does not keep the configured 3-character preview", p)
	}
	if got, want := jsonOf(t, r.call(t, "big", nil)), jsonOf(t, direct(t, f, "big")); got != want {
		t.Errorf("big: the configured never-offload policy was not applied")
	}
}

func TestParseOffload(t *testing.T) {
	for _, tc := range []struct {
		specs []string
		tool  string
		size  int
		want  bool
	}{
		{nil, "any", 8001, true},
		{nil, "any", 8000, false},
		{[]string{"*=over:10"}, "any", 11, true},
		{[]string{"*=never", "web=always"}, "web", 1, true},
		{[]string{"*=never", "web=always"}, "other", 1 << 20, false},
		{[]string{"time=never"}, "time", 1 << 20, false},
		{[]string{"time=never"}, "other", 8001, true},
	} {
		s, err := mcp.ParseOffload(tc.specs)
		if err != nil {
			t.Fatalf("ParseOffload(%q): %v", tc.specs, err)
		}
		pol, _ := s.For(tc.tool)
		got := pol != nil && pol.ShouldOffload(policy.NewSubject(tc.tool, "r", 1, []policy.Part{{Kind: "text", Size: tc.size}}, func() string { return "" }))
		if got != tc.want {
			t.Errorf("ParseOffload(%q) offloads %d chars of %s = %v, want %v", tc.specs, tc.size, tc.tool, got, tc.want)
		}
	}
	for _, bad := range [][]string{{"web"}, {"=always"}, {"web=sometimes"}, {"web=over:x"}, {"web=over:-1"}, {"a=always", "a=never"}, {"*=never", "*=always"}} {
		if _, err := mcp.ParseOffload(bad); !errors.Is(err, mcp.ErrBadOffload) {
			t.Errorf("ParseOffload(%q) = %v, want ErrBadOffload", bad, err)
		}
	}
}

func TestReadToolAvoidsUpstreamName(t *testing.T) {
	f := newFake(nil)
	f.server.AddTool(&sdk.Tool{Name: mcp.ReadToolName, InputSchema: objectSchema}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: text("the upstream's own")}, nil
	})
	r := newRig(t, f)
	tools, err := r.client.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, tl := range tools.Tools {
		names[tl.Name]++
	}
	if got := r.proxy.ReadToolName(); got == mcp.ReadToolName || names[got] != 1 || names[mcp.ReadToolName] != 1 {
		t.Fatalf("read tool is %s beside the upstream's %s: tools %v", got, mcp.ReadToolName, names)
	}
	if got := r.call(t, mcp.ReadToolName, nil).Content[0].(*sdk.TextContent).Text; got != "the upstream's own" {
		t.Errorf("%s did not reach the upstream's tool: %q", mcp.ReadToolName, got)
	}
	res := r.call(t, "big", nil)
	key := offloaded(t, res)[0]["key"].(string)
	if got := readAllLines(t, r, key); got != bigText {
		t.Errorf("renamed read tool does not read back")
	}
}

func TestFollowsToolListChanged(t *testing.T) {
	f := newFake(nil)
	r := newRig(t, f)
	ctx := context.Background()
	f.server.AddTool(&sdk.Tool{Name: "late", Description: "added later", InputSchema: objectSchema}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: text("late answer")}, nil
	})
	waitTools(t, r, ctx, func(names map[string]bool) bool { return names["late"] })
	if got := r.call(t, "late", nil).Content[0].(*sdk.TextContent).Text; got != "late answer" {
		t.Errorf("late tool answered %q", got)
	}
	f.server.RemoveTools("small")
	waitTools(t, r, ctx, func(names map[string]bool) bool { return !names["small"] })
}

// waitTools waits for list_changed notifications until the client's tool
// list satisfies ok.
func waitTools(t *testing.T, r *rig, ctx context.Context, ok func(map[string]bool) bool) {
	t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case <-r.changed:
		case <-timeout:
			t.Fatal("no tools/list_changed reached the client")
		}
		res, err := r.client.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, tl := range res.Tools {
			names[tl.Name] = true
		}
		if ok(names) {
			return
		}
	}
}

func TestProgressAndCancellation(t *testing.T) {
	f := newFake(nil)
	r := newRig(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		params := &sdk.CallToolParams{Name: "slow"}
		params.SetProgressToken("client-token-7")
		_, err := r.client.CallTool(ctx, params)
		done <- err
	}()
	for i := 1; i <= 3; i++ {
		select {
		case p := <-r.progress:
			if p.ProgressToken != "client-token-7" || p.Progress != float64(i) || p.Message == "" {
				t.Errorf("progress %d = %+v, want the client's token and progress %d", i, p, i)
			}
		case <-time.After(deadline):
			t.Fatalf("progress %d never reached the client", i)
		}
	}
	cancel()
	select {
	case <-f.cancelled:
	case <-time.After(deadline):
		t.Fatal("cancelling the client's call did not cancel the upstream's")
	}
	if err := <-done; err == nil {
		t.Error("cancelled call returned no error")
	}
	// Released, a later call answers.
	close(f.release)
	if got := r.call(t, "slow", nil).Content[0].(*sdk.TextContent).Text; got != "released" {
		t.Errorf("slow answered %q", got)
	}
}

func TestProgressNoneLost(t *testing.T) {
	r := newRig(t, newFake(nil))
	for round := 0; round < 20; round++ {
		params := &sdk.CallToolParams{Name: "steps"}
		params.SetProgressToken(round)
		if _, err := r.client.CallTool(context.Background(), params); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			// The Go client queues notifications apart from answers, so
			// this waits; a TypeScript client drops what comes after the
			// answer (the end-to-end test shows none does).
			select {
			case p := <-r.progress:
				if p.Progress != float64(i) {
					t.Fatalf("round %d: progress %v, want %d", round, p.Progress, i)
				}
			case <-time.After(deadline):
				t.Fatalf("round %d: progress %d never reached the client", round, i)
			}
		}
	}
}

func TestSlowCallBlocksNoOther(t *testing.T) {
	f := newFake(nil)
	r := newRig(t, f)
	done := make(chan error, 1)
	go func() {
		_, err := r.client.CallTool(context.Background(), &sdk.CallToolParams{Name: "slow"})
		done <- err
	}()
	select {
	case <-f.started:
	case <-time.After(deadline):
		t.Fatal("slow never started")
	}
	for i := 0; i < 3; i++ {
		if res := r.call(t, "big", nil); len(offloaded(t, res)) != 1 {
			t.Errorf("big beside a slow call: not offloaded")
		}
	}
	close(f.release)
	if err := <-done; err != nil {
		t.Errorf("slow, released: %v", err)
	}
}

// TestMetaPassesAsItCame: a request's _meta reaches the upstream as the
// client sent it, every key of it; a key the upstream refuses gets the
// answer it gets without the proxy.
func TestMetaPassesAsItCame(t *testing.T) {
	// An upstream on a protocol version from before per-request _meta.
	f := newFake(&sdk.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	r := newRig(t, f)
	ctx := context.Background()
	meta := sdk.Meta{"x.example/trace": "abc", "x.example/n": float64(2)}
	if _, err := r.client.CallTool(ctx, &sdk.CallToolParams{Name: "small", Meta: meta}); err != nil {
		t.Fatal(err)
	}
	if got := f.lastMeta(); !reflect.DeepEqual(map[string]any(got), map[string]any(meta)) {
		t.Errorf("upstream got _meta %v, want %v", got, meta)
	}
	sdkKeys := sdk.Meta{"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
	_, err := r.client.CallTool(ctx, &sdk.CallToolParams{Name: "small", Meta: sdkKeys})
	tr, _ := dialFake(f).Connect(ctx)
	cs, cerr := sdk.NewClient(&sdk.Implementation{Name: "direct"}, nil).Connect(ctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if cerr != nil {
		t.Fatal(cerr)
	}
	defer cs.Close()
	_, derr := cs.CallTool(ctx, &sdk.CallToolParams{Name: "small", Meta: sdkKeys})
	if fmt.Sprint(err) != fmt.Sprint(derr) {
		t.Errorf("through the proxy: %v; directly: %v", err, derr)
	}
}

func TestRunPerSession(t *testing.T) {
	r := newRig(t, newFake(nil))
	other := r.connect(t)
	ctx := context.Background()
	r.call(t, "big", nil)
	if _, err := other.CallTool(ctx, &sdk.CallToolParams{Name: "big"}); err != nil {
		t.Fatal(err)
	}
	ps, _ := r.store.List(ctx, store.ListOptions{})
	if len(ps) != 2 || ps[0].Run == ps[1].Run || ps[0].Step != 1 || ps[1].Step != 1 {
		t.Fatalf("two sessions wrote %+v, want two runs at step 1", ps)
	}
	// A session reads back its own run only: the newest part is other's.
	key := ps[0].Key
	for sess, wantErr := range map[*sdk.ClientSession]bool{other: false, r.client: true} {
		res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: map[string]any{"ref": key}})
		if err != nil || res.IsError != wantErr {
			t.Errorf("read of %s: error %v, want %v (%v)", key, res.IsError, wantErr, err)
		}
	}

	s := newRig(t, newFake(nil), mcp.WithRun("fixed-run"))
	s.call(t, "big", nil)
	ps, _ = s.store.List(ctx, store.ListOptions{})
	if len(ps) != 1 || ps[0].Run != "fixed-run" {
		t.Errorf("WithRun: stored %+v, want run fixed-run", ps)
	}
}

// Two client sessions of a proxy whose sessions share a run (WithRun)
// call one tool at their first step: their results get keys of their
// own, and each session's pointer reads back its own result, not the
// other's.
func TestSharedRunKeepsSessionsApart(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, newFake(nil), mcp.WithRun("project-x"))
	other := r.connect(t)
	var keys []string
	for i, sess := range []*sdk.ClientSession{r.client, other} {
		res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"session": i}})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, offloaded(t, res)[0]["key"].(string))
	}
	if keys[0] == keys[1] || !strings.HasPrefix(keys[0], "project-x/1_echo_") || !strings.HasPrefix(keys[1], "project-x/1_echo_") {
		t.Fatalf("the two sessions' first calls got keys %q: want two keys of step 1 in run project-x", keys)
	}
	for i, sess := range []*sdk.ClientSession{r.client, other} {
		res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: map[string]any{"ref": keys[i], "pattern": "session"}})
		if err != nil || res.IsError {
			t.Fatalf("session %d reading its pointer %s: %v %+v", i, keys[i], err, res)
		}
		got := res.Content[0].(*sdk.TextContent).Text
		if want := fmt.Sprintf(`{"session":%d}`, i); !strings.Contains(got, want) {
			t.Errorf("session %d read back %q, want its own result, ending %s", i, got, want)
		}
	}
}

func TestResourceURIRoundTrip(t *testing.T) {
	for _, key := range []string{"run-1/2_search_call0.txt", "r/3_a%2Fb_call-1_0.png", "r/x y#z?.txt"} {
		uri := mcp.ResourceURI(key)
		got, err := mcp.KeyOfURI(uri)
		if err != nil || got != key {
			t.Errorf("KeyOfURI(ResourceURI(%q) = %q) = %q, %v", key, uri, got, err)
		}
	}
	for _, bad := range []string{"file:///x", "toolcas://run", "toolcas:///x", "toolcas://run/%zz"} {
		if _, err := mcp.KeyOfURI(bad); !errors.Is(err, mcp.ErrBadURI) {
			t.Errorf("KeyOfURI(%q) = %v, want ErrBadURI", bad, err)
		}
	}
}
