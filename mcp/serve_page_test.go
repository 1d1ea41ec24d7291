package mcp_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/internal/procstat"
	"github.com/toolcas/toolcas/mcp"
	"github.com/toolcas/toolcas/store"
)

// putSteps stores n small text parts of run, one a step, of tools taking
// turns, and returns their keys.
func putSteps(t testing.TB, st *store.Store, run string, n int) []string {
	t.Helper()
	var keys []string
	for i := range n {
		tool := []string{"grep", "read_file", "run_tests"}[i%3]
		res, err := st.Put(context.Background(), store.StreamPart{Key: hook.Key{Run: run, Step: i + 1, Tool: tool, CallID: "c", Part: -1}},
			strings.NewReader(fmt.Sprintf("part %d of %s\n", i, run)))
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, res.Key)
	}
	return keys
}

// search calls the search tool and returns its structured result.
func search(t *testing.T, cs *sdk.ClientSession, args map[string]any) (mcp.SearchResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "search", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("search %v: %v %s", args, err, jsonOf(t, res))
	}
	var out mcp.SearchResult
	remarshal(t, res.StructuredContent, &out)
	return out, res.Content[0].(*sdk.TextContent).Text
}

// TestSearchPages: search lists a page at a time; following next_cursor
// with the same filters lists every matching part once, newest first, with
// or without key text.
func TestSearchPages(t *testing.T) {
	st := openStore(t)
	a := putSteps(t, st, "run-a", 25)
	b := putSteps(t, st, "run-b", 10)
	cs := serveClient(t, st)
	for _, tc := range []struct {
		args map[string]any
		want []string
	}{
		{map[string]any{}, append(slices.Clone(a), b...)},
		{map[string]any{"run": "run-a"}, a},
		{map[string]any{"key": "_grep_"}, filter(append(slices.Clone(a), b...), "_grep_")},
		{map[string]any{"key": "run-b/1"}, filter(b, "run-b/1")},
		{map[string]any{"key": "nothing"}, nil},
	} {
		for _, limit := range []int{1, 7, 100} {
			var got []string
			args := map[string]any{"limit": limit}
			for k, v := range tc.args {
				args[k] = v
			}
			for pages := 0; ; pages++ {
				out, text := search(t, cs, args)
				if len(out.Parts) > limit || pages > len(tc.want) {
					t.Fatalf("search %v: %d parts on page %d", args, len(out.Parts), pages)
				}
				for _, p := range out.Parts {
					got = append(got, p.Key)
				}
				if !out.More {
					if out.NextCursor != "" {
						t.Errorf("search %v: last page with a cursor %q", args, out.NextCursor)
					}
					break
				}
				if !strings.Contains(text, strconv.Quote(out.NextCursor)) {
					t.Errorf("search %v: the text does not give the cursor %q:\n%s", args, out.NextCursor, text)
				}
				args["cursor"] = out.NextCursor
			}
			// Newest first: the last stored comes first.
			want := slices.Clone(tc.want)
			slices.Reverse(want)
			if b := filter(want, "run-b/"); len(b) > 0 && len(b) < len(want) {
				want = append(b, filter(want, "run-a/")...)
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("search %v by pages of %d:\n%v\nwant\n%v", tc.args, limit, got, want)
			}
		}
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "search", Arguments: map[string]any{"cursor": "nonsense"}})
	if err == nil && !res.IsError {
		t.Error("search with a cursor no search gave succeeded")
	}
}

func filter(keys []string, sub string) []string {
	var out []string
	for _, k := range keys {
		if strings.Contains(k, sub) {
			out = append(out, k)
		}
	}
	return out
}

// TestStatsToolFieldNames: the stats tool's result, structured and as
// text, has the field names of casctl stats --json.
func TestStatsToolFieldNames(t *testing.T) {
	st := openStore(t)
	putSteps(t, st, "run-a", 3)
	cs := serveClient(t, st)
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "stats", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("stats: %v %s", err, jsonOf(t, res))
	}
	want := []string{"blobs", "by_tool", "compression_ratio", "dedup_ratio", "index_bytes", "logical_bytes", "loose_bytes",
		"pack_file_bytes", "pack_raw_bytes", "packed_blobs", "packed_bytes", "packs", "parts", "removals", "removed_parts", "runs",
		"saved_bytes", "stored_bytes"}
	var text map[string]any
	if err := jsonUnmarshal([]byte(res.Content[0].(*sdk.TextContent).Text), &text); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{"structured content": res.StructuredContent, "text": text} {
		var m map[string]any
		remarshal(t, v, &m)
		var got []string
		for k := range m {
			got = append(got, k)
		}
		slices.Sort(got)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("stats %s has fields %v, want %v", name, got, want)
		}
		var tools []map[string]any
		remarshal(t, m["by_tool"], &tools)
		if len(tools) != 3 || tools[0]["tool"] == nil || tools[0]["logical_bytes"] == nil || m["parts"] != 3.0 {
			t.Errorf("stats %s: parts %v, by_tool %v", name, m["parts"], tools)
		}
	}
}

// TestCompleteAndSubscribe: completion/complete offers the runs and a
// run's keys for the toolcas:// template, at most 100 of them; and
// resources/subscribe is accepted for a part, refused for a missing one.
func TestCompleteAndSubscribe(t *testing.T) {
	st := openStore(t)
	keys := putSteps(t, st, "run-a", 120)
	putSteps(t, st, "run-b", 2)
	putSteps(t, st, "other", 1)
	ctx := context.Background()
	complete := func(cs *sdk.ClientSession, arg, value string, ctxArgs map[string]string) sdk.CompletionResultDetails {
		t.Helper()
		p := &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/resource", URI: mcp.ResourceURITemplate},
			Argument: sdk.CompleteParamsArgument{Name: arg, Value: value}}
		if ctxArgs != nil {
			p.Context = &sdk.CompleteContext{Arguments: ctxArgs}
		}
		res, err := cs.Complete(ctx, p)
		if err != nil {
			t.Fatalf("complete %s %q: %v", arg, value, err)
		}
		return res.Completion
	}
	cs := serveClient(t, st)
	caps := cs.InitializeResult().Capabilities
	if caps.Completions == nil || caps.Resources == nil || !caps.Resources.Subscribe {
		t.Errorf("capabilities %s: want completions and resource subscriptions", jsonOf(t, caps))
	}
	if c := complete(cs, "run", "run-", nil); strings.Join(c.Values, " ") != "run-a run-b" || c.HasMore {
		t.Errorf("runs completing run- = %+v", c)
	}
	if c := complete(cs, "run", "", nil); strings.Join(c.Values, " ") != "other run-a run-b" {
		t.Errorf("runs = %+v", c)
	}
	c := complete(cs, "key", "1", map[string]string{"run": "run-a"})
	var want []string
	for _, k := range keys {
		if r := strings.TrimPrefix(k, "run-a/"); strings.HasPrefix(r, "1") {
			want = append(want, r)
		}
	}
	slices.Sort(want)
	if strings.Join(c.Values, " ") != strings.Join(want, " ") || len(want) < 20 || c.HasMore {
		t.Errorf("keys of run-a completing 1 = %v, want %v", c.Values, want)
	}
	if c := complete(cs, "key", "", map[string]string{"run": "run-a"}); len(c.Values) != 100 || !c.HasMore {
		t.Errorf("all 120 keys of run-a: %d values, more %v; want 100 and more", len(c.Values), c.HasMore)
	}
	if c := complete(cs, "key", "", nil); len(c.Values) != 0 {
		t.Errorf("keys without a run = %v, want none", c.Values)
	}

	// A server of one run completes that run only, and its keys without
	// being told the run.
	one := serveClient(t, st, mcp.WithRun("run-b"))
	if c := complete(one, "run", "", nil); strings.Join(c.Values, " ") != "run-b" {
		t.Errorf("runs on run-b's server = %v", c.Values)
	}
	if c := complete(one, "key", "", nil); len(c.Values) != 2 {
		t.Errorf("keys on run-b's server = %v", c.Values)
	}
	if c := complete(one, "key", "", map[string]string{"run": "run-a"}); len(c.Values) != 0 {
		t.Errorf("run-a's keys on run-b's server = %v", c.Values)
	}

	// resources/subscribe, of the protocol before subscriptions/listen.
	uri := mcp.ResourceURI(keys[0])
	legacy := legacyClient(t, st)
	if err := legacy.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Errorf("resources/subscribe %s: %v", uri, err)
	}
	if err := legacy.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: uri}); err != nil {
		t.Errorf("resources/unsubscribe %s: %v", uri, err)
	}
	for _, bad := range []string{"toolcas://run-a/999_none_c.txt", "http://x/y"} {
		if err := legacy.Subscribe(ctx, &sdk.SubscribeParams{URI: bad}); err == nil {
			t.Errorf("resources/subscribe %s succeeded", bad)
		}
	}
	if err := legacyClient(t, st, mcp.WithRun("run-b")).Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err == nil {
		t.Errorf("resources/subscribe to run-a's %s on run-b's server succeeded", uri)
	}
	// And through subscriptions/listen, the protocol's newer way.
	if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Errorf("subscribe %s: %v", uri, err)
	}
}

// legacyClient is serveClient for a client of protocol 2025-11-25, which
// subscribes with resources/subscribe.
func legacyClient(t *testing.T, st *store.Store, opts ...mcp.Option) *sdk.ClientSession {
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
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, b, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// fillIndex records n parts in the index of a new store in dir, in
// batches, without their blobs: what a search lists is the index alone.
// Their call ids, and so their keys, are some 600 bytes long, as a tool's
// may be: a listing held whole takes some kilobytes a part.
func fillIndex(t testing.TB, dir string, n int) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dir, store.WithCreate(), store.WithDurability(store.SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	ix, err := index.Open(ctx, filepath.Join(dir, store.IndexFile), index.WithDurability(cas.SyncNone))
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for i := 0; i < n; i += 5000 {
		ps := make([]index.NewPart, 0, 5000)
		for j := i; j < min(i+5000, n); j++ {
			content := fmt.Sprint("content ", j%5000)
			call := fmt.Sprintf("call-%d-%s", j, strings.Repeat("x", 600))
			ps = append(ps, index.NewPart{
				Key: fmt.Sprintf("run-%d/%d_read_file_%s.txt", j%100, j, call), Run: fmt.Sprint("run-", j%100),
				Step: j, Tool: "read_file", CallID: call, Part: -1, Kind: catalog.KindText,
				MIME: "text/plain", Chars: 4096, Bytes: 4096, Blob: cas.Blob{Digest: cas.Sum([]byte(content)), Ext: ".txt"},
			})
		}
		if _, err := ix.Record(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
}

// searchParts is how many parts TestSearchRSS's store holds.
const searchParts = 15_000

// TestSearchRSS searches, with key text every part matches, a store of
// 15,000 parts through mcp serve's server, in a process of its own, and
// pages on once: its peak resident set grows by far less than the
// listing of every part takes.
func TestSearchRSS(t *testing.T) {
	if dir := os.Getenv("TOOLCAS_TEST_SEARCH_RSS"); dir != "" {
		searchChild(t, dir)
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("no peak resident set size on windows")
	}
	if testing.Short() {
		t.Skip("records 15,000 parts; skipped with -short")
	}
	dir := t.TempDir()
	fillIndex(t, dir, searchParts)
	start, peak := childRSS(t, "TestSearchRSS", "TOOLCAS_TEST_SEARCH_RSS="+dir, "SEARCH ")
	t.Logf("peak RSS %d KiB, %d KiB before the searches", peak, start)
	if peak-start >= 24<<10 {
		t.Errorf("searching %d parts raised the peak RSS by %d KiB, want < 24576 KiB", searchParts, peak-start)
	}
}

// searchChild is TestSearchRSS's process.
func searchChild(t *testing.T, dir string) {
	st, err := store.Open(context.Background(), dir, store.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs := serveClient(t, st)
	runtime.GC()
	fmt.Println("START_KIB", procstat.PeakRSSKiB())
	args := map[string]any{"key": "read_file", "limit": 100}
	for range 2 {
		out, _ := search(t, cs, args)
		fmt.Printf("SEARCH %v: %d parts, more %v\n", args, len(out.Parts), out.More)
		if len(out.Parts) != 100 || !out.More {
			t.Fatalf("search %v: %d parts, more %v", args, len(out.Parts), out.More)
		}
		args["cursor"] = out.NextCursor
	}
	fmt.Println("PEAK_KIB", procstat.PeakRSSKiB())
}
