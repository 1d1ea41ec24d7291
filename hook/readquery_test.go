package hook_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolcas/toolcas/hook"
)

func TestReadToolQuery(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		a    hook.ReadArgs
		want string
	}{
		{"values", apiResult, hook.ReadArgs{Query: ".items[] | .id", Limit: 3},
			"[r/1_t_c.txt, query \".items[] | .id\": lines 1-3 of 250; more with offset=3]\n1\t0\n2\t1\n3\t2"},
		{"paged on", apiResult, hook.ReadArgs{Query: ".items[] | .id", Offset: 248},
			"[r/1_t_c.txt, query \".items[] | .id\": lines 249-250 of 250]\n249\t248\n250\t249"},
		{"one value", apiResult, hook.ReadArgs{Query: "{total, next, n: (.items | length)}"},
			"[r/1_t_c.txt, query \"{total, next, n: (.items | length)}\": lines 1-1 of 1]\n1\t{\"n\":250,\"next\":null,\"total\":250}"},
		{"objects compact", apiResult, hook.ReadArgs{Query: ".items[1]"},
			"[r/1_t_c.txt, query \".items[1]\": lines 1-1 of 1]\n1\t{\"active\":false,\"id\":1,\"name\":\"item 1\",\"price\":{\"amount\":1.5,\"currency\":\"EUR\"},\"tags\":[\"a\",\"b\"]}"},
		{"pattern filters the output", apiResult, hook.ReadArgs{Query: ".items[] | .name", Pattern: `^"item 1[0-2]"$`},
			"[r/1_t_c.txt, query \".items[] | .name\": matches 1-3 of 3 lines matching \"^\\\"item 1[0-2]\\\"$\", of 250 lines]\n11\t\"item 10\"\n12\t\"item 11\"\n13\t\"item 12\""},
		{"no result", apiResult, hook.ReadArgs{Query: ".items[] | select(.id > 1000)"},
			"[r/1_t_c.txt, query \".items[] | select(.id > 1000)\": empty]"},
		{"JSON lines", "{\"a\": 1}\n{\"a\": 2}\n\n{\"a\": [3]}\n", hook.ReadArgs{Query: ".a"},
			"[r/1_t_c.txt, query \".a\": lines 1-3 of 3]\n1\t1\n2\t2\n3\t[3]"},
		{"large integers exact", `{"id": 12345678901234567890123, "f": 0.1, "e": 1e400}`, hook.ReadArgs{Query: ".id, .f, .id + 1"},
			"[r/1_t_c.txt, query \".id, .f, .id + 1\": lines 1-3 of 3]\n1\t12345678901234567890123\n2\t0.1\n3\t12345678901234567890124"},
		{"halt ends the output", `[1, 2, 3]`, hook.ReadArgs{Query: ".[] | if . == 3 then halt else . end"},
			"[r/1_t_c.txt, query \".[] | if . == 3 then halt else . end\": lines 1-2 of 2]\n1\t1\n2\t2"},
		{"no environment", `{}`, hook.ReadArgs{Query: "env | length, ($ENV | length)"},
			"[r/1_t_c.txt, query \"env | length, ($ENV | length)\": lines 1-2 of 2]\n1\t0\n2\t0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, key := storeText(t, tc.text)
			tc.a.Ref = key
			if got := read(t, rt, "r", tc.a); got != tc.want {
				t.Errorf("Read(%+v) =\n%s\nwant\n%s", tc.a, got, tc.want)
			}
		})
	}
}

func TestReadToolQueryErrors(t *testing.T) {
	_, rt, refs := readSetup(t)
	for _, tc := range []struct {
		name string
		text string
		a    hook.ReadArgs
		is   error
		want string
	}{
		{"does not parse", apiResult, hook.ReadArgs{Query: ".items[ | .id"}, hook.ErrQuerySyntax, `query: parse error at byte 9 of ".items[ | .id": unexpected token "|"`},
		{"unfinished", apiResult, hook.ReadArgs{Query: ".items["}, hook.ErrQuerySyntax, "unexpected EOF"},
		{"unknown function", apiResult, hook.ReadArgs{Query: "frobnicate"}, nil, "function not defined: frobnicate/0"},
		{"no inputs", apiResult, hook.ReadArgs{Query: "input"}, nil, "input"},
		{"too long", apiResult, hook.ReadArgs{Query: strings.Repeat(".a|", hook.MaxQueryLen)}, nil, "more than 16384"},
		{"malformed JSON", `{"a": 1,, "b": 2}`, hook.ReadArgs{Query: "."}, hook.ErrNotJSON, "invalid character ',' looking for beginning of object key string at byte 8"},
		{"malformed later", "{\"a\": 1}\n{\"a\": x}\n", hook.ReadArgs{Query: ".a"}, hook.ErrNotJSON, "at byte 15"},
		{"cut short", `{"a": [1, 2`, hook.ReadArgs{Query: "."}, hook.ErrNotJSON, "the text ends inside a JSON value, at byte 11"},
		{"plain text", "FAIL: TestX\nok\n", hook.ReadArgs{Query: "."}, hook.ErrNotJSON, "invalid character"},
		{"empty", " \n", hook.ReadArgs{Query: "."}, hook.ErrNotJSON, "holds no JSON value"},
		{"runtime error", apiResult, hook.ReadArgs{Query: ".total | .x"}, hook.ErrQueryFailed, "expected an object but got: number (250)"},
		{"error()", apiResult, hook.ReadArgs{Query: `error("boom")`}, hook.ErrQueryFailed, "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, key := storeText(t, tc.text)
			tc.a.Ref = key
			_, err := rt.Read(context.Background(), "r", tc.a)
			if err == nil || !strings.Contains(err.Error(), tc.want) || tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Read(%+v) = %v, want an error saying %q (%v)", tc.a, err, tc.want, tc.is)
			}
		})
	}
	// A binary part, and a part of another run.
	_, err := rt.Read(context.Background(), "run-a", hook.ReadArgs{Ref: refs[1].Key, Query: "."})
	if !errors.Is(err, hook.ErrNotJSON) || !strings.Contains(err.Error(), "binary content (image/png)") {
		t.Errorf("query of an image = %v, want ErrNotJSON saying it is binary", err)
	}
	_, err = rt.Read(context.Background(), "run-b", hook.ReadArgs{Ref: refs[0].Key, Query: "."})
	if !errors.Is(err, hook.ErrNotFound) {
		t.Errorf("query of another run's part = %v, want ErrNotFound", err)
	}
	// Errors reach the model through Call as error results.
	r := rt.Call(context.Background(), "run-a", "c", []byte(`{"ref": "`+refs[0].Key+`", "query": ".["}`))
	if !r.Error || !strings.Contains(r.Parts[0].Text, "query: parse error") {
		t.Errorf("Call with a bad query = %+v", r)
	}
}

// TestReadToolQueryTimeLimit: a query that would run for ever, or build a
// value without end, stops at the time limit with a clear message; one
// whose output goes on for ever returns the page it filled.
func TestReadToolQueryTimeLimit(t *testing.T) {
	const limit = 200 * time.Millisecond
	rt, key := storeText(t, apiResult, hook.WithReadTimeout(limit))
	for _, q := range []string{"[range(1e9)] | length", "def f: f; f", "last(repeat(.))", "[limit(1e9; repeat(1))] | length"} {
		start := time.Now()
		_, err := rt.Read(context.Background(), "r", hook.ReadArgs{Ref: key, Query: q})
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "the query took longer than 200ms") {
			t.Errorf("query %q: %v, want it stopped at the time limit", q, err)
		}
		if took > 10*limit {
			t.Errorf("query %q returned after %v, limit %v", q, took, limit)
		}
	}
	start := time.Now()
	got := read(t, rt, "r", hook.ReadArgs{Ref: key, Query: "repeat(.total)", Limit: 3})
	head, body, _ := strings.Cut(got, "\n")
	if !strings.Contains(head, "the query stopped at its 200ms time limit") || body != "1\t250\n2\t250\n3\t250" || time.Since(start) > 10*limit {
		t.Errorf("endless output: %q after %v", clipText(got), time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rt.Read(ctx, "r", hook.ReadArgs{Ref: key, Query: "[range(1e9)]"}); !errors.Is(err, context.Canceled) {
		t.Errorf("query with a canceled context = %v, want context.Canceled", err)
	}
}

// TestReadToolQueryPagesOn: output larger than the byte budget comes a
// page at a time; paging on with the offset each page gives returns every
// result once, in order.
func TestReadToolQueryPagesOn(t *testing.T) {
	rt, key := storeText(t, apiResult, hook.WithReadMaxBytes(1024))
	var got []string
	for offset, pages := 0, 0; ; pages++ {
		if pages > 100 {
			t.Fatal("paging does not end")
		}
		page := read(t, rt, "r", hook.ReadArgs{Ref: key, Query: ".items[]", Offset: offset})
		if len(page) > 1024 {
			t.Fatalf("page of %d bytes, budget 1024", len(page))
		}
		head, body, _ := strings.Cut(page, "\n")
		for _, line := range strings.Split(body, "\n") {
			_, v, _ := strings.Cut(line, "\t")
			got = append(got, v)
		}
		i := strings.Index(head, "more with offset=")
		if i < 0 {
			break
		}
		offset, _ = strconv.Atoi(strings.TrimSuffix(head[i+len("more with offset="):], "]"))
	}
	if len(got) != 250 || !strings.HasPrefix(got[0], `{"active":true,"id":0,`) || !strings.HasPrefix(got[249], `{"active":false,"id":249,`) {
		t.Errorf("paged through %d results: %.80q … %.80q", len(got), got[0], got[len(got)-1])
	}
}

// sizedStore is a StreamStore holding one text part of any size, whose
// bytes no one may read.
type sizedStore struct {
	hook.MemStore
	size int64
}

func (s *sizedStore) OpenRead(ctx context.Context, run, ref string) (*hook.Content, io.ReadCloser, error) {
	return &hook.Content{Key: ref, Run: run, Kind: hook.KindText, Size: s.size}, io.NopCloser(failReader{}), nil
}

type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errors.New("the part was read") }

// TestReadToolQueryRefusesLargePart: a part larger than MaxQueryBytes is
// refused before any of it is read, with its size and other ways to read
// it; one within the limit is read.
func TestReadToolQueryRefusesLargePart(t *testing.T) {
	s := &sizedStore{size: hook.MaxQueryBytes + 1}
	rt, err := hook.NewReadTool(s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Read(context.Background(), "r", hook.ReadArgs{Ref: "r/1_t_c.txt", Query: "."})
	want := "r/1_t_c.txt is 67108865 bytes, more than the 67108864 bytes a query parses; read it by lines (offset, limit)"
	if !errors.Is(err, hook.ErrPartTooLarge) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "casctl get r/1_t_c.txt") {
		t.Errorf("query of a part too large = %v, want ErrPartTooLarge saying %q", err, want)
	}
	s.size = 10
	if _, err = rt.Read(context.Background(), "r", hook.ReadArgs{Ref: "r/1_t_c.txt", Query: "."}); err == nil || !strings.Contains(err.Error(), "the part was read") {
		t.Errorf("query of a part within the limit = %v, want it read", err)
	}
}

// FuzzReadQuery runs the read tool's query on arbitrary queries and
// texts: it never panics; a page is within the byte budget and valid
// UTF-8; an error names the part and says what was wrong.
func FuzzReadQuery(f *testing.F) {
	f.Add(".items[] | .id", apiResult[:300]+"]}", 0, "")
	f.Add(".a", `{"a": 1}`+"\n"+`{"a": 2}`, 1, "2")
	f.Add("[range(1e9)]", `[]`, 0, "")
	f.Add(".[", `{"a": 1,,}`, 0, "")
	f.Add(`.[] | tostring * 100`, `["ab", "é"]`, 0, "a")
	f.Add(`error("x")`, `null`, 0, "(")
	f.Add(`"\u00e9" | @base64d`, "\xff\xfe", 0, "")
	f.Fuzz(func(t *testing.T, query, text string, offset int, pattern string) {
		if query == "" || text == "" {
			return
		}
		rt, key := storeText(t, text, hook.WithReadTimeout(50*time.Millisecond), hook.WithReadMaxBytes(1024))
		r, err := rt.Read(context.Background(), "r", hook.ReadArgs{Ref: key, Query: query, Offset: int(uint(offset) % 1000), Pattern: pattern, Limit: 20})
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "read") || len(msg) < 20 {
				t.Fatalf("query %q: unclear error %q", query, msg)
			}
			return
		}
		got := r.Parts[0].Text
		if len(got) > 1024 || !utf8.ValidString(got) {
			t.Fatalf("query %q: page of %d bytes (budget 1024), UTF-8 %v: %q", query, len(got), utf8.ValidString(got), clipText(got))
		}
	})
}
