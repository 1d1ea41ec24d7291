package search

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// An Op is what a Query asks of a blob's trigrams.
type Op int

// The operations of a Query.
const (
	// All holds for every blob: the query narrows nothing.
	All Op = iota
	// None holds for no blob.
	None
	// And holds when the blob has every trigram of Trigrams and every Sub
	// holds.
	And
	// Or holds when the blob has a trigram of Trigrams or a Sub holds.
	Or
)

// A Query is a boolean expression over trigrams that the blob of every
// matching line satisfies.
type Query struct {
	Op       Op
	Trigrams []Trigram
	Sub      []*Query
}

var (
	allQuery  = &Query{Op: All}
	noneQuery = &Query{Op: None}
)

// String shows the query with its trigrams as text, for tests and for
// messages: "all", "none", `("abc" "bcd")`, `("abc" | "xyz")`.
func (q *Query) String() string {
	switch q.Op {
	case All:
		return "all"
	case None:
		return "none"
	}
	var parts []string
	for _, t := range q.Trigrams {
		parts = append(parts, fmt.Sprintf("%q", string([]byte{byte(t >> 16), byte(t >> 8), byte(t)})))
	}
	for _, s := range q.Sub {
		parts = append(parts, s.String())
	}
	sep := " "
	if q.Op == Or {
		sep = " | "
	}
	return "(" + strings.Join(parts, sep) + ")"
}

// Needed returns every trigram the query names, in increasing order.
func (q *Query) Needed() []Trigram {
	var out []Trigram
	var walk func(*Query)
	walk = func(q *Query) {
		out = append(out, q.Trigrams...)
		for _, s := range q.Sub {
			walk(s)
		}
	}
	walk(q)
	slices.Sort(out)
	return slices.Compact(out)
}

// Eval reports whether a blob with the trigrams has says the query holds.
func (q *Query) Eval(has func(Trigram) bool) bool {
	switch q.Op {
	case All:
		return true
	case None:
		return false
	case And:
		for _, t := range q.Trigrams {
			if !has(t) {
				return false
			}
		}
		for _, s := range q.Sub {
			if !s.Eval(has) {
				return false
			}
		}
		return true
	}
	for _, t := range q.Trigrams {
		if has(t) {
			return true
		}
	}
	for _, s := range q.Sub {
		if s.Eval(has) {
			return true
		}
	}
	return false
}

// and returns a query holding when both hold.
func and(a, b *Query) *Query { return join(And, a, b) }

// or returns a query holding when either holds.
func or(a, b *Query) *Query { return join(Or, a, b) }

// join returns a op b, op And or Or. All is the unit of And and None its
// zero; for Or it is the other way round. Operands of the same op are
// flattened into the result, and under Or an And of a single trigram
// counts as that trigram.
func join(op Op, a, b *Query) *Query {
	unit, zero, zeroQuery := All, None, noneQuery
	if op == Or {
		unit, zero, zeroQuery = None, All, allQuery
	}
	switch {
	case a.Op == zero || b.Op == zero:
		return zeroQuery
	case a.Op == unit:
		return b
	case b.Op == unit:
		return a
	}
	q := &Query{Op: op}
	for _, x := range []*Query{a, b} {
		switch {
		case x.Op == op:
			q.Trigrams = append(q.Trigrams, x.Trigrams...)
			q.Sub = append(q.Sub, x.Sub...)
		case op == Or && x.Op == And && len(x.Trigrams) == 1 && len(x.Sub) == 0:
			q.Trigrams = append(q.Trigrams, x.Trigrams...)
		default:
			q.Sub = append(q.Sub, x)
		}
	}
	slices.Sort(q.Trigrams)
	q.Trigrams = slices.Compact(q.Trigrams)
	return q
}

// stringQuery is the query every text containing s satisfies: all of its
// trigrams, or All when it has none.
func stringQuery(s string) *Query {
	q := &Query{Op: And}
	for i := 0; i+3 <= len(s); i++ {
		if s[i] == '\n' || s[i+1] == '\n' || s[i+2] == '\n' {
			continue
		}
		q.Trigrams = append(q.Trigrams, trigramOf(s[i], s[i+1], s[i+2]))
	}
	if len(q.Trigrams) == 0 {
		return allQuery
	}
	slices.Sort(q.Trigrams)
	q.Trigrams = slices.Compact(q.Trigrams)
	return q
}

// maxCaseTrigrams is how many of a case-insensitive literal's trigrams its
// query asks for (each as up to 8 case variants); the rest are left to the
// line matcher.
const maxCaseTrigrams = 64

// caseQuery is the query every text containing s, with its ASCII letters in
// any case, satisfies: for each trigram of s, one of its case variants.
func caseQuery(s string) *Query {
	q := allQuery
	n := 0
	for i := 0; i+3 <= len(s) && n < maxCaseTrigrams; i++ {
		if s[i] == '\n' || s[i+1] == '\n' || s[i+2] == '\n' {
			continue
		}
		n++
		alt := &Query{Op: Or}
		for _, a := range caseVariants(s[i]) {
			for _, b := range caseVariants(s[i+1]) {
				for _, c := range caseVariants(s[i+2]) {
					alt.Trigrams = append(alt.Trigrams, trigramOf(a, b, c))
				}
			}
		}
		slices.Sort(alt.Trigrams)
		if len(alt.Trigrams) == 1 {
			alt.Op = And
		}
		q = and(q, alt)
	}
	return q
}

// caseVariants returns an ASCII letter in both cases, any other byte alone.
func caseVariants(c byte) []byte {
	if l := fold(c); 'a' <= l && l <= 'z' {
		return []byte{l - 'a' + 'A', l}
	}
	return []byte{c}
}

// caseStrings returns every spelling of s with its ASCII letters in either
// case, or nil when there would be more than maxExact.
func caseStrings(s string) []string {
	out := []string{""}
	for i := 0; i < len(s); i++ {
		v := caseVariants(s[i])
		if len(out)*len(v) > maxExact {
			return nil
		}
		next := make([]string, 0, len(out)*len(v))
		for _, p := range out {
			for _, c := range v {
				next = append(next, p+string(c))
			}
		}
		out = next
	}
	slices.Sort(out)
	return out
}

// setQuery is the query a text containing one of the strings satisfies.
func setQuery(set []string) *Query {
	q := noneQuery
	for _, s := range set {
		q = or(q, stringQuery(s))
	}
	return q
}

// LiteralQuery returns the query every text containing s satisfies; with
// foldCase, every text containing s in any case (Unicode simple folding,
// as regular expressions' (?i) and Matcher fold).
func LiteralQuery(s string, foldCase bool) *Query {
	if !foldCase {
		return stringQuery(s)
	}
	// Split s where a rune folds to bytes that differ from its own: 'k'
	// and 's' also match the Kelvin sign and the long s, and a letter
	// beyond ASCII its other cases, whatever their bytes.
	q := allQuery
	start := 0
	for i, r := range s {
		if r < utf8.RuneSelf && !foldsAway(byte(r)) {
			continue
		}
		q = and(q, caseQuery(s[start:i]))
		start = i + utf8.RuneLen(r)
		if r == utf8.RuneError {
			start = i + 1
		}
	}
	return and(q, caseQuery(s[start:]))
}

// foldsAway reports whether an ASCII byte has a case variant outside ASCII.
func foldsAway(c byte) bool {
	c = fold(c)
	return c == 'k' || c == 's'
}

func foldString(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = fold(c)
	}
	return string(b)
}

// maxExact is how many strings an exact set may hold before the analysis
// keeps only the query they imply.
const maxExact = 16

// info is what the analysis knows of a piece of a regular expression:
// either the exact set of strings it matches, or only a query its
// matches satisfy.
type info struct {
	exact []string // nil when not exact
	match *Query
}

func (i info) query() *Query {
	if i.exact != nil {
		return setQuery(i.exact)
	}
	return i.match
}

func inexact(q *Query) info { return info{match: q} }

// RegexpQuery returns the query that the blob of every line matching re
// satisfies.
func RegexpQuery(re *syntax.Regexp) *Query {
	return analyze(re.Simplify()).query()
}

func analyze(re *syntax.Regexp) info {
	switch re.Op {
	case syntax.OpNoMatch:
		return inexact(noneQuery)
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return info{exact: []string{""}}
	case syntax.OpLiteral:
		s := string(re.Rune)
		if re.Flags&syntax.FoldCase == 0 {
			return info{exact: []string{s}}
		}
		for _, r := range re.Rune {
			if r >= utf8.RuneSelf || foldsAway(byte(r)) {
				return inexact(LiteralQuery(s, true))
			}
		}
		if set := caseStrings(s); set != nil {
			return info{exact: set}
		}
		return inexact(LiteralQuery(s, true))
	case syntax.OpCharClass:
		return classInfo(re.Rune)
	case syntax.OpCapture:
		return analyze(re.Sub[0])
	case syntax.OpQuest:
		sub := analyze(re.Sub[0])
		if sub.exact != nil && len(sub.exact) < maxExact {
			return info{exact: union(sub.exact, []string{""})}
		}
		return inexact(allQuery)
	case syntax.OpPlus:
		return inexact(analyze(re.Sub[0]).query())
	case syntax.OpRepeat:
		if re.Min == 0 {
			return inexact(allQuery)
		}
		return inexact(analyze(re.Sub[0]).query())
	case syntax.OpConcat:
		return concatInfo(re.Sub)
	case syntax.OpAlternate:
		return alternateInfo(re.Sub)
	}
	// OpAnyChar, OpAnyCharNotNL, OpStar and whatever else: anything goes.
	return inexact(allQuery)
}

// classInfo is the exact set of a small character class, or nothing.
func classInfo(ranges []rune) info {
	var set []string
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i+1]-ranges[i] >= maxExact {
			return inexact(allQuery)
		}
		for r := ranges[i]; r <= ranges[i+1]; r++ {
			set = append(set, string(r))
		}
		if len(set) > 2*maxExact {
			return inexact(allQuery)
		}
	}
	slices.Sort(set)
	set = slices.Compact(set)
	if len(set) > maxExact {
		return inexact(allQuery)
	}
	if set == nil {
		return inexact(noneQuery)
	}
	return info{exact: set}
}

func concatInfo(subs []*syntax.Regexp) info {
	q := allQuery
	run := []string{""}
	for _, sub := range subs {
		si := analyze(sub)
		if si.exact != nil && len(run)*len(si.exact) <= maxExact {
			run = cross(run, si.exact)
			continue
		}
		q = and(q, setQuery(run))
		if si.exact != nil {
			run = si.exact
			continue
		}
		q = and(q, si.match)
		run = []string{""}
	}
	if q.Op == All {
		return info{exact: run}
	}
	return inexact(and(q, setQuery(run)))
}

func alternateInfo(subs []*syntax.Regexp) info {
	var set []string
	exact := true
	q := noneQuery
	for _, sub := range subs {
		si := analyze(sub)
		if exact && si.exact != nil && len(set)+len(si.exact) <= maxExact {
			set = union(set, si.exact)
			continue
		}
		if exact {
			q = setQuery(set)
			exact = false
		}
		q = or(q, si.query())
	}
	if exact && set != nil {
		return info{exact: set}
	}
	if exact {
		return inexact(noneQuery)
	}
	return inexact(q)
}

func cross(a, b []string) []string {
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func union(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}
