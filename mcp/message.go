package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// Limits on the messages the proxy relays.
const (
	// DefaultMaxMessage bounds one JSON-RPC message (a tool's result, say)
	// unless WithMaxMessage says otherwise.
	DefaultMaxMessage = 1 << 30
	// spillAt is the size past which a message goes to a temporary file as
	// it arrives instead of staying in memory: the proxy holds at most this
	// much of any one message.
	spillAt = 1 << 20
)

// A message is one JSON-RPC message as the proxy relays it: its bytes, in
// memory or, past spillAt, in a spool file, and what routing needs of it.
type message struct {
	env envelope
	// data is the whole message when it is held in memory.
	data []byte
	// pieces are the message's bytes in order when it is spooled.
	pieces []piece
	size   int64
	spool  *spool
	// related is the id of the client's request the message answers or was
	// sent for, when the transport knows (a request's own HTTP stream).
	related string
	// version is the MCP-Protocol-Version the client's HTTP request
	// carried, to pass upstream as it came.
	version string
	// handled, when set, closes once the proxy has handled the message
	// (passed it upstream, say).
	handled chan struct{}
	// ended marks no message but the news that the upstream ended the
	// stream of the request related names without answering it.
	ended bool
}

// envelope is what the proxy reads of every message.
type envelope struct {
	// ID is the request id as it came (a number or a string), nil for a
	// notification.
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	// Params and Result are set for a message held in memory.
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
	// valueAt and valueLen place the params or result of a spooled message
	// in its spool.
	valueAt, valueLen int64
}

// isRequest, isNotification and isResponse say what a message is.
func (e *envelope) isRequest() bool      { return e.Method != "" && len(e.ID) > 0 && string(e.ID) != "null" }
func (e *envelope) isNotification() bool { return e.Method != "" && !e.isRequest() }
func (e *envelope) isResponse() bool     { return e.Method == "" }

// idKey is a request id as a map key: its JSON, so that 1 and "1" differ.
func idKey(id json.RawMessage) string { return string(bytes.TrimSpace(id)) }

// piece is a run of a message's bytes: held, or a range of a spool.
type piece struct {
	data    []byte
	sp      *spool
	off, n  int64
	compact bool // copy the range with the white space between tokens dropped
}

func (p piece) len() int64 {
	if p.sp != nil {
		return p.n
	}
	return int64(len(p.data))
}

// memMessage returns a message held in memory.
func memMessage(data []byte) (*message, error) {
	m := &message{data: data, size: int64(len(data))}
	if err := json.Unmarshal(data, &m.env); err != nil {
		return nil, fmt.Errorf("not JSON-RPC: %w", err)
	}
	if m.env.Method == "" && len(m.env.Result) == 0 && len(m.env.Error) == 0 {
		return nil, errors.New("not JSON-RPC: neither a method nor a result nor an error")
	}
	return m, nil
}

// newMessage builds a message from a JSON value, marshalled.
func newMessage(v any) *message {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the package's own values are marshalled here
	}
	m, err := memMessage(data)
	if err != nil {
		panic(err)
	}
	return m
}

// spoolMessage returns the message whose bytes are in sp from off, n long,
// reading its envelope there.
func spoolMessage(sp *spool, off, n int64) (*message, error) {
	m := &message{spool: sp, pieces: []piece{{sp: sp, off: off, n: n}}, size: n}
	env, err := scanEnvelope(io.NewSectionReader(sp.f, off, n), off)
	if err != nil {
		return nil, err
	}
	m.env = env
	return m, nil
}

// scanEnvelope walks a message too large to hold for its envelope, taking
// note of where its params or result are.
func scanEnvelope(r io.Reader, off int64) (envelope, error) {
	var env envelope
	s := newScanner(r, off)
	err := s.object(func(k string) error {
		switch k {
		case "id":
			raw, over, err := s.capture(1 << 10)
			if over {
				return errors.New("not JSON-RPC: an id over 1 KiB")
			}
			env.ID = raw
			return err
		case "method":
			raw, over, err := s.capture(4 << 10)
			if err == nil && (over || json.Unmarshal(raw, &env.Method) != nil) {
				return errors.New("not JSON-RPC: a method that is not a short string")
			}
			return err
		case "error":
			raw, over, err := s.capture(64 << 10)
			if over {
				raw = json.RawMessage(`{"code":-32603,"message":"an error over 64 KiB"}`)
			}
			env.Error = raw
			return err
		case "params", "result":
			c, err := s.peek()
			if err != nil {
				return s.eof(err)
			}
			if c != '{' && c != '[' {
				return s.syntax("%s is not an object", k)
			}
			env.valueAt = s.off
			err = s.copyValue(io.Discard)
			env.valueLen = s.off - env.valueAt
			if k == "result" && err == nil {
				env.Result = json.RawMessage("{}") // present; read from the spool
			}
			return err
		}
		return s.copyValue(io.Discard)
	})
	if err != nil {
		return env, fmt.Errorf("not JSON-RPC: %w", err)
	}
	if _, err := s.peek(); err != io.EOF {
		return env, errors.New("not JSON-RPC: bytes after the message")
	}
	return env, nil
}

// writeTo writes the message's bytes to w; with compact, dropping the white
// space between tokens (a message framed by line breaks may hold none).
func (m *message) writeTo(w io.Writer, compact bool) error {
	if m.pieces == nil {
		data := m.data
		if compact && bytes.ContainsAny(data, "\r\n") {
			var b bytes.Buffer
			if err := json.Compact(&b, data); err != nil {
				return err
			}
			data = b.Bytes()
		}
		_, err := w.Write(data)
		return err
	}
	for _, p := range m.pieces {
		if p.sp == nil {
			if _, err := w.Write(p.data); err != nil {
				return err
			}
			continue
		}
		r := io.NewSectionReader(p.sp.f, p.off, p.n)
		if compact || p.compact {
			if err := newScanner(r, p.off).copyValue(w); err != nil {
				return err
			}
			continue
		}
		if _, err := io.Copy(w, r); err != nil {
			return err
		}
	}
	return nil
}

// bytes returns the message's bytes, read from its spool if need be: for
// messages known to be small.
func (m *message) bytes() ([]byte, error) {
	if m.pieces == nil {
		return m.data, nil
	}
	var b bytes.Buffer
	err := m.writeTo(&b, false)
	return b.Bytes(), err
}

// release lets go of the message's spool, once.
func (m *message) release() {
	if m.spool != nil {
		m.spool.release()
		m.spool = nil
	}
}

// spool is a temporary file holding messages too large to hold in memory,
// removed when the last message using it is released.
type spool struct {
	f    *os.File
	refs atomic.Int32
	// remove is set where the file could not be removed while open: it is
	// removed once closed.
	remove bool
}

// newSpool creates a spool in dir ("" for the system's temporary directory).
func newSpool(dir string) (*spool, error) {
	f, err := os.CreateTemp(dir, "toolcas-mcp-*.json")
	if err != nil {
		return nil, fmt.Errorf("spool a large message: %w", err)
	}
	// Removed at once where the system allows: the open file stays readable
	// and goes away with the last handle, even if the proxy is killed.
	sp := &spool{f: f, remove: os.Remove(f.Name()) != nil}
	sp.refs.Store(1)
	return sp, nil
}

func (sp *spool) retain() { sp.refs.Add(1) }

func (sp *spool) release() {
	if sp.refs.Add(-1) == 0 {
		sp.f.Close()
		if sp.remove {
			os.Remove(sp.f.Name())
		}
	}
}

// lineReader reads newline-delimited messages, as MCP's stdio transport
// frames them: a line up to spillAt long is held in memory, a longer one
// goes to a spool as it arrives, and one over max is read to its end and
// refused with an error naming the limit (the stream stays usable).
type lineReader struct {
	br       *bufio.Reader
	max      int64
	spoolDir string
	// head keeps the first bytes of the last line, to quote what is not
	// JSON-RPC.
	head []byte
	edge *edgeReader
}

func newLineReader(r io.Reader, max int64, spoolDir string) *lineReader {
	e := &edgeReader{r: r}
	return &lineReader{br: bufio.NewReaderSize(e, 64<<10), max: max, spoolDir: spoolDir, edge: e}
}

// midLine reports that the stream stopped in the middle of a line: what it
// gave last does not end with a line break.
func (lr *lineReader) midLine() bool { return lr.edge.mid.Load() }

// edgeReader notes whether the last byte read ended a line.
type edgeReader struct {
	r   io.Reader
	mid atomic.Bool
}

func (e *edgeReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if n > 0 {
		e.mid.Store(p[n-1] != '\n')
	}
	return n, err
}

// grow appends chunk to buf, doubling its room as it must: a message of n
// bytes costs at most 2n of allocations, where append's gentler growth
// past a few hundred KiB would cost several times n.
func grow(buf, chunk []byte) []byte {
	if len(buf)+len(chunk) > cap(buf) {
		nb := make([]byte, len(buf), max(2*cap(buf), len(buf)+len(chunk), 4<<10))
		copy(nb, buf)
		buf = nb
	}
	return append(buf, chunk...)
}

// errTooLarge is wrapped by the error of a message over the limit; the
// error says the message's id when it could be read.
type tooLargeError struct {
	size, max int64
	id        json.RawMessage
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("a message of more than %d bytes, over the limit of %d", e.size, e.max)
}

// next returns the next message. A line that is not JSON-RPC is an error
// that quotes it; io.EOF ends the stream.
func (lr *lineReader) next() (*message, error) {
	for {
		m, err := lr.line()
		if m != nil || err != nil {
			return m, err
		}
	}
}

// line reads one line; a blank one gives no message and no error.
func (lr *lineReader) line() (*message, error) {
	var buf []byte
	var sp *spool
	var n int64
	var spoolAt int64
	for {
		chunk, err := lr.br.ReadSlice('\n')
		end := err == nil
		if end {
			chunk = chunk[:len(chunk)-1]
		}
		if n == 0 && len(chunk) > 0 {
			lr.head = append(lr.head[:0], chunk[:min(len(chunk), headMax)]...)
		}
		n += int64(len(chunk))
		switch {
		case n > lr.max:
			// Too large: read on to the line's end, then say so.
			if sp != nil {
				sp.release()
				sp = nil
			}
			buf = nil
		case sp != nil:
			if _, werr := sp.f.Write(chunk); werr != nil {
				sp.release()
				return nil, fmt.Errorf("spool a large message: %w", werr)
			}
		case len(buf)+len(chunk) <= spillAt:
			buf = grow(buf, chunk)
		default:
			// Past spillAt: what came so far, and all that follows, to a
			// spool.
			s, serr := newSpool(lr.spoolDir)
			if serr != nil {
				return nil, serr
			}
			sp, spoolAt = s, 0
			_, werr := sp.f.Write(buf)
			if werr == nil {
				_, werr = sp.f.Write(chunk)
			}
			if werr != nil {
				sp.release()
				return nil, fmt.Errorf("spool a large message: %w", werr)
			}
			buf = nil
		}
		if end || err == io.EOF && n > 0 {
			break
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if sp != nil {
			sp.release()
		}
		return nil, err
	}
	if n > lr.max {
		return nil, &tooLargeError{size: n, max: lr.max, id: idOfHead(lr.head)}
	}
	if sp != nil {
		m, err := spoolMessage(sp, spoolAt, n)
		if err != nil {
			sp.release()
			return nil, &notJSONRPCError{head: string(lr.head), err: err}
		}
		return m, nil
	}
	buf = bytes.TrimSuffix(buf, []byte("\r"))
	if len(bytes.TrimSpace(buf)) == 0 {
		return nil, nil
	}
	m, err := memMessage(buf)
	if err != nil {
		return nil, &notJSONRPCError{head: string(lr.head), err: err}
	}
	return m, nil
}

// notJSONRPCError is a line that is not a JSON-RPC message.
type notJSONRPCError struct {
	head string
	err  error
}

func (e *notJSONRPCError) Error() string {
	return fmt.Sprintf("sent something that is not JSON-RPC: %q", e.head)
}

func (e *notJSONRPCError) Unwrap() error { return e.err }

// headMax is how much of a line an error quotes.
const headMax = 200

// idOfHead returns the id of a message from its first bytes, when it comes
// first (as most writers put it), for an error answering it.
func idOfHead(head []byte) json.RawMessage {
	s := newScanner(bytes.NewReader(head), 0)
	var id json.RawMessage
	s.object(func(k string) error {
		if k == "id" {
			raw, over, err := s.capture(1 << 10)
			if err == nil && !over {
				id = raw
			}
			return errFound
		}
		return s.copyValue(io.Discard)
	})
	return id
}

var errFound = errors.New("found")

// lineWriter writes messages one a line, one at a time.
type lineWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
	c  io.Closer
}

func newLineWriter(w io.Writer) *lineWriter {
	lw := &lineWriter{w: bufio.NewWriterSize(w, 64<<10)}
	if c, ok := w.(io.Closer); ok {
		lw.c = c
	}
	return lw
}

func (lw *lineWriter) write(m *message) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if err := m.writeTo(lw.w, true); err != nil {
		return err
	}
	lw.w.WriteByte('\n')
	return lw.w.Flush()
}

func (lw *lineWriter) close() error {
	if lw.c != nil {
		return lw.c.Close()
	}
	return nil
}
