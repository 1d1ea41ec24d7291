package search

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
)

// bruteLines is the oracle: each line of text that re matches.
func bruteLines(re *regexp.Regexp, text []byte) []string {
	var out []string
	for i, line := range bytes.Split(text, []byte{'\n'}) {
		if i == bytes.Count(text, []byte{'\n'}) && len(line) == 0 {
			break
		}
		if re.Match(line) {
			out = append(out, fmt.Sprintf("%d:%s", i+1, line))
		}
	}
	return out
}

func oracleRegexp(p Pattern) (*regexp.Regexp, error) {
	expr := p.Expr
	if p.Fixed {
		expr = regexp.QuoteMeta(expr)
	}
	if p.IgnoreCase {
		expr = "(?i)" + expr
	}
	return regexp.Compile(expr)
}

// check compares the matcher with the oracle on text, and checks that the
// text's trigrams satisfy the matcher's query whenever a line matches.
func check(t *testing.T, p Pattern, text []byte) {
	t.Helper()
	m, err := Compile(p)
	if err != nil {
		return
	}
	re, err := oracleRegexp(p)
	if err != nil {
		t.Fatalf("Compile(%+v) took a pattern the oracle refuses: %v", p, err)
	}
	want := bruteLines(re, text)
	var got []string
	var fold []byte
	m.Lines(text, 1, &fold, func(n int64, line []byte, col int) bool {
		got = append(got, fmt.Sprintf("%d:%s", n, line))
		if col < 0 || col > len(line) {
			t.Errorf("%+v: col %d outside line %q", p, col, line)
		}
		return true
	})
	if !slices.Equal(got, want) {
		t.Fatalf("%+v over %q: Lines = %q, want %q", p, text, got, want)
	}
	var scanned []string
	if err := m.Scan(bytes.NewReader(text), func(n int64, line []byte, col int) bool {
		scanned = append(scanned, fmt.Sprintf("%d:%s", n, line))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(scanned, want) {
		t.Fatalf("%+v over %q: Scan = %q, want %q", p, text, scanned, want)
	}
	if len(want) > 0 {
		e := NewExtractor()
		e.Add(text)
		if !m.Query().Eval(e.Has) {
			t.Fatalf("%+v: text %q matches but its trigrams fail the query %v", p, text, m.Query())
		}
		// The same through a one-blob segment's postings.
		b := NewBuilder()
		b.Add(e.Trigrams())
		lists := map[Trigram]Set{}
		b.Postings(func(tg Trigram, enc []byte) error {
			s, err := DecodePosting(enc, 1)
			if err != nil {
				t.Fatal(err)
			}
			lists[tg] = s
			return nil
		})
		if got := m.Query().EvalSet(1, func(tg Trigram) Set { return lists[tg] }); !got.Has(0) {
			t.Fatalf("%+v: the segment's postings rule out a matching text", p)
		}
	}
}

func TestMatcherAgainstOracle(t *testing.T) {
	texts := []string{
		"Traceback (most recent call last):\n  File \"x.py\", line 3\nValueError: invalid literal\n",
		"no newline at end",
		"KELVIN \u212a and long \u017ft and Straße\nkelvin\nSTRASSE\n",
		"a\n\nb\r\nabc\r\n",
		"",
		"\n\n\n",
		"héllo HÉLLO wörld\nÉcole école\n",
		strings.Repeat("x", 100) + "needle" + strings.Repeat("y", 100),
	}
	patterns := []Pattern{
		{Expr: "ValueError"}, {Expr: "valueerror", IgnoreCase: true}, {Expr: "line [0-9]+"},
		{Expr: "^  File"}, {Expr: `\.py"`}, {Expr: "(Trace|Value)[a-z]+"}, {Expr: "x.py", Fixed: true},
		{Expr: "kelvin", IgnoreCase: true}, {Expr: "LONG", IgnoreCase: true}, {Expr: "strasse", IgnoreCase: true},
		{Expr: "ß", IgnoreCase: true}, {Expr: "école", IgnoreCase: true}, {Expr: "école", Fixed: true, IgnoreCase: true},
		{Expr: "abc$"}, {Expr: `abc\r$`}, {Expr: "^$"}, {Expr: "a|b"}, {Expr: "needle"}, {Expr: "y+$"},
		{Expr: "(?i)hé"}, {Expr: "[Kk]elvin"}, {Expr: "(ab)?c"}, {Expr: "no.newline"}, {Expr: ".*"},
		{Expr: "[^a]bc"}, {Expr: `\bend\b`}, {Expr: "x{3,}needle"}, {Expr: "needle|zzz(abc|def)"},
	}
	for _, p := range patterns {
		for _, text := range texts {
			check(t, p, []byte(text))
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, p := range []Pattern{{Expr: ""}, {Expr: "("}, {Expr: "a\nb"}, {Expr: strings.Repeat("a", MaxPattern+1)},
		{Expr: "\xff"}, {Expr: "x{2000}"}} {
		if _, err := Compile(p); err == nil {
			t.Errorf("Compile(%.40q) = nil error, want one", p.Expr)
		}
	}
}

func TestQueryShapes(t *testing.T) {
	for _, c := range []struct {
		expr string
		fold bool
		want string
	}{
		{"abcd", false, `("abc" "bcd")`},
		{"ABCD", false, `("ABC" "BCD")`},
		{"ab1", true, `("AB1" | "Ab1" | "aB1" | "ab1")`},
		{"(?i)ab1|xyz", false, `("AB1" | "Ab1" | "XYZ" | "XYz" | "XyZ" | "Xyz" | "aB1" | "ab1" | "xYZ" | "xYz" | "xyZ" | "xyz")`},
		{"ab", false, "all"},
		{"abc|xyz", false, `("abc" | "xyz")`},
		{"abc(d|e)", false, `(("abc" "bcd") | ("abc" "bce"))`},
		{"a.*bcd", false, `("bcd")`},
		{"[ab]cd", false, `("acd" | "bcd")`},
		{"[Aa]bc", false, `("Abc" | "abc")`},
		{"x+yzw", false, `("yzw")`},
		{"[^a]", false, "all"},
	} {
		flags := syntax.Perl
		if c.fold {
			flags |= syntax.FoldCase
		}
		re, err := syntax.Parse(c.expr, flags)
		if err != nil {
			t.Fatal(err)
		}
		if got := RegexpQuery(re).String(); got != c.want {
			t.Errorf("RegexpQuery(%q, fold %v) = %s, want %s", c.expr, c.fold, got, c.want)
		}
	}
}

// A case-insensitive literal asks, for each of its trigrams, for any of
// its case variants, and leaves out the letters whose variants are not
// ASCII.
func TestCaseInsensitiveQuery(t *testing.T) {
	for _, expr := range []string{"kelvin", "(?i)kelvin"} {
		flags := syntax.Perl
		if expr == "kelvin" {
			flags |= syntax.FoldCase
		}
		re, err := syntax.Parse(expr, flags)
		if err != nil {
			t.Fatal(err)
		}
		q := RegexpQuery(re)
		if n := len(q.Needed()); n != 3*8 {
			t.Errorf("%q: %d trigrams needed, want 24 (3 trigrams of \"elvin\", 8 cases each): %s", expr, n, q)
		}
		for text, want := range map[string]bool{"KELVIN": true, "\u212aelvin": true, "xkElViNx": true, "kelvim": false, "elv lvi vin": true, "el vin": false} {
			ex := NewExtractor()
			ex.Add([]byte(text))
			if got := q.Eval(ex.Has); got != want {
				t.Errorf("%q on %q = %v, want %v", expr, text, got, want)
			}
		}
	}
	long := strings.Repeat("abcdefgh", 100)
	if n := len(LiteralQuery(long, true).Needed()); n > 8*maxCaseTrigrams {
		t.Errorf("a %d-byte literal asks for %d trigrams, more than %d", len(long), n, 8*maxCaseTrigrams)
	}
	if n := len(LiteralQuery("ValueError", false).Needed()); n != 8 {
		t.Errorf("a case-sensitive literal of 10 bytes asks for %d trigrams, want 8", n)
	}
}

func TestPostingRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 64, 65, 1000, 4096} {
		for _, density := range []float64{0, 0.01, 0.1, 0.2, 0.9, 1} {
			var pos []int
			for i := range n {
				if r.Float64() < density {
					pos = append(pos, i)
				}
			}
			enc := EncodePosting(pos, n)
			if len(enc) > 1+(n+7)/8 {
				t.Errorf("n %d, %d positions: %d bytes, more than a bitmap", n, len(pos), len(enc))
			}
			s, err := DecodePosting(enc, n)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			s.Each(func(i int) { got = append(got, i) })
			if !slices.Equal(got, pos) && !(len(pos) == 0 && got == nil) {
				t.Fatalf("n %d: round trip of %v = %v", n, pos, got)
			}
		}
	}
	for _, bad := range [][]byte{{9}, {postingDeltas, 0xff}, {postingDeltas, 5}, {postingBitmap, 1, 2}, {postingBitmap, 0x80}} {
		if _, err := DecodePosting(bad, 5); err == nil {
			t.Errorf("DecodePosting(%v, 5) = nil error", bad)
		}
	}
}

func TestScanLongLines(t *testing.T) {
	long := bytes.Repeat([]byte("ab"), ChunkSize) // two chunks without a line break
	text := append(append([]byte("first needle\n"), long...), "\nthird needle\n"...)
	m, err := Compile(Pattern{Expr: "needle"})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	if err := m.Scan(bytes.NewReader(text), func(n int64, _ []byte, _ int) bool { got = append(got, n); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int64{1, 3}) {
		t.Errorf("Scan lines = %v, want [1 3]", got)
	}
}

func TestCut(t *testing.T) {
	line := []byte(strings.Repeat("é", 50) + "needle" + strings.Repeat("z", 100))
	got, cut := Cut(line, 100, 40)
	if !cut || !strings.Contains(got, "needle") || !strings.HasPrefix(got, "[…") || !strings.HasSuffix(got, "bytes…]") {
		t.Errorf("Cut = %q, %v", got, cut)
	}
	if got, cut := Cut([]byte("short"), 0, 40); got != "short" || cut {
		t.Errorf("Cut(short) = %q, %v", got, cut)
	}
}

func FuzzMatcher(f *testing.F) {
	f.Add("ValueError", false, false, "x\nValueError: y\n")
	f.Add("k.l", false, true, "\u212a\nKxL\n")
	f.Add("(a|b)+c", false, false, "aac\nbbc")
	f.Add("é", true, true, "É\n")
	f.Fuzz(func(t *testing.T, expr string, fixed, fold bool, text string) {
		if len(text) > 4096 {
			return
		}
		check(t, Pattern{Expr: expr, Fixed: fixed, IgnoreCase: fold}, []byte(text))
	})
}
