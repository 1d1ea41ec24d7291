package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strings"

	"github.com/itchyny/gojq"

	"github.com/toolcas/toolcas/cas"
)

// Bounds of the read tool's query.
const (
	// MaxQueryBytes is the largest part a query reads: the part is parsed
	// whole, and parsed JSON takes several times its size in memory. A
	// larger part is refused, with how to read it otherwise.
	MaxQueryBytes = 64 << 20
	// MaxQueryLen is the longest query the tool compiles.
	MaxQueryLen = 16 << 10
)

var (
	// ErrQuerySyntax is wrapped by CompileQuery, and so by ReadTool.Read,
	// for a query that does not parse.
	ErrQuerySyntax = errors.New("query: parse error")
	// ErrNotJSON is wrapped by ReadTool.Read when a query is given for a
	// part that is not JSON text: binary content, or text that does not
	// parse as JSON.
	ErrNotJSON = errors.New("not JSON")
	// ErrQueryFailed is wrapped by ReadTool.Read for a query that stops
	// with an error as it runs (error("..."), .a on an array, …).
	ErrQueryFailed = errors.New("query failed")
	// ErrPartTooLarge is wrapped by ReadTool.Read for a query of a part
	// larger than MaxQueryBytes.
	ErrPartTooLarge = errors.New("part too large for a query")
)

// CompileQuery compiles a jq query (gojq's dialect of jq) for the read
// tool. The query sees the part and nothing else: no environment
// variables, no modules, no input or inputs.
func CompileQuery(query string) (*gojq.Code, error) {
	if len(query) > MaxQueryLen {
		return nil, fmt.Errorf("query of %d bytes, more than %d", len(query), MaxQueryLen)
	}
	parsed, err := gojq.Parse(query)
	if err != nil {
		var pe *gojq.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%w at byte %d of %q: %v", ErrQuerySyntax, pe.Offset, clip(query), err)
		}
		return nil, fmt.Errorf("%w in %q: %v", ErrQuerySyntax, clip(query), err)
	}
	code, err := gojq.Compile(parsed, gojq.WithEnvironLoader(func() []string { return nil }))
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", clip(query), err)
	}
	return code, nil
}

// readQueryInput reads a part a query runs on, of size bytes, refusing
// one larger than MaxQueryBytes before reading any of it.
func readQueryInput(ctx context.Context, key string, r io.Reader, size int64) ([]byte, error) {
	if size > MaxQueryBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, more than the %d bytes a query parses; "+
			"read it by lines (offset, limit), find lines with pattern, or get it whole with: casctl get %s --output FILE",
			ErrPartTooLarge, key, size, MaxQueryBytes, key)
	}
	var b bytes.Buffer
	b.Grow(int(size))
	// One byte more than allowed shows a part that outgrew its size.
	n, err := cas.CopyContext(ctx, &b, io.LimitReader(r, MaxQueryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if n > MaxQueryBytes {
		return nil, fmt.Errorf("%w: %s holds more than %d bytes", ErrPartTooLarge, key, MaxQueryBytes)
	}
	// Read on to the end, where a store's reader checks the digest.
	if _, err := cas.CopyContext(ctx, io.Discard, r); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return b.Bytes(), nil
}

// queryOutput runs a query on each JSON value of a text in turn, as jq
// does on a stream of values, and reads out each result as one line of
// compact JSON. It decodes the next value, and runs the query on it, only
// when the reader wants more, so that a page costs what it shows.
type queryOutput struct {
	ctx    context.Context
	code   *gojq.Code
	dec    *json.Decoder
	iter   gojq.Iter // over the results for the current value; nil between values
	values int       // values decoded
	size   int       // of the text
	buf    []byte
	err    error
}

func newQueryOutput(ctx context.Context, code *gojq.Code, data []byte) *queryOutput {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return &queryOutput{ctx: ctx, code: code, dec: dec, size: len(data)}
}

// Read returns the next bytes of the results, one per line; the error that
// stopped the query (its context's, when it ran out of time); or io.EOF.
func (q *queryOutput) Read(p []byte) (int, error) {
	for len(q.buf) == 0 {
		if q.err != nil {
			return 0, q.err
		}
		q.err = q.next()
	}
	n := copy(p, q.buf)
	q.buf = q.buf[n:]
	return n, nil
}

// next puts the next result in buf, or returns why there is none.
func (q *queryOutput) next() error {
	for {
		if err := q.ctx.Err(); err != nil {
			return err
		}
		if q.iter == nil {
			var v any
			err := q.dec.Decode(&v)
			if err == io.EOF {
				if q.values == 0 {
					return fmt.Errorf("%w: the part holds no JSON value", ErrNotJSON)
				}
				return io.EOF
			}
			if err != nil {
				return q.syntax(err)
			}
			q.values++
			q.iter = q.code.RunWithContext(q.ctx, normalizeNumbers(v))
		}
		v, ok := q.iter.Next()
		if !ok {
			q.iter = nil
			continue
		}
		if err, ok := v.(error); ok {
			var halt *gojq.HaltError
			switch {
			case errors.As(err, &halt) && halt.Value() == nil:
				return io.EOF
			case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
				return err
			}
			return fmt.Errorf("%w on JSON value %d: %v", ErrQueryFailed, q.values, err)
		}
		b, err := gojq.Marshal(v)
		if err != nil {
			return fmt.Errorf("%w: a result cannot be written as JSON: %v", ErrQueryFailed, err)
		}
		q.buf = append(b, '\n')
		return nil
	}
}

// syntax is the error of text that does not parse as JSON, saying where.
func (q *queryOutput) syntax(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// Offset counts the bytes read up to and with the one at fault.
		return fmt.Errorf("%w: %v at byte %d", ErrNotJSON, err, max(se.Offset-1, 0))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the text ends inside a JSON value, at byte %d", ErrNotJSON, q.size)
	}
	return fmt.Errorf("%w: %v at byte %d", ErrNotJSON, err, q.dec.InputOffset())
}

// normalizeNumbers turns the json.Numbers of a decoded value into what
// gojq computes with: an int, a *big.Int for a larger integer (which jq
// would round), a float64 for the rest.
func normalizeNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		s := v.String()
		if !strings.ContainsAny(s, ".eE") {
			if i, err := v.Int64(); err == nil && i >= math.MinInt && i <= math.MaxInt {
				return int(i)
			}
			if b, ok := new(big.Int).SetString(s, 10); ok {
				return b
			}
		}
		f, _ := v.Float64()
		return f
	case []any:
		for i, e := range v {
			v[i] = normalizeNumbers(e)
		}
	case map[string]any:
		for k, e := range v {
			v[k] = normalizeNumbers(e)
		}
	}
	return v
}
