package tokens_test

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolcas/toolcas/tokens"
)

// golden is testdata/tiktoken/golden.json: what tiktoken's own WASM build
// (npm tiktoken, run by gen.mjs) gives for every input of inputs.json.
type golden struct {
	Tiktoken string `json:"tiktoken"`
	Inputs   []struct {
		Name   string            `json:"name"`
		Counts map[string]int    `json:"counts"`
		Tokens map[string][]uint `json:"tokens"`
	} `json:"inputs"`
}

func loadGolden(t testing.TB) (golden, []string) {
	t.Helper()
	var g golden
	b, err := os.ReadFile("testdata/tiktoken/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	var inputs []struct{ Name, Text string }
	if b, err = os.ReadFile("testdata/tiktoken/inputs.json"); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &inputs); err != nil {
		t.Fatal(err)
	}
	if len(inputs) != len(g.Inputs) || len(inputs) < 100 {
		t.Fatalf("%d inputs, %d golden rows: run gen.mjs again", len(inputs), len(g.Inputs))
	}
	texts := make([]string, len(inputs))
	for i, in := range inputs {
		if in.Name != g.Inputs[i].Name {
			t.Fatalf("input %d is %q, golden row %q: run gen.mjs again", i, in.Name, g.Inputs[i].Name)
		}
		texts[i] = in.Text
	}
	return g, texts
}

// TestExactMatchesTiktoken: on tiktoken's published test vectors, on
// probes of every kind of text and on a sample of real tool output, the
// counts (and, for the short inputs, the token ids) are tiktoken's own.
func TestExactMatchesTiktoken(t *testing.T) {
	g, texts := loadGolden(t)
	for _, enc := range tokens.Encodings() {
		e, err := tokens.NewExact(enc)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for i, row := range g.Inputs {
			want, ok := row.Counts[enc]
			if !ok {
				t.Fatalf("%s: no golden count for %q", enc, row.Name)
			}
			if got := e.CountText(texts[i]); got != want {
				t.Errorf("%s: CountText(%s) = %d, want %d", enc, row.Name, got, want)
			}
			if ids, ok := row.Tokens[enc]; ok {
				if got := e.Tokens(texts[i]); !slices.Equal(got, ids) && len(got)+len(ids) > 0 {
					t.Errorf("%s: Tokens(%s) = %v, want %v", enc, row.Name, got, ids)
				}
				checked++
			}
		}
		if checked < 50 {
			t.Errorf("%s: only %d inputs compared token by token", enc, checked)
		}
	}
}

// TestPublishedVectors pins a few of tiktoken's own published expectations
// here too, so that a golden file regenerated wrongly cannot hide a bug.
func TestPublishedVectors(t *testing.T) {
	cl, err := tokens.NewExact(tokens.Cl100kBase)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string][]uint{
		"hello world": {15339, 1917},
		"rer":         {38149},
		"'rer":        {2351, 81},
		"today\n ":    {31213, 198, 220},
		"today\n \n":  {31213, 27907},
		"today\n  \n": {31213, 14211},
		"\U0001F44D":  {9468, 239, 235},
		" \u00850":    {220, 126, 227, 15},
	} {
		if got := cl.Tokens(in); !slices.Equal(got, want) {
			t.Errorf("cl100k_base Tokens(%q) = %v, want %v", in, got, want)
		}
	}
	o, err := tokens.NewExact(tokens.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Tokens("hello world"); !slices.Equal(got, []uint{24912, 2375}) {
		t.Errorf("o200k_base Tokens(hello world) = %v, want [24912 2375]", got)
	}
}

func TestByName(t *testing.T) {
	for _, name := range []string{tokens.ApproximateName, tokens.O200kBase, tokens.Cl100kBase} {
		c, err := tokens.ByName(name)
		if err != nil || c.Name() != name {
			t.Errorf("ByName(%q) = %v, %v", name, c, err)
		}
	}
	for _, bad := range []string{"", "gpt2", "O200K_BASE", "o200k_base "} {
		if _, err := tokens.ByName(bad); !errors.Is(err, tokens.ErrUnknownEncoding) || !strings.Contains(err.Error(), "o200k_base") {
			t.Errorf("ByName(%q) = %v, want ErrUnknownEncoding naming the known ones", bad, err)
		}
	}
	if _, err := tokens.NewExact("p50k_base"); !errors.Is(err, tokens.ErrUnknownEncoding) {
		t.Errorf("NewExact(p50k_base) = %v, want ErrUnknownEncoding", err)
	}
}

// TestApproximate: Haystack's formula, int(code points / chars per token).
func TestApproximate(t *testing.T) {
	for _, tc := range []struct {
		a    tokens.Approximate
		in   string
		want int
	}{
		{tokens.Approximate{}, "", 0},
		{tokens.Approximate{}, "abc", 0},
		{tokens.Approximate{}, "abcd", 1},
		{tokens.Approximate{}, "abcdefg", 1},
		{tokens.Approximate{}, "日本語のテキスト", 2},
		{tokens.Approximate{CharsPerToken: 3.5}, "abcdefg", 2},
		{tokens.Approximate{CharsPerToken: 2.5}, "abcdefghij", 4},
		{tokens.Approximate{CharsPerToken: 0.5}, "ab", 4},
	} {
		if got := tc.a.CountText(tc.in); got != tc.want {
			t.Errorf("%+v.CountText(%q) = %d, want %d", tc.a, tc.in, got, tc.want)
		}
	}
}

// TestExactConcurrent: one counter, many goroutines, the same counts.
func TestExactConcurrent(t *testing.T) {
	_, texts := loadGolden(t)
	e, err := tokens.NewExact(tokens.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int, len(texts))
	for i, s := range texts {
		want[i] = e.CountText(s)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range texts {
				j := (i + g*37) % len(texts)
				if got := e.CountText(texts[j]); got != want[j] {
					t.Errorf("concurrent count of input %d = %d, want %d", j, got, want[j])
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkExact counts the sample of real tool output in the golden
// inputs: the rate, in bytes of text a second, is what SetBytes reports.
func BenchmarkExact(b *testing.B) {
	g, texts := loadGolden(b)
	var sample []string
	n := 0
	for i, row := range g.Inputs {
		if strings.HasPrefix(row.Name, "trace result") {
			sample = append(sample, texts[i])
			n += len(texts[i])
		}
	}
	for _, enc := range tokens.Encodings() {
		e, err := tokens.NewExact(enc)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(enc, func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				for _, s := range sample {
					e.CountText(s)
				}
			}
		})
	}
}

// TestCountUpTo: the count itself up to the limit, some count over it past
// the limit, for every golden input and limits around its count.
func TestCountUpTo(t *testing.T) {
	_, texts := loadGolden(t)
	e, err := tokens.NewExact(tokens.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range texts {
		n := e.CountText(s)
		for _, limit := range []int{0, n / 2, n - 1, n, n + 1, 10 * n} {
			if limit < 0 {
				continue
			}
			got := tokens.CountUpTo(e, s, limit)
			if n <= limit && got != n || n > limit && got <= limit {
				t.Errorf("input %d (%d tokens): CountUpTo(limit %d) = %d", i, n, limit, got)
			}
		}
	}
	if got := tokens.CountUpTo(tokens.Approximate{}, "abcdefgh", 1); got != 2 {
		t.Errorf("approximate CountUpTo = %d, want the count, 2", got)
	}
}
