package mcp

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressTap reads the event streams an HTTP upstream answers with, as
// the SDK reads them, and passes each progress notification on to its
// client the moment its bytes go by: before the bytes of the answer that
// follows it. (The SDK would hand it to its handler on a queue of its own,
// after the answer has gone to the caller; a client drops progress that
// comes after the answer.) The SDK still sees the notification, and the
// proxy skips it then (progressRoute.tapped).
type progressTap struct {
	base http.RoundTripper
	p    *Proxy
}

// tapClient returns c (or the default client) with its transport tapped.
func tapClient(c *http.Client, p *Proxy) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	t := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	t.Transport = progressTap{base: base, p: p}
	return &t
}

func (t progressTap) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && resp.Body != nil && bytes.HasPrefix([]byte(resp.Header.Get("Content-Type")), []byte("text/event-stream")) {
		resp.Body = &sseTap{rc: resp.Body, p: t.p, ctx: r.Context()}
	}
	return resp, err
}

// maxTapLine bounds the line an sseTap holds: a progress notification is
// short, and a longer data line is something else.
const maxTapLine = 4096

// sseTap scans server-sent events for progress notifications.
type sseTap struct {
	rc   io.ReadCloser
	p    *Proxy
	ctx  context.Context
	line []byte
	long bool // the line being read is over maxTapLine
	data []byte
	skip bool // the event being read cannot be a progress notification
}

func (s *sseTap) Read(b []byte) (int, error) {
	n, err := s.rc.Read(b)
	for chunk := b[:n]; len(chunk) > 0; {
		i := bytes.IndexByte(chunk, '\n')
		part := chunk
		if i >= 0 {
			part, chunk = chunk[:i], chunk[i+1:]
		} else {
			chunk = nil
		}
		if !s.long {
			if len(s.line)+len(part) > maxTapLine {
				s.long, s.line = true, s.line[:0]
			} else {
				s.line = append(s.line, part...)
			}
		}
		if i >= 0 {
			s.endLine()
		}
	}
	return n, err
}

func (s *sseTap) Close() error { return s.rc.Close() }

// endLine takes one line of the stream: a data line adds to the event, a
// blank line ends it.
func (s *sseTap) endLine() {
	line := bytes.TrimSuffix(s.line, []byte("\r"))
	long := s.long
	s.line, s.long = s.line[:0], false
	switch {
	case long:
		s.skip = true
	case len(line) == 0:
		if !s.skip && len(s.data) > 0 {
			s.tap(s.data)
		}
		s.data, s.skip = s.data[:0], false
	case bytes.HasPrefix(line, []byte("data:")):
		if len(s.data) > 0 {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, bytes.TrimPrefix(line[len("data:"):], []byte(" "))...)
		if len(s.data) > maxTapLine {
			s.skip = true
		}
	}
}

// tap passes on the event's message if it is a progress notification.
func (s *sseTap) tap(data []byte) {
	if !bytes.Contains(data, []byte(`"notifications/progress"`)) {
		return
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.IsCall() || req.Method != "notifications/progress" {
		return
	}
	var params sdk.ProgressNotificationParams
	if jsonUnmarshal(req.Params, &params) == nil {
		s.p.forwardProgress(s.ctx, &params, viaTap)
	}
}
