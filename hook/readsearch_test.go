package hook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
)

// searchStores are the stores of this package, each a Searcher.
var searchStores = []struct {
	name string
	open func(t *testing.T) hook.Store
}{
	{"MemStore", func(*testing.T) hook.Store { return hook.NewMemStore() }},
	{"DirStore", func(t *testing.T) hook.Store {
		s, err := hook.NewDirStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
}

// searchSetup offloads run-a's results (a 500-line test log with ERROR on
// every hundredth line, a 120-line listing, a screenshot) and run-b's (its
// own ERROR lines, and a line naming run-a's log) into s, and returns the
// keys of run-a's log and run-b's result.
func searchSetup(t *testing.T, s hook.Store) (logKey, bKey string) {
	t.Helper()
	h := mustHook(t, s)
	var lines []string
	for i := 1; i <= 500; i++ {
		lines = append(lines, fmt.Sprintf("line %d %s", i, map[bool]string{true: "ERROR disk", false: "ok"}[i%100 == 0]))
	}
	var items []string
	for i := 1; i <= 120; i++ {
		items = append(items, fmt.Sprintf("item %d id=ID-%04d", i, i))
	}
	out := offload(t, h, hook.Step{Run: "run-a", Number: 1},
		result("run_tests", "c1", hook.Text(strings.Join(lines, "\n")+"\n")),
		result("screenshot", "c2", hook.Image("image/png", pngBytes)),
	)
	logKey = hook.References(out[0])[0].Key
	offload(t, h, hook.Step{Run: "run-a", Number: 2}, result("list", "c3", hook.Text(strings.Join(items, "\n"))))
	out = offload(t, h, hook.Step{Run: "run-b", Number: 1},
		result("run_tests", "c1", hook.Text("run-b ERROR secret\nrun-b mentions "+logKey+" ERROR\nid=ID-0001 of run-b")))
	return logKey, hook.References(out[0])[0].Key
}

func search(t *testing.T, rt *hook.ReadTool, run string, a hook.ReadArgs) string {
	t.Helper()
	r, err := rt.Read(context.Background(), run, a)
	if err != nil {
		t.Fatalf("Read(run %s, %+v): %v", run, a, err)
	}
	if len(r.Parts) != 1 || r.Parts[0].Kind != hook.KindText {
		t.Fatalf("Read(run %s, %+v) = %+v, want one text part", run, a, r.Parts)
	}
	return r.Parts[0].Text
}

// footer is what ends every page of hits.
const footer = "[hits are KEY:LINE:text; [… N bytes] marks where a long line was cut. " +
	"Read a hit's part with ref=KEY and offset=LINE-1 (its lines from the hit's), or ref=KEY and the same pattern (all its matching lines)]"

func TestReadToolSearchPages(t *testing.T) {
	s := hook.NewMemStore()
	logKey, _ := searchSetup(t, s)
	rt, err := hook.NewReadTool(s)
	if err != nil {
		t.Fatal(err)
	}
	const listKey = "run-a/2_list_c3.txt"
	errLine := func(n int) string { return fmt.Sprintf("%s:%d:line %d ERROR disk", logKey, n, n) }
	item := func(n int) string { return fmt.Sprintf("%s:%d:item %d id=ID-%04d", listKey, n, n, n) }
	items := func(from, to int) []string {
		var out []string
		for n := from; n <= to; n++ {
			out = append(out, item(n))
		}
		return out
	}
	page := func(head string, hits ...string) string {
		return head + "\n" + strings.Join(hits, "\n") + "\n" + footer
	}
	for _, tc := range []struct {
		name string
		a    hook.ReadArgs
		want string
	}{
		{"all hits", hook.ReadArgs{Pattern: "ERROR"},
			page(`[search of run run-a for "ERROR": hits 1-5 of 5]`, errLine(100), errLine(200), errLine(300), errLine(400), errLine(500))},
		{"first page", hook.ReadArgs{Pattern: "ERROR", Limit: 2},
			page(`[search of run run-a for "ERROR": hits 1-2; more with offset=2]`, errLine(100), errLine(200))},
		{"middle page", hook.ReadArgs{Pattern: "ERROR", Offset: 2, Limit: 2},
			page(`[search of run run-a for "ERROR": hits 3-4; more with offset=4]`, errLine(300), errLine(400))},
		{"last page", hook.ReadArgs{Pattern: "ERROR", Offset: 4, Limit: 2},
			page(`[search of run run-a for "ERROR": hits 5-5 of 5]`, errLine(500))},
		{"a full last page", hook.ReadArgs{Pattern: "ERROR", Offset: 3, Limit: 2},
			page(`[search of run run-a for "ERROR": hits 4-5 of 5]`, errLine(400), errLine(500))},
		{"past the end", hook.ReadArgs{Pattern: "ERROR", Offset: 9},
			`[search of run run-a for "ERROR": 5 hits, none past offset=9]`},
		{"no match", hook.ReadArgs{Pattern: "nothing like it"},
			`[search of run run-a for "nothing like it": no line matches]`},
		{"default limit", hook.ReadArgs{Pattern: "^item"},
			page(`[search of run run-a for "^item": hits 1-50; more with offset=50]`, items(1, 50)...)},
		{"next default page", hook.ReadArgs{Pattern: "^item", Offset: 100},
			page(`[search of run run-a for "^item": hits 101-120 of 120]`, items(101, 120)...)},
		{"ignore case", hook.ReadArgs{Pattern: "error DISK", IgnoreCase: true, Limit: 1},
			page(`[search of run run-a for "error DISK" (ignore case): hits 1-1; more with offset=1]`, errLine(100))},
		{"case matters", hook.ReadArgs{Pattern: "error DISK"},
			`[search of run run-a for "error DISK": no line matches]`},
		{"fixed", hook.ReadArgs{Pattern: "id=ID-0001", Fixed: true},
			page(`[search of run run-a for "id=ID-0001" (fixed): hits 1-1 of 1]`, item(1))},
		{"fixed takes dots as dots", hook.ReadArgs{Pattern: "item 1.", Fixed: true},
			`[search of run run-a for "item 1." (fixed): no line matches]`},
		{"not fixed", hook.ReadArgs{Pattern: "item 1.", Limit: 3},
			page(`[search of run run-a for "item 1.": hits 1-3; more with offset=3]`, item(1), item(10), item(11))},
		{"tool", hook.ReadArgs{Pattern: "1 ", Tool: "run_tests", Limit: 2},
			page(`[search of run run-a for "1 " (tool "run_tests"): hits 1-2; more with offset=2]`,
				logKey+":1:line 1 ok", logKey+":11:line 11 ok")},
		{"another tool", hook.ReadArgs{Pattern: "ERROR", Tool: "list"},
			`[search of run run-a for "ERROR" (tool "list"): no line matches]`},
	} {
		if got := search(t, rt, "run-a", tc.a); got != tc.want {
			t.Errorf("%s: Read(%+v) =\n%s\nwant\n%s", tc.name, tc.a, got, tc.want)
		}
	}
	// Through Call, as a model sends it.
	r := rt.Call(context.Background(), "run-a", "call-s", json.RawMessage(`{"pattern": "error", "ignore_case": true, "limit": 1}`))
	if r.Error || r.CallID != "call-s" || !strings.HasPrefix(r.Parts[0].Text, `[search of run run-a for "error" (ignore case): hits 1-1;`) {
		t.Errorf("Call = %+v", r)
	}
	// A hit's hint reads back: the part from the hit's line.
	got := read(t, rt, "run-a", hook.ReadArgs{Ref: logKey, Offset: 199, Limit: 1})
	if !strings.HasSuffix(got, "\n200\tline 200 ERROR disk") {
		t.Errorf("reading a hit's line = %q", got)
	}
}

// TestReadToolPatternOptions: fixed and ignore_case apply to a read of one
// part as they do to a search.
func TestReadToolPatternOptions(t *testing.T) {
	s := hook.NewMemStore()
	logKey, _ := searchSetup(t, s)
	rt, err := hook.NewReadTool(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a    hook.ReadArgs
		want string
	}{
		{hook.ReadArgs{Ref: logKey, Pattern: "error", IgnoreCase: true, Limit: 1},
			"[" + logKey + ": matches 1-1 of 5 lines matching \"error\", of 500 lines; more with offset=1]\n100\tline 100 ERROR disk"},
		{hook.ReadArgs{Ref: logKey, Pattern: "error"}, "[" + logKey + ": no line of 500 matches \"error\"]"},
		{hook.ReadArgs{Ref: logKey, Pattern: "line 1.0 ", Fixed: true}, "[" + logKey + ": no line of 500 matches \"line 1.0 \"]"},
		{hook.ReadArgs{Ref: logKey, Pattern: "line 1.0 ", Limit: 1},
			"[" + logKey + ": matches 1-1 of 10 lines matching \"line 1.0 \", of 500 lines; more with offset=1]\n100\tline 100 ERROR disk"},
		{hook.ReadArgs{Ref: logKey, Pattern: "LINE 2.0 ERROR", Fixed: true, IgnoreCase: true}, "[" + logKey + ": no line of 500 matches \"LINE 2.0 ERROR\"]"},
		{hook.ReadArgs{Ref: logKey, Pattern: "LINE 200 ERROR", Fixed: true, IgnoreCase: true},
			"[" + logKey + ": matches 1-1 of 1 lines matching \"LINE 200 ERROR\", of 500 lines]\n200\tline 200 ERROR disk"},
	} {
		if got := read(t, rt, "run-a", tc.a); got != tc.want {
			t.Errorf("Read(%+v) =\n%s\nwant\n%s", tc.a, got, tc.want)
		}
	}
}

// TestReadToolSearchIsolation: two runs in one store; a search never shows
// the other run's parts, whatever the pattern names, in every store.
func TestReadToolSearchIsolation(t *testing.T) {
	for _, st := range searchStores {
		t.Run(st.name, func(t *testing.T) {
			s := st.open(t)
			logKey, bKey := searchSetup(t, s)
			rt, err := hook.NewReadTool(s)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				run     string
				a       hook.ReadArgs
				hits    int
				foreign []string // text of the other run, never shown
			}{
				{"run-a", hook.ReadArgs{Pattern: "ERROR"}, 5, []string{"run-b", "secret"}},
				{"run-a", hook.ReadArgs{Pattern: "run-b"}, 0, []string{"run-b/", "secret"}},
				{"run-a", hook.ReadArgs{Pattern: bKey, Fixed: true}, 0, []string{"run-b/", "secret"}},
				{"run-a", hook.ReadArgs{Pattern: "secret", IgnoreCase: true}, 0, []string{"run-b/", "secret"}},
				{"run-a", hook.ReadArgs{Pattern: "id=ID-0001", Fixed: true}, 1, []string{"run-b"}},
				{"run-a", hook.ReadArgs{Pattern: ".", Tool: "run_tests", Offset: 499}, 1, []string{"run-b"}},
				{"run-b", hook.ReadArgs{Pattern: "ERROR"}, 2, []string{"disk", "line 1"}},
				// run-b's own line names run-a's key: that line is run-b's.
				{"run-b", hook.ReadArgs{Pattern: logKey, Fixed: true}, 1, []string{"run-a/1", "disk"}},
				{"run-b", hook.ReadArgs{Pattern: "item|disk|line 1"}, 0, []string{"run-a/", "disk"}},
				{"run-c", hook.ReadArgs{Pattern: "ERROR|run|item"}, 0, []string{"run-a/", "run-b/"}},
			} {
				got := search(t, rt, tc.run, tc.a)
				hits := 0
				for _, line := range strings.Split(got, "\n") {
					if strings.HasPrefix(line, "[") {
						continue
					}
					hits++
					if !strings.HasPrefix(line, hook.EscapeRun(tc.run)+"/") {
						t.Errorf("run %s, %+v: hit %q is not of the run", tc.run, tc.a, line)
					}
				}
				if hits != tc.hits {
					t.Errorf("run %s, %+v: %d hits, want %d:\n%s", tc.run, tc.a, hits, tc.hits, got)
				}
				for _, f := range tc.foreign {
					// The header repeats the pattern: look in the hits only.
					body := got[strings.IndexByte(got, '\n')+1:]
					if strings.Contains(body, f) && !strings.Contains(tc.a.Pattern, f) {
						t.Errorf("run %s, %+v: %q shows in\n%s", tc.run, tc.a, f, got)
					}
				}
			}
		})
	}
}

// TestReadToolSearchDefaultRun: a call without a run searches the run of
// results offloaded without one, and only it.
func TestReadToolSearchDefaultRun(t *testing.T) {
	s := hook.NewMemStore()
	h := mustHook(t, s)
	offload(t, h, hook.Step{Number: 1}, result("t", "c", hook.Text("needle of no run")))
	offload(t, h, hook.Step{Run: "other", Number: 1}, result("t", "c", hook.Text("needle of other")))
	rt, err := hook.NewReadTool(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `[search of run default for "needle": hits 1-1 of 1]` + "\ndefault/1_t_c.txt:1:needle of no run\n" + footer
	if got := search(t, rt, "", hook.ReadArgs{Pattern: "needle"}); got != want {
		t.Errorf("search without a run =\n%s\nwant\n%s", got, want)
	}
}

// TestReadToolSearchStoreFromContext: a tool built without a store searches
// the store the context carries, the run's own.
func TestReadToolSearchStoreFromContext(t *testing.T) {
	s := hook.NewMemStore()
	searchSetup(t, s)
	rt, err := hook.NewReadTool(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rt.Read(hook.WithStore(context.Background(), s), "run-a", hook.ReadArgs{Pattern: "ERROR"})
	if err != nil || !strings.Contains(r.Parts[0].Text, "hits 1-5 of 5") {
		t.Errorf("search of the context's store = %v, %v", r.Parts, err)
	}
	if _, err := rt.Read(context.Background(), "run-a", hook.ReadArgs{Pattern: "ERROR"}); err == nil || !strings.Contains(err.Error(), "no store") {
		t.Errorf("search with no store = %v, want an error saying so", err)
	}
}

// readOnly is a store that cannot search: a hook.Store and nothing more.
type readOnly struct{ hook.Store }

func TestReadToolSearchRefusals(t *testing.T) {
	s := hook.NewMemStore()
	logKey, _ := searchSetup(t, s)
	rt, err := hook.NewReadTool(s)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := hook.NewReadTool(readOnly{s})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		rt    *hook.ReadTool
		a     hook.ReadArgs
		want  string
		isErr error
	}{
		{"nothing", rt, hook.ReadArgs{}, "no ref: give the key or path from the pointer to read a part, or leave ref out and give a pattern to search", nil},
		{"query without ref", rt, hook.ReadArgs{Query: ".items"}, "query needs a ref", nil},
		{"query and pattern without ref", rt, hook.ReadArgs{Query: ".items", Pattern: "x"}, "query needs a ref", nil},
		{"byte_offset without ref", rt, hook.ReadArgs{Pattern: "x", ByteOffset: 10}, "byte_offset needs a ref", nil},
		{"tool with ref", rt, hook.ReadArgs{Ref: logKey, Tool: "run_tests"}, `tool "run_tests" narrows a search`, nil},
		{"fixed without pattern", rt, hook.ReadArgs{Ref: logKey, Fixed: true}, "fixed and ignore_case apply to a pattern", nil},
		{"ignore_case without pattern", rt, hook.ReadArgs{IgnoreCase: true}, "fixed and ignore_case apply to a pattern", nil},
		{"negative offset", rt, hook.ReadArgs{Pattern: "x", Offset: -1}, "offset -1", nil},
		{"limit too large", rt, hook.ReadArgs{Pattern: "x", Limit: hook.MaxReadLimit + 1}, "limit 2001", nil},
		{"not a Searcher", plain, hook.ReadArgs{Pattern: "ERROR"}, "store cannot search: this store can only read a part by its ref", hook.ErrCannotSearch},
		{"bad pattern", rt, hook.ReadArgs{Pattern: "(["}, `search: pattern "([": bad pattern: error parsing regexp: missing closing ]`, hook.ErrBadPattern},
		{"empty pattern, fixed", rt, hook.ReadArgs{Pattern: "", Fixed: true}, "fixed and ignore_case apply to a pattern", nil},
		{"pattern over 4 KiB", rt, hook.ReadArgs{Pattern: strings.Repeat("a", 5000)}, "bad pattern: 5000 bytes, the most is 4096", hook.ErrBadPattern},
		{"fixed pattern over 4 KiB", rt, hook.ReadArgs{Pattern: strings.Repeat("(", 4097), Fixed: true}, "bad pattern: 4097 bytes, the most is 4096", hook.ErrBadPattern},
		{"costly pattern", rt, hook.ReadArgs{Pattern: "a{1000}"}, "pattern too costly", hook.ErrPatternTooCostly},
		{"costly pattern is bad", rt, hook.ReadArgs{Pattern: "(x{500}){2}"}, "bad pattern", hook.ErrBadPattern},
		{"line break", rt, hook.ReadArgs{Pattern: "a\nb"}, "a line break never matches", hook.ErrBadPattern},
		{"not UTF-8", rt, hook.ReadArgs{Pattern: "\xff"}, "not valid UTF-8", hook.ErrBadPattern},
		{"bad pattern in a read", rt, hook.ReadArgs{Ref: logKey, Pattern: "(["}, "bad pattern", hook.ErrBadPattern},
	} {
		_, err := tc.rt.Read(context.Background(), "run-a", tc.a)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Read(%.60q) = %v, want an error saying %q", tc.name, fmt.Sprintf("%+v", tc.a), err, tc.want)
		}
		if tc.isErr != nil && !errors.Is(err, tc.isErr) {
			t.Errorf("%s: Read = %v, want %v", tc.name, err, tc.isErr)
		}
	}
	// A store that cannot search still reads.
	if got := read(t, plain, "run-a", hook.ReadArgs{Ref: logKey, Limit: 1}); !strings.Contains(got, "1\tline 1 ok") {
		t.Errorf("read through a store that cannot search = %q", got)
	}
}

// TestReadToolSearchHostilePatterns: patterns that backtracking engines
// choke on run in linear time here, within the tool's time limit.
func TestReadToolSearchHostilePatterns(t *testing.T) {
	s := hook.NewMemStore()
	h := mustHook(t, s)
	long := strings.Repeat("a", 50_000) + "!"
	offload(t, h, hook.Step{Run: "r", Number: 1}, result("t", "c", hook.Text(strings.Repeat(long+"\n", 4))))
	rt, err := hook.NewReadTool(s, hook.WithReadTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{`(a*)*$`, `(a+)+b`, `(a|aa)*c`, `(a|a?)+!`, `^(a*)*(x|!)`} {
		start := time.Now()
		got := search(t, rt, "r", hook.ReadArgs{Pattern: p})
		if !strings.HasPrefix(got, "[search of run r for ") {
			t.Errorf("pattern %q: %q", p, got[:min(len(got), 200)])
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("pattern %q took %v", p, d)
		}
	}
}

// TestReadToolSearchBudget: a page of hits stays within the byte budget,
// whatever the hits, the keys, the run's name and the pattern, and the
// next page starts where it ended.
func TestReadToolSearchBudget(t *testing.T) {
	longRun := strings.Repeat("ü", hook.MaxRunLen/2)
	for _, tc := range []struct {
		name     string
		run      string
		tool     string
		line     string
		pattern  string
		maxBytes int
	}{
		{"short lines", "r", "t", "needle %d", "needle", 1024},
		{"short lines, default budget", "r", "t", "needle %d", "needle", hook.DefaultReadBytes},
		{"long lines", "r", "t", strings.Repeat("x", 5000) + "needle %d" + strings.Repeat("y", 5000), "needle", 1024},
		{"long lines, 4 KiB", "r", "t", strings.Repeat("é", 3000) + "needle %d" + strings.Repeat("ü", 3000), "needle", 4096},
		{"long names", longRun, strings.Repeat("tool", 40), "needle %d " + strings.Repeat("z", 300), "needle", 1024},
		{"long pattern", longRun, strings.Repeat("tool", 40), "needle %d " + strings.Repeat("z", 300), "needle[ " + strings.Repeat("\x01", 4000) + "]", 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := hook.NewMemStore()
			h := mustHook(t, s)
			var lines []string
			for i := 1; i <= 300; i++ {
				lines = append(lines, fmt.Sprintf(tc.line, i))
			}
			offload(t, h, hook.Step{Run: tc.run, Number: 1}, result(tc.tool, strings.Repeat("call", 30), hook.Text(strings.Join(lines, "\n"))))
			rt, err := hook.NewReadTool(s, hook.WithReadMaxBytes(tc.maxBytes))
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			for offset, pages := 0, 0; ; pages++ {
				if pages > 400 {
					t.Fatal("paging does not end")
				}
				got := search(t, rt, tc.run, hook.ReadArgs{Pattern: tc.pattern, Offset: offset, Limit: hook.MaxReadLimit})
				if len(got) > tc.maxBytes {
					t.Fatalf("page at offset %d has %d bytes, more than the budget of %d:\n%s", offset, len(got), tc.maxBytes, got)
				}
				var hits []string
				for _, l := range strings.Split(got, "\n") {
					if !strings.HasPrefix(l, "[") {
						hits = append(hits, l)
					}
				}
				if len(hits) == 0 {
					t.Fatalf("page at offset %d has no hit:\n%s", offset, got)
				}
				for i, hit := range hits {
					// Each hit is its own line, cut around its match.
					if want := fmt.Sprintf("needle %d", offset+i+1); !strings.Contains(hit, want) && !strings.HasSuffix(hit, " […]") {
						t.Errorf("hit %d at offset %d = %q, want it to show %q", i, offset, hit, want)
					}
					if len(hit) > 2*hook.SearchWidth+600 {
						t.Errorf("hit of %d bytes: %q", len(hit), hit)
					}
				}
				seen += len(hits)
				head := got[:strings.IndexByte(got, '\n')]
				next := fmt.Sprintf("more with offset=%d]", offset+len(hits))
				if strings.HasSuffix(head, " of 300]") {
					break
				}
				if !strings.HasSuffix(head, next) {
					t.Fatalf("header %q, want it to end %q", head, next)
				}
				offset += len(hits)
			}
			if seen != 300 {
				t.Errorf("pages showed %d hits, want 300", seen)
			}
		})
	}
}

// TestReadToolSearchCut: a long line shows about SearchWidth bytes around
// its match, the cut marked on each side.
func TestReadToolSearchCut(t *testing.T) {
	s := hook.NewMemStore()
	h := mustHook(t, s)
	line := strings.Repeat("x", 10_000) + "NEEDLE" + strings.Repeat("y", 10_000)
	offload(t, h, hook.Step{Run: "r", Number: 1}, result("t", "c", hook.Text("short NEEDLE\n"+line)))
	rt, err := hook.NewReadTool(s)
	if err != nil {
		t.Fatal(err)
	}
	got := search(t, rt, "r", hook.ReadArgs{Pattern: "NEEDLE"})
	hits := strings.Split(got, "\n")[1:3]
	if hits[0] != "r/1_t_c.txt:1:short NEEDLE" {
		t.Errorf("short line = %q, want it whole", hits[0])
	}
	text := strings.TrimPrefix(hits[1], "r/1_t_c.txt:2:")
	if !strings.HasPrefix(text, "[…") || !strings.HasSuffix(text, "bytes…]") || !strings.Contains(text, "NEEDLE") {
		t.Errorf("cut line = %q, want the match between two cut markers", text)
	}
	if n := len(text); n < hook.SearchWidth || n > hook.SearchWidth+40 {
		t.Errorf("cut line has %d bytes, want about %d", n, hook.SearchWidth)
	}
}

// stubSearcher reports hits as a Searcher, however its fields say.
type stubSearcher struct {
	hook.Store
	hits []hook.SearchHit
	// block, after the hits, waits for the search's context to end.
	block bool
	calls *int
}

func (s stubSearcher) Search(ctx context.Context, run string, q hook.SearchQuery, fn func(hook.SearchHit) error) error {
	for _, h := range s.hits {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.calls != nil {
			*s.calls++
		}
		if err := fn(h); err != nil {
			return err
		}
	}
	if s.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func stubHits(key string, n int) []hook.SearchHit {
	hits := make([]hook.SearchHit, n)
	for i := range hits {
		hits[i] = hook.SearchHit{Key: key, Line: int64(i + 1), Text: fmt.Sprint("hit ", i+1)}
	}
	return hits
}

// TestReadToolSearchStopsEarly: the search stops once the page is full and
// one more hit shows that more follow.
func TestReadToolSearchStopsEarly(t *testing.T) {
	for _, tc := range []struct {
		offset, limit int
		total         int
		calls         int
		head          string
	}{
		{0, 5, 1000, 6, `[search of run r for "hit": hits 1-5; more with offset=5]`},
		{10, 5, 1000, 16, `[search of run r for "hit": hits 11-15; more with offset=15]`},
		{0, 5, 5, 5, `[search of run r for "hit": hits 1-5 of 5]`},
		{3, 5, 5, 5, `[search of run r for "hit": hits 4-5 of 5]`},
		{0, 2000, 100_000, 2001, `[search of run r for "hit": hits 1-2000; more with offset=2000]`},
	} {
		calls := 0
		rt, err := hook.NewReadTool(stubSearcher{Store: hook.NewMemStore(), hits: stubHits("r/1_t_c.txt", tc.total), calls: &calls},
			hook.WithReadMaxBytes(1<<20))
		if err != nil {
			t.Fatal(err)
		}
		got := search(t, rt, "r", hook.ReadArgs{Pattern: "hit", Offset: tc.offset, Limit: tc.limit})
		if head := got[:strings.IndexByte(got, '\n')]; head != tc.head {
			t.Errorf("offset %d limit %d of %d: header %q, want %q", tc.offset, tc.limit, tc.total, head, tc.head)
		}
		if calls != tc.calls {
			t.Errorf("offset %d limit %d of %d: fn called %d times, want %d", tc.offset, tc.limit, tc.total, calls, tc.calls)
		}
	}
}

// TestReadToolSearchRunGuard: hits a store reports from another run are
// refused, never shown.
func TestReadToolSearchRunGuard(t *testing.T) {
	for _, key := range []string{"run-b/1_t_c.txt", "run-ab/1_t_c.txt", "run/1_t_c.txt", "1_t_c.txt", ""} {
		hits := append(stubHits("run-a/1_t_c.txt", 2), hook.SearchHit{Key: key, Line: 1, Text: "secret of another run"})
		rt, err := hook.NewReadTool(stubSearcher{Store: hook.NewMemStore(), hits: hits})
		if err != nil {
			t.Fatal(err)
		}
		r, err := rt.Read(context.Background(), "run-a", hook.ReadArgs{Pattern: "."})
		if !errors.Is(err, hook.ErrRefused) || strings.Contains(err.Error(), "secret") {
			t.Errorf("hit of key %q: Read = %+v, %v; want ErrRefused, nothing shown", key, r, err)
		}
	}
}

// TestReadToolSearchWidthGuard: a store that does not cut lines to the
// width gets them cut by the tool.
func TestReadToolSearchWidthGuard(t *testing.T) {
	hit := hook.SearchHit{Key: "r/1_t_c.txt", Line: 7, Text: "needle " + strings.Repeat("x", 5000)}
	rt, err := hook.NewReadTool(stubSearcher{Store: hook.NewMemStore(), hits: []hook.SearchHit{hit}})
	if err != nil {
		t.Fatal(err)
	}
	got := search(t, rt, "r", hook.ReadArgs{Pattern: "needle"})
	line := strings.Split(got, "\n")[1]
	if !strings.HasPrefix(line, "r/1_t_c.txt:7:needle x") || !strings.HasSuffix(line, "bytes…]") || len(line) > hook.SearchWidth+60 {
		t.Errorf("uncut hit shown as %q (%d bytes)", line, len(line))
	}
}

// TestReadToolSearchTimeout: the tool's timeout bounds a search: the hits
// found by then are shown, saying the search stopped; with none, the
// error says what to do. A caller's canceled context is an error.
func TestReadToolSearchTimeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	for _, tc := range []struct {
		hits int
		want string
	}{
		{3, "[search of run r for \"hit\": hits 1-3; the search stopped at its 50ms time limit, more may follow with offset=3]\n" +
			"r/1_t_c.txt:1:hit 1\nr/1_t_c.txt:2:hit 2\nr/1_t_c.txt:3:hit 3\n" + footer},
		{0, `search of run r for "hit" took longer than 50ms (stopped after 0 hits): use a more specific pattern, or tool`},
	} {
		rt, err := hook.NewReadTool(stubSearcher{Store: hook.NewMemStore(), hits: stubHits("r/1_t_c.txt", tc.hits), block: true},
			hook.WithReadTimeout(timeout))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r, err := rt.Read(context.Background(), "r", hook.ReadArgs{Pattern: "hit"})
		if d := time.Since(start); d > 20*timeout {
			t.Errorf("%d hits: the search took %v, past its %v limit", tc.hits, d, timeout)
		}
		var got string
		if err != nil {
			got = err.Error()
		} else {
			got = r.Parts[0].Text
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%d hits, then a blocked search: %q, want %q", tc.hits, got, tc.want)
		}
	}
	rt, err := hook.NewReadTool(stubSearcher{Store: hook.NewMemStore(), hits: stubHits("r/1_t_c.txt", 3), block: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(timeout, cancel)
	if _, err := rt.Read(ctx, "r", hook.ReadArgs{Pattern: "hit"}); !errors.Is(err, context.Canceled) {
		t.Errorf("search canceled by its caller = %v, want context.Canceled", err)
	}
}
