package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/mcp"
)

// TestHTTPBothWays runs the proxy over streamable HTTP in front of an
// upstream reached over streamable HTTP.
func TestHTTPBothWays(t *testing.T) {
	f := newFake(nil)
	upSrv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return f.server }, nil))
	defer upSrv.Close()
	st := openStore(t)
	ctx := context.Background()
	p, err := mcp.NewProxy(ctx, &mcp.URL{Endpoint: upSrv.URL}, st, mcp.WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	proxySrv := httptest.NewServer(p.Handler())
	defer proxySrv.Close()
	progress := make(chan float64, 16)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) { progress <- r.Params.Progress },
	}).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: proxySrv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "big"})
	if err != nil {
		t.Fatal(err)
	}
	recs := offloaded(t, res)
	rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: recs[0]["uri"].(string)})
	if err != nil || rr.Contents[0].Text != bigText {
		t.Fatalf("resources/read over HTTP: %v", err)
	}
	small, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "small"})
	if err != nil || small.Content[0].(*sdk.TextContent).Text != smallText {
		t.Fatalf("small over HTTP: %v %s", err, jsonOf(t, small))
	}
	params := &sdk.CallToolParams{Name: "steps"}
	params.SetProgressToken("p")
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		select {
		case got := <-progress:
			if got != float64(i) {
				t.Errorf("progress %v, want %d", got, i)
			}
		case <-time.After(deadline):
			t.Fatalf("progress %d never came", i)
		}
	}

	// The upstream goes away: an error naming it.
	upSrv.CloseClientConnections()
	upSrv.Close()
	_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "small"})
	if err == nil || !strings.Contains(err.Error(), "upstream "+upSrv.URL) {
		t.Errorf("call with the upstream gone: %v, want an error naming %s", err, upSrv.URL)
	}
}

// failingStore refuses every write.
type failingStore struct{ hook.Store }

func (failingStore) Write(context.Context, []hook.Item) ([]hook.Stored, error) {
	return nil, errors.New("disk full")
}

func TestStoreFailureLeavesResultAsItCame(t *testing.T) {
	f := newFake(nil)
	st := openStore(t)
	p, err := mcp.NewProxy(context.Background(), dialFake(f), failingStore{st}, mcp.WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := &rig{fake: f, store: st, proxy: p, changed: make(chan struct{}, 16), progress: make(chan *sdk.ProgressNotificationParams, 16)}
	r.client = r.connect(t)
	if got, want := jsonOf(t, r.call(t, "big", nil)), jsonOf(t, direct(t, f, "big")); got != want {
		t.Errorf("with the store failing, big came back changed:\n%.300s\n%.300s", got, want)
	}
}

func TestResourceSubscriptions(t *testing.T) {
	subscribed := make(chan string, 1)
	f := newFake(&sdk.ServerOptions{
		SubscribeHandler:   func(_ context.Context, r *sdk.SubscribeRequest) error { subscribed <- r.Params.URI; return nil },
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
	})
	updated := make(chan string, 1)
	st := openStore(t)
	ctx := context.Background()
	p, err := mcp.NewProxy(ctx, dialFake(f), st, mcp.WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a, b := sdk.NewInMemoryTransports()
	go p.Run(ctx, a)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	}).Connect(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: "test://static/a"}); err != nil {
		t.Fatal(err)
	}
	select {
	case uri := <-subscribed:
		if uri != "test://static/a" {
			t.Errorf("upstream got a subscription to %s", uri)
		}
	case <-time.After(deadline):
		t.Fatal("the subscription never reached the upstream")
	}
	// The upstream handles requests at once: its session may take the
	// subscription before the client's listen is open. Say it again until
	// the client hears.
	end := time.After(deadline)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for heard := false; !heard; {
		f.server.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: "test://static/a"})
		select {
		case uri := <-updated:
			if uri != "test://static/a" {
				t.Errorf("client told %s was updated", uri)
			}
			heard = true
		case <-tick.C:
		case <-end:
			t.Fatal("the update never reached the client")
		}
	}
}
