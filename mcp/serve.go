package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

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

// SearchResult is the search tool's structured result.
type SearchResult struct {
	Parts []Found `json:"parts"`
	// More reports that more parts matched than the limit let through.
	More bool `json:"more"`
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
	s.rd = rd
	s.server = sdk.NewServer(&sdk.Implementation{Name: "toolcas", Title: "toolcas store " + st.Location(), Version: Version},
		&sdk.ServerOptions{Instructions: "Tool results offloaded by toolcas: read them back with " + ReadToolName +
			" or resources/read of toolcas://RUN/KEY, find them with search, count them with stats."})
	s.server.AddTool(rd.toolDef(ReadToolName), func(ctx context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return s.rd.call(ctx, s.readRun(), r.Params.Arguments), nil
	})
	ro := &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)}
	sdk.AddTool(s.server, &sdk.Tool{Name: "search", Title: "Search offloaded tool results",
		Description: "List offloaded tool result parts, newest first, by run, tool, kind, key text or age. " +
			"Each has the key and the toolcas:// URI to read it back with.", Annotations: ro}, s.search)
	sdk.AddTool(s.server, &sdk.Tool{Name: "stats", Title: "Store statistics",
		Description: "How many runs, parts and blobs the store holds, how many bytes the tools produced, how many it stores, and what dedup saved; per tool and per run.",
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
	o := store.ListOptions{Run: a.Run, Tool: a.Tool, Kind: hook.Kind(a.Kind), Limit: a.Limit + 1}
	if a.Since != "" {
		d, err := parseAge(a.Since)
		if err != nil {
			return nil, SearchResult{}, err
		}
		o.Since = time.Now().Add(-d)
	}
	if a.Key != "" {
		o.Limit = 0 // filtered here
	}
	ps, err := s.store.List(ctx, o)
	if err != nil {
		return nil, SearchResult{}, fmt.Errorf("search: %w", err)
	}
	out := SearchResult{Parts: []Found{}}
	for _, p := range ps {
		if a.Key != "" && !strings.Contains(p.Key, a.Key) {
			continue
		}
		if len(out.Parts) == a.Limit {
			out.More = true
			break
		}
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
		fmt.Fprintf(&b, "(more match: narrow the search or raise the limit)")
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.TrimSuffix(b.String(), "\n")}}}, out, nil
}

func (s *StoreServer) stats(ctx context.Context, _ *sdk.CallToolRequest, a StatsArgs) (*sdk.CallToolResult, store.Stats, error) {
	run := a.Run
	if s.run != "" {
		if run != "" && run != s.run {
			return nil, store.Stats{}, fmt.Errorf("run %q: this server serves run %q only", run, s.run)
		}
		run = s.run
	}
	st, err := s.store.Stats(ctx, run)
	if err != nil {
		return nil, store.Stats{}, fmt.Errorf("stats: %w", err)
	}
	text, _ := json.MarshalIndent(st, "", "  ")
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(text)}}}, st, nil
}

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
