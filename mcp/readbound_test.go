package mcp_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/mcp"
	"github.com/toolcas/toolcas/store"
)

// TestServeReadsInBoundedMemory: the server's read-back tool, over every
// run, streams a 32 MiB single-line part: the answer stays within the
// tool's byte budget, and the call allocates a small part of the blob's
// size rather than all of it.
func TestServeReadsInBoundedMemory(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	const size = 32 << 20
	res, err := st.Put(ctx, store.StreamPart{Key: hook.Key{Run: "big", Step: 1, Tool: "t", CallID: "c", Part: -1}},
		strings.NewReader(strings.Repeat("a", size)))
	if err != nil {
		t.Fatal(err)
	}
	cs := serveClient(t, st)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: mcp.ReadToolName, Arguments: map[string]any{"ref": res.Key, "limit": 1}})
	runtime.ReadMemStats(&after)
	if err != nil || out.IsError {
		t.Fatalf("read: %v %+v", err, out)
	}
	text := out.Content[0].(*sdk.TextContent).Text
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("read of a %d MiB line: %d bytes back, %d KiB allocated", size>>20, len(text), alloc>>10)
	if len(text) > hook.DefaultReadBytes {
		t.Errorf("%d bytes back, over the %d-byte budget", len(text), hook.DefaultReadBytes)
	}
	if alloc > size/4 {
		t.Errorf("the read allocated %d bytes for a %d-byte blob: it is not streamed", alloc, size)
	}
}
