package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A downstream is the client's side of a session.
type downstream interface {
	// recv returns the next message from the client; io.EOF once it left.
	recv(ctx context.Context) (*message, error)
	// send sends a message to the client. m.related names the request it
	// belongs with, where the transport can tell (an HTTP request's stream).
	send(ctx context.Context, m *message) error
	// unanswered says that the upstream ended the stream of the client's
	// request id without an answer: the client's stream ends too.
	unanswered(id string)
	close()
}

// An upstreamConn is one connection to the upstream.
type upstreamConn interface {
	// recv returns the next message from the upstream: a message with
	// ended set says that the stream of a request ended without its answer.
	// Its error, once the connection is gone, says how it ended.
	recv(ctx context.Context) (*message, error)
	send(ctx context.Context, m *message) error
	// stop ends the connection and, for a process, the process; it returns
	// once the process is gone.
	stop()
	// pid is the process id of the upstream when the proxy runs it, else 0.
	pid() int
	// halfRead reports that the upstream sent part of a message and no
	// more of it yet.
	halfRead() bool
}

// lineConn is a connection framed by line breaks (MCP's stdio transport)
// over a reader and a writer.
type lineConn struct {
	r *lineReader
	w *lineWriter
}

func (c *lineConn) recv(context.Context) (*message, error) { return c.r.next() }

func (c *lineConn) send(_ context.Context, m *message) error { return c.w.write(m) }

func (c *lineConn) halfRead() bool { return c.r.midLine() }

// stdioDown is a client on the proxy's stdio, or on any reader and writer.
type stdioDown struct{ lineConn }

func (d *stdioDown) unanswered(string) {}
func (d *stdioDown) close()            { d.w.close() }

// sdkConn is a connection through one of the SDK's transports: for tests
// with its in-memory transports, and any transport a Dial gives.
type sdkConn struct {
	c    sdk.Connection
	once sync.Once
}

func connectSDK(ctx context.Context, t sdk.Transport) (*sdkConn, error) {
	c, err := t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &sdkConn{c: c}, nil
}

func (c *sdkConn) recv(ctx context.Context) (*message, error) {
	msg, err := c.c.Read(ctx)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, sdk.ErrConnectionClosed) {
			return nil, io.EOF
		}
		return nil, err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return nil, err
	}
	return memMessage(data)
}

func (c *sdkConn) send(ctx context.Context, m *message) error {
	data, err := m.bytes()
	if err != nil {
		return err
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return fmt.Errorf("not JSON-RPC: %w", err)
	}
	return c.c.Write(ctx, msg)
}

func (c *sdkConn) unanswered(string) {}
func (c *sdkConn) close()            { c.once.Do(func() { c.c.Close() }) }
func (c *sdkConn) stop()             { c.close() }
func (c *sdkConn) pid() int          { return 0 }
func (c *sdkConn) halfRead() bool    { return false }

// childConn is an upstream running as a child process over its stdio.
type childConn struct {
	lineConn
	ch *child
}

func (c *childConn) recv(ctx context.Context) (*message, error) {
	m, err := c.lineConn.recv(ctx)
	if err == nil {
		return m, nil
	}
	var bad *notJSONRPCError
	if errors.As(err, &bad) {
		return nil, errors.New(bad.Error() + c.ch.stderrNote())
	}
	var big *tooLargeError
	if errors.As(err, &big) {
		return nil, err
	}
	// The child closed its stdout: it exited, or is about to; give its
	// exit status the chance to be the reason.
	c.ch.wait(childExitWait)
	return nil, errors.New(c.ch.describe())
}

func (c *childConn) stop()    { c.ch.stop() }
func (c *childConn) pid() int { return c.ch.Pid() }
