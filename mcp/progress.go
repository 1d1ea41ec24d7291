package mcp

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressRoute is where an upstream's progress notification goes: the
// client session that asked, under its own token.
type progressRoute struct {
	ss    *sdk.ServerSession
	token any
	// done gets a value when a notification reports the work complete
	// (progress equal to its total).
	done chan struct{}
	// partial is set while the last notification passed on reported the
	// work incomplete.
	partial *atomic.Bool
	// tapped counts the notifications an HTTP tap passed on; the SDK's
	// handler, which sees the same ones in the same order later, skips as
	// many.
	tapped, handled *atomic.Int64
}

// How a progress notification reached forwardProgress.
const (
	viaHandler = iota // the SDK's notification handler
	viaTap            // an HTTP tap, ahead of the SDK (progressTap)
	viaConn           // an ordered connection, instead of the SDK (orderedConn)
)

// settle waits, briefly, for the last progress notification of a call
// whose answer has come. The SDK hands notifications to their handler on
// a queue of their own while the answer goes straight to the caller, so
// the upstream's last notification, sent just before its answer, may still
// be on its way; a client drops a notification that comes after the
// answer.
func (r progressRoute) settle() {
	if !r.partial.Load() {
		return
	}
	t := time.NewTimer(250 * time.Millisecond)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
	}
}

// onProgress passes an upstream progress notification to the client
// session that asked for it, under the client's own token. It serves the
// notifications an ordered connection (see orderedConn) did not already
// pass on.
func (p *Proxy) onProgress(ctx context.Context, r *sdk.ProgressNotificationClientRequest) {
	p.forwardProgress(ctx, r.Params, viaHandler)
}

// forwardProgress passes one progress notification on; it reports false
// when no call of the proxy's is waiting for it.
func (p *Proxy) forwardProgress(ctx context.Context, in *sdk.ProgressNotificationParams, via int) bool {
	p.mu.Lock()
	route, ok := p.progress[fmt.Sprint(in.ProgressToken)]
	p.mu.Unlock()
	if !ok {
		return false
	}
	switch via {
	case viaTap:
		route.tapped.Add(1)
	case viaHandler:
		if route.handled.Add(1) <= route.tapped.Load() {
			return true // the tap passed it on
		}
	}
	params := *in
	params.ProgressToken = route.token
	params.Meta = forwardMeta(params.Meta)
	if err := route.ss.NotifyProgress(ctx, &params); err != nil {
		p.log.Debug("toolcas: progress: " + err.Error())
	}
	complete := params.Total > 0 && params.Progress >= params.Total
	route.partial.Store(params.Total > 0 && !complete)
	if complete {
		select {
		case route.done <- struct{}{}:
		default:
		}
	}
	return true
}
