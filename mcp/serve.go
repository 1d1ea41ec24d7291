package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/store"
)

// Search limits.
const (
	DefaultSearchLimit = 50
	MaxSearchLimit     = 1000
)

// StoreServer is an MCP server over a store alone: the read-back tool,
// search (what casctl ls lists), stats, and every stored part as a
// toolcas:// resource. It is for agents that offload through the library
// or a proxy and read back from another process.
type StoreServer struct {
	store  *store.Store
	run    string
	rd     *reader
	server *sdk.Server
}

// SearchArgs are the search tool's parameters.
type SearchArgs struct {
	Run   string `json:"run,omitempty" jsonschema:"only parts of this run"`
	Tool  string `json:"tool,omitempty" jsonschema:"only parts of results of this tool"`
	Kind  string `json:"kind,omitempty" jsonschema:"only parts of this kind: text, image or file"`
	Key   string `json:"key,omitempty" jsonschema:"only parts whose key contains this text"`
	Since string `json:"since,omitempty" jsonschema:"only parts stored in this last while: 90m, 2h, 7d"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many parts, newest first (default 50, at most 1000)"`
	// Cursor goes on where a page ended.
	Cursor string `json:"cursor,omitempty" jsonschema:"the next_cursor a page of results gave, to list the page after it (with the same filters)"`
}

// Found is one part search lists.
type Found struct {
	Key       string    `json:"key"`
	URI       string    `json:"uri"`
	Run       string    `json:"run"`
	Step      int       `json:"step"`
	Tool      string    `json:"tool"`
	Version   int       `json:"version"`
	Kind      string    `json:"kind"`
	MIME      string    `json:"mime,omitempty"`
	Size      int64     `json:"size"`
	Digest    string    `json:"digest"`
	Path      string    `json:"path"`
	CreatedAt time.Time `json:"created_at"`
}

// SearchResult is the search tool's structured result: a page of parts.
type SearchResult struct {
	Parts []Found `json:"parts"`
	// More reports that more parts matched than the limit let through.
	More bool `json:"more"`
	// NextCursor, when More is set, is the cursor argument that lists the
	// next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// StatsArgs are the stats tool's parameters.
type StatsArgs struct {
	Run string `json:"run,omitempty" jsonschema:"only this run"`
}

// NewStoreServer returns the server over st.
// WithRun scopes it to one run: it reads, lists and counts only that run's
// parts.
func NewStoreServer(st *store.Store, opts ...Option) (*StoreServer, error) {
	o := options{server: true}
	if err := o.apply(opts); err != nil {
		return nil, err
	}
	s := &StoreServer{store: st, run: o.run}
	var hs hook.Store = st
	if s.run == "" {
		hs = anyRun{st}
	}
	rd, err := newReader(hs)
	if err != nil {
		return nil, err
	}
	rd.limitResources(o.maxResource)
	s.rd = rd
	s.server = sdk.NewServer(&sdk.Implementation{Name: "toolcas", Title: "toolcas store " + st.Location(), Version: Version},
		&sdk.ServerOptions{Instructions: "Tool results offloaded by toolcas: read them back with " + ReadToolName +
			" or resources/read of toolcas://RUN/KEY, find them with search, count them with stats.",
			CompletionHandler: s.complete, SubscribeHandler: s.subscribe, UnsubscribeHandler: s.unsubscribe})
	s.server.AddTool(rd.toolDef(ReadToolName), func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return s.rd.call(ctx, s.readRun(), r.Params.Arguments), nil
	})
	ro := &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)}
	sdk.AddTool(s.server, &sdk.Tool{Name: "search", Title: "Search offloaded tool results",
		Description: "List offloaded tool result parts, newest first, by run, tool, kind, key text or age, a page at a time. " +
			"Each has the key and the toolcas:// URI to read it back with. When more match than the limit, " +
			"the result's next_cursor, given as cursor with the same filters, lists the next page. " +
			"To find a line in the parts' text, use " + ReadToolName + " with a pattern and no ref.", Annotations: ro}, s.search)
	sdk.AddTool(s.server, &sdk.Tool{Name: "stats", Title: "Store statistics",
		Description: "How many runs, parts and blobs the store holds, how many bytes the tools produced, how many it stores, " +
			"and what dedup saved, per tool: for the whole store or one run. The fields are casctl stats --json's.",
		Annotations: ro}, s.stats)
	s.server.AddResourceTemplate(resourceTemplate(), func(ctx context.Context, r *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return s.rd.readResource(ctx, s.readRun(), r.Params.URI)
	})
	return s, nil
}

// Server returns the MCP server, to serve over any transport.
func (s *StoreServer) Server() *sdk.Server { return s.server }

// readRun is the run reads are scoped to: the server's, else any (the
// reader's store ignores it).
func (s *StoreServer) readRun() string { return or(s.run, hook.DefaultRun) }

func (s *StoreServer) search(ctx context.Context, _ *sdk.CallToolRequest, a SearchArgs) (*sdk.CallToolResult, SearchResult, error) {
	if a.Limit < 0 || a.Limit > MaxSearchLimit {
		return nil, SearchResult{}, fmt.Errorf("limit %d out of range 1..%d", a.Limit, MaxSearchLimit)
	}
	if a.Limit == 0 {
		a.Limit = DefaultSearchLimit
	}
	if s.run != "" {
		if a.Run != "" && a.Run != s.run {
			return nil, SearchResult{}, fmt.Errorf("run %q: this server serves run %q only", a.Run, s.run)
		}
		a.Run = s.run
	}
	switch a.Kind {
	case "", "text", "image", "file":
	default:
		return nil, SearchResult{}, fmt.Errorf("kind %q: want text, image or file", a.Kind)
	}
	after, err := store.ParsePageCursor(a.Cursor)
	if err != nil {
		return nil, SearchResult{}, fmt.Errorf("cursor %q: not one a search gave", a.Cursor)
	}
	o := store.PageOptions{ListOptions: store.ListOptions{Run: a.Run, Tool: a.Tool, Kind: hook.Kind(a.Kind), Limit: a.Limit},
		KeyContains: a.Key, After: after}
	if a.Since != "" {
		d, err := parseAge(a.Since)
		if err != nil {
			return nil, SearchResult{}, err
		}
		o.Since = time.Now().Add(-d)
	}
	ps, next, err := s.page(ctx, o)
	if err != nil {
		return nil, SearchResult{}, fmt.Errorf("search: %w", err)
	}
	out := SearchResult{Parts: make([]Found, 0, len(ps)), More: !next.IsZero(), NextCursor: next.String()}
	for _, p := range ps {
		out.Parts = append(out.Parts, Found{Key: p.Key, URI: ResourceURI(p.Key), Run: p.Run, Step: p.Step, Tool: p.Tool, Version: p.Version,
			Kind: string(p.Kind), MIME: p.MIME, Size: p.Bytes, Digest: p.Blob.Digest.String(), Path: s.store.Path(p.Blob),
			CreatedAt: p.CreatedAt.UTC().Truncate(time.Second)})
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tVER\tKIND\tBYTES\tCREATED")
	for _, f := range out.Parts {
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%s\n", f.Key, f.Version, f.Kind, f.Size, f.CreatedAt.Format(time.RFC3339))
	}
	w.Flush()
	if len(out.Parts) == 0 {
		b.Reset()
		b.WriteString("no part matches")
	} else if out.More {
		fmt.Fprintf(&b, "(more match: the next page with cursor %q, or narrow the search)", out.NextCursor)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.TrimSuffix(b.String(), "\n")}}}, out, nil
}

// page returns a page of the parts o matches and the cursor of the next.
// The first page of a search without key text lists the newest parts
// without reading every part (as List does); any other page is one query
// of a page, the key's text matched by the database: a search takes memory
// of a page, whatever the store's size.
func (s *StoreServer) page(ctx context.Context, o store.PageOptions) ([]store.Part, store.PageCursor, error) {
	if o.KeyContains != "" || !o.After.IsZero() {
		return s.store.ListPage(ctx, o)
	}
	lo := o.ListOptions
	lo.Limit++
	ps, err := s.store.List(ctx, lo)
	if err != nil || len(ps) <= o.Limit {
		return ps, store.PageCursor{}, err
	}
	ps = ps[:o.Limit]
	return ps, store.CursorAfter(ps[len(ps)-1]), nil
}

func (s *StoreServer) stats(ctx context.Context, _ *sdk.CallToolRequest, a StatsArgs) (*sdk.CallToolResult, store.StatsReport, error) {
	run := a.Run
	if s.run != "" {
		if run != "" && run != s.run {
			return nil, store.StatsReport{}, fmt.Errorf("run %q: this server serves run %q only", run, s.run)
		}
		run = s.run
	}
	st, err := s.store.Stats(ctx, run)
	if err != nil {
		return nil, store.StatsReport{}, fmt.Errorf("stats: %w", err)
	}
	rep := st.Report()
	text, _ := json.MarshalIndent(rep, "", "  ")
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(text)}}}, rep, nil
}

// MaxCompletions is the most values completion/complete offers, as the
// protocol allows.
const MaxCompletions = 100

// complete offers values for the arguments of the toolcas:// template:
// run, the first element of the keys (a run's name, as its keys render
// it), and key, the rest, within the run the context names. Anything else
// it offers nothing for.
func (s *StoreServer) complete(ctx context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
	p := req.Params
	var values []string
	if p.Ref.Type == "ref/resource" && p.Ref.URI == ResourceURITemplate {
		var err error
		switch p.Argument.Name {
		case "run":
			values, err = s.store.KeyHeads(ctx, s.run, p.Argument.Value, MaxCompletions+1)
		case "key":
			values, err = s.completeKey(ctx, p)
		}
		if err != nil {
			return nil, fmt.Errorf("complete %s: %w", p.Argument.Name, err)
		}
	}
	res := &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: []string{}}}
	if len(values) > MaxCompletions {
		values, res.Completion.HasMore = values[:MaxCompletions], true
	}
	res.Completion.Values = append(res.Completion.Values, values...)
	return res, nil
}

// completeKey offers the rest of the keys that start with the argument's
// value, within the run the context names (or the server's only run).
func (s *StoreServer) completeKey(ctx context.Context, p *sdk.CompleteParams) ([]string, error) {
	var head string
	if p.Context != nil {
		head = p.Context.Arguments["run"]
	}
	if head == "" && s.run != "" {
		heads, err := s.store.KeyHeads(ctx, s.run, "", 2)
		if err != nil || len(heads) != 1 {
			return nil, err
		}
		head = heads[0]
	}
	if head == "" || strings.Contains(head, "/") {
		return nil, nil
	}
	if s.run != "" {
		// Only the server's run's keys: its heads are few.
		heads, err := s.store.KeyHeads(ctx, s.run, head, 0)
		if err != nil || !slices.Contains(heads, head) {
			return nil, err
		}
	}
	keys, err := s.store.Keys(ctx, head+"/"+p.Argument.Value, MaxCompletions+1)
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, head+"/")
	}
	return keys, err
}

// subscribe accepts a subscription to a part the server can read. No
// update is ever sent: a part's bytes never change, and this server does
// not watch for a writer storing a new version of a key (which readers of
// the key's URI then get).
func (s *StoreServer) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	key, err := KeyOfURI(req.Params.URI)
	if err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	if _, err := s.store.Resolve(ctx, s.run, key); err != nil {
		if errors.Is(err, hook.ErrNotFound) || errors.Is(err, hook.ErrRefused) {
			return sdk.ResourceNotFoundError(req.Params.URI)
		}
		return fmt.Errorf("subscribe %s: %w", key, err)
	}
	return nil
}

// unsubscribe ends a subscription, which asked for nothing to stop.
func (s *StoreServer) unsubscribe(context.Context, *sdk.UnsubscribeRequest) error { return nil }

// parseAge reads 90m, 2h or 7d.
func parseAge(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		if _, err := fmt.Sscanf(n, "%d", &days); err != nil || days < 0 || fmt.Sprint(days) != n {
			return 0, fmt.Errorf("since %q: want a duration as 90m, 2h or 7d", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("since %q: want a duration as 90m, 2h or 7d", s)
	}
	return d, nil
}
