package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// accum gathers one message's bytes as they arrive in pieces (an HTTP body,
// the data lines of a server-sent event): in memory up to spillAt, then in
// a spool; past max it keeps counting and nothing more.
type accum struct {
	max  int64
	dir  string
	buf  []byte
	sp   *spool
	at   int64 // where the message starts in sp
	n    int64
	head []byte
	err  error
}

func (a *accum) Write(p []byte) (int, error) {
	if len(a.head) < headMax {
		a.head = append(a.head, p[:min(len(p), headMax-len(a.head))]...)
	}
	a.n += int64(len(p))
	switch {
	case a.err != nil:
	case a.n > a.max:
		a.drop()
	case a.sp != nil:
		if _, err := a.sp.f.Write(p); err != nil {
			a.err = fmt.Errorf("spool a large message: %w", err)
		}
	case int64(len(a.buf)+len(p)) <= spillAt:
		a.buf = grow(a.buf, p)
	default:
		sp, err := newSpool(a.dir)
		if err != nil {
			a.err = err
			break
		}
		a.sp, a.at = sp, 0
		_, err = sp.f.Write(a.buf)
		if err == nil {
			_, err = sp.f.Write(p)
		}
		if err != nil {
			a.err = fmt.Errorf("spool a large message: %w", err)
		}
		a.buf = nil
	}
	return len(p), nil
}

// drop lets go of what was gathered.
func (a *accum) drop() {
	if a.sp != nil {
		a.sp.release()
		a.sp = nil
	}
	a.buf = nil
}

// messages returns what was gathered: one message, or each message of a
// batch (a JSON array). Their spool, if any, is theirs to release.
func (a *accum) messages() ([]*message, error) {
	defer func() { a.sp = nil }()
	if a.err != nil {
		a.drop()
		return nil, a.err
	}
	if a.n > a.max {
		a.drop()
		return nil, &tooLargeError{size: a.n, max: a.max, id: idOfHead(a.head)}
	}
	if a.sp == nil {
		data := bytes.TrimSpace(a.buf)
		if len(data) > 0 && data[0] == '[' {
			var raws []json.RawMessage
			if err := json.Unmarshal(data, &raws); err != nil {
				return nil, &notJSONRPCError{head: string(a.head), err: err}
			}
			ms := make([]*message, 0, len(raws))
			for _, raw := range raws {
				m, err := memMessage(raw)
				if err != nil {
					return nil, &notJSONRPCError{head: string(a.head), err: err}
				}
				ms = append(ms, m)
			}
			return ms, nil
		}
		m, err := memMessage(data)
		if err != nil {
			return nil, &notJSONRPCError{head: string(a.head), err: err}
		}
		return []*message{m}, nil
	}
	sp := a.sp
	s := newScanner(io.NewSectionReader(sp.f, a.at, a.n), a.at)
	c, err := s.peek()
	if err != nil {
		sp.release()
		return nil, &notJSONRPCError{head: string(a.head), err: err}
	}
	if c != '[' {
		m, err := spoolMessage(sp, a.at, a.n)
		if err != nil {
			sp.release()
			return nil, &notJSONRPCError{head: string(a.head), err: err}
		}
		return []*message{m}, nil
	}
	var ms []*message
	err = s.array(func(int) error {
		if _, err := s.peek(); err != nil {
			return s.eof(err)
		}
		at := s.off
		if err := s.copyValue(io.Discard); err != nil {
			return err
		}
		m, err := spoolMessage(sp, at, s.off-at)
		if err != nil {
			return err
		}
		sp.retain()
		ms = append(ms, m)
		return nil
	})
	sp.release()
	if err != nil {
		for _, m := range ms {
			m.release()
		}
		return nil, &notJSONRPCError{head: string(a.head), err: err}
	}
	if len(ms) == 0 {
		return nil, &notJSONRPCError{head: string(a.head), err: errors.New("an empty batch")}
	}
	return ms, nil
}
