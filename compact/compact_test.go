package compact_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/store"
)

const (
	run      = "thread-7f3a:user/42"
	nSteps   = 200
	skipKey  = "keep_me"
	keepLast = 3
	minTok   = 50
)

var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89 and some more bytes to weigh")

// conversation builds a 200-step agent run: a system and a user message,
// then per step an assistant message calling 1 to 3 tools and their
// results, of sizes from tiny to several thousand characters. Every 5th
// step's first result was offloaded by the hook into s (a pointer); every
// 7th step has an id-less call; every 11th step's first result is an error;
// every 13th carries a skip key; every 17th returns an image.
func conversation(t *testing.T, s hook.Store) []compact.Message {
	t.Helper()
	h, err := hook.New(s, policy.MustStrategies(policy.Default(policy.Always)))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []compact.Message{
		{Role: compact.RoleSystem, Text: "You are a careful research agent."},
		{Role: compact.RoleUser, Text: "Find out what fusion start-ups reported this quarter."},
	}
	for step := 1; step <= nSteps; step++ {
		n := 1 + step%3
		var calls []compact.ToolCall
		var results []hook.Result
		for k := range n {
			tool := []string{"search", "read_file", "bash"}[(step+k)%3]
			id := fmt.Sprintf("call_%02d_%05dxYz", k, step)
			if step%7 == 0 && k == n-1 {
				id = ""
			}
			size := 10 + (step*37+k*101)%3000
			unit := fmt.Sprintf("step %d result %d: ", step, k)
			text := strings.Repeat(unit, size/len(unit)+1)[:size]
			r := hook.Result{Tool: tool, CallID: id, Parts: []hook.Part{hook.Text(text)}, Meta: map[string]any{"origin": "test"}}
			switch {
			case k == 0 && step%11 == 0:
				r.Error = true
			case k == 0 && step%13 == 0:
				r.Meta[skipKey] = true
			case k == 0 && step%17 == 0:
				r.Parts = []hook.Part{hook.Text("a chart"), hook.Image("image/png", pngBytes)}
			}
			calls = append(calls, compact.ToolCall{Tool: tool, ID: id, Arguments: fmt.Sprintf(`{"q": "step %d"}`, step)})
			results = append(results, r)
		}
		if step%5 == 0 {
			out, err := h.OffloadPicked(context.Background(), hook.Step{Run: run, Number: step}, results, 0)
			if err != nil {
				t.Fatal(err)
			}
			results = out
		}
		msgs = append(msgs, compact.Message{Role: compact.RoleAssistant, Text: fmt.Sprintf("Step %d: calling %d tools.", step, n), ToolCalls: calls})
		for i := range results {
			msgs = append(msgs, compact.Message{Role: compact.RoleTool, Result: &results[i]})
		}
	}
	msgs = append(msgs, compact.Message{Role: compact.RoleAssistant, Text: "Here is what I found."})
	return msgs
}

// deepCopy copies messages so that a test can tell whether Compact touched
// its input.
func deepCopy(msgs []compact.Message) []compact.Message {
	out := make([]compact.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		if m.Result != nil {
			r := *m.Result
			r.Parts = append([]hook.Part(nil), m.Result.Parts...)
			r.Meta = map[string]any{}
			for k, v := range m.Result.Meta {
				r.Meta[k] = v
			}
			out[i].Result = &r
		}
	}
	return out
}

// protectedFrom returns the index of the first tool result of the latest
// keep steps.
func protectedFrom(msgs []compact.Message, keep int) int {
	seen := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == compact.RoleAssistant && i+1 < len(msgs) && msgs[i+1].Role == compact.RoleTool {
			seen++
			if seen == keep {
				return i + 1
			}
		}
	}
	return 0
}

// eligible says whether a result may be compacted at all.
func eligible(m compact.Message, counter compact.TokenCounter, offloading bool) bool {
	if !m.IsToolResult() || hook.IsPointer(*m.Result) || counter.Count([]compact.Message{m}) <= minTok {
		return false
	}
	if _, ok := m.Result.Meta[skipKey]; ok {
		return false
	}
	return !offloading || !m.Result.Error
}

// checkPointersResolve reads back every reference of every pointer in msgs
// and compares it with the original result's parts.
func checkPointersResolve(t *testing.T, s hook.Store, msgs, orig []compact.Message) int {
	t.Helper()
	n := 0
	for i, m := range msgs {
		if !m.IsToolResult() || !hook.IsPointer(*m.Result) {
			continue
		}
		o := orig[i].Result
		refs := hook.References(*m.Result)
		if hook.IsPointer(*o) {
			if !reflect.DeepEqual(m.Result, o) {
				t.Errorf("message %d: a pointer was rewritten", i)
			}
			continue // the hook's pointer: its parts are stored, checked below by key
		}
		if len(refs) != len(o.Parts) {
			t.Fatalf("message %d: %d references for %d parts", i, len(refs), len(o.Parts))
		}
		for k, ref := range refs {
			want := []byte(o.Parts[k].Text)
			if o.Parts[k].Kind != hook.KindText {
				want = o.Parts[k].Data
			}
			for _, r := range []string{ref.Key, ref.Path} {
				c, err := s.Read(context.Background(), run, r)
				if err != nil {
					t.Fatalf("message %d part %d: Read(%q): %v", i, k, r, err)
				}
				if !bytes.Equal(c.Data, want) {
					t.Errorf("message %d part %d: %q reads %d bytes, want the original %d", i, k, r, len(c.Data), len(want))
				}
			}
			n++
		}
	}
	// The hook's own pointers resolve too.
	for i, m := range orig {
		if m.IsToolResult() && hook.IsPointer(*m.Result) {
			for _, ref := range hook.References(*m.Result) {
				if _, err := s.Read(context.Background(), run, ref.Key); err != nil {
					t.Errorf("message %d: the hook's pointer %q no longer resolves: %v", i, ref.Key, err)
				}
				n++
			}
		}
	}
	return n
}

func TestH21ToolResultPruning200Steps(t *testing.T) {
	ctx := context.Background()
	s := hook.NewMemStore()
	msgs := conversation(t, s)
	orig := deepCopy(msgs)
	counter := compact.Approximate()
	before := counter.Count(msgs)
	target := before / 4
	c, err := compact.NewToolResultPruning(compact.Options{MinKeepSteps: keepLast, MinTokens: minTok, SkipMetaKeys: []string{skipKey}}, "")
	if err != nil {
		t.Fatal(err)
	}
	out, changed, err := c.Compact(ctx, msgs, target, counter)
	if err != nil || !changed {
		t.Fatalf("Compact = %v, %v", changed, err)
	}
	if !reflect.DeepEqual(msgs, orig) {
		t.Fatal("Compact modified its input")
	}
	after := counter.Count(out)
	t.Logf("%d messages, %d tokens before, target %d, %d after", len(msgs), before, target, after)
	keepFrom := protectedFrom(msgs, keepLast)
	pruned, lastPruned, firstLeft := 0, -1, -1
	for i, m := range out {
		o := orig[i]
		if !o.IsToolResult() {
			if !reflect.DeepEqual(m, o) {
				t.Errorf("message %d (%s) changed", i, o.Role)
			}
			continue
		}
		rec, isPruned := m.Result.Meta[compact.MetaKey].(compact.Record)
		if !isPruned {
			if !reflect.DeepEqual(m, o) {
				t.Errorf("message %d changed without a record", i)
			}
			if eligible(o, counter, false) && i < keepFrom && firstLeft < 0 {
				firstLeft = i
			}
			continue
		}
		pruned++
		lastPruned = i
		if !eligible(o, counter, false) || i >= keepFrom {
			t.Errorf("message %d pruned: pointer %v, skip key %v, protected %v, %d tokens",
				i, hook.IsPointer(*o.Result), o.Result.Meta[skipKey] != nil, i >= keepFrom, counter.Count([]compact.Message{o}))
		}
		want := "[Tool result removed to free up context. Call `" + o.Result.Tool + "` again if you need it.]"
		if len(m.Result.Parts) != 1 || m.Result.Parts[0].Text != want {
			t.Errorf("message %d reads %+v, want %q", i, m.Result.Parts, want)
		}
		if rec != (compact.Record{Strategy: "tool_result_pruning", OriginalTokens: counter.Count([]compact.Message{o})}) {
			t.Errorf("message %d record %+v", i, rec)
		}
		if m.Result.Tool != o.Result.Tool || m.Result.CallID != o.Result.CallID || m.Result.Error != o.Result.Error || m.Result.Meta["origin"] != "test" {
			t.Errorf("message %d lost its origin, error flag or metadata: %+v", i, m.Result)
		}
	}
	if firstLeft >= 0 && firstLeft < lastPruned {
		t.Errorf("message %d left while the newer %d was pruned: not oldest first", firstLeft, lastPruned)
	}
	t.Logf("%d results pruned; oldest left from message %d", pruned, firstLeft)
	// The running total moves by each rewrite's saving, counted on the
	// message alone, as Haystack's does: the whole conversation, counted
	// at once, may come to a token more a rewrite than the total says.
	if after > target+pruned {
		t.Errorf("%d tokens after, want at most the target %d and a token of rounding for each of the %d rewrites", after, target, pruned)
	}
	if n := checkPointersResolve(t, s, out, orig); n == 0 {
		t.Error("no pointer checked")
	}
	// Compacting again to what it reached changes nothing.
	if _, changed, _ := c.Compact(ctx, out, after, counter); changed {
		t.Error("a second Compact to the size reached changed something")
	}
	// An unreachable target prunes every eligible result and stops there.
	all, _, err := c.Compact(ctx, msgs, 0, counter)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range all {
		if !m.IsToolResult() {
			continue
		}
		_, isPruned := m.Result.Meta[compact.MetaKey]
		if o := orig[i]; eligible(o, counter, false) && i < keepFrom && !isPruned {
			t.Errorf("target 0: eligible message %d left", i)
		}
	}
	t.Logf("target 0: %d tokens left", counter.Count(all))
}

func TestOffloading200Steps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) hook.Store
	}{
		{"MemStore", func(*testing.T) hook.Store { return hook.NewMemStore() }},
		{"Store", func(t *testing.T) hook.Store {
			s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "tool_results"), store.WithCreate())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := tc.store(t)
			msgs := conversation(t, s)
			orig := deepCopy(msgs)
			counter := compact.Approximate()
			before := counter.Count(msgs)
			// Pointers weigh more than placeholders: a looser target.
			target := before / 2
			c, err := compact.NewOffloading(s, run, compact.Options{MinKeepSteps: keepLast, MinTokens: minTok, SkipMetaKeys: []string{skipKey}})
			if err != nil {
				t.Fatal(err)
			}
			out, changed, err := c.Compact(ctx, msgs, target, counter)
			if err != nil || !changed {
				t.Fatalf("Compact = %v, %v", changed, err)
			}
			if !reflect.DeepEqual(msgs, orig) {
				t.Fatal("Compact modified its input")
			}
			after := counter.Count(out)
			t.Logf("%d messages, %d tokens before, target %d, %d after", len(msgs), before, target, after)
			if after > target {
				t.Errorf("%d tokens after, want at most %d", after, target)
			}
			keepFrom := protectedFrom(msgs, keepLast)
			offloaded := 0
			for i, m := range out {
				o := orig[i]
				rec, done := compact.Record{}, false
				if m.Result != nil {
					rec, done = m.Result.Meta[compact.MetaKey].(compact.Record)
				}
				if !done {
					if !reflect.DeepEqual(m, o) {
						t.Errorf("message %d changed without a record", i)
					}
					continue
				}
				offloaded++
				if !eligible(o, counter, true) || i >= keepFrom {
					t.Errorf("message %d offloaded: error %v, pointer %v, protected %v", i, o.Result.Error, hook.IsPointer(*o.Result), i >= keepFrom)
				}
				if !hook.IsPointer(*m.Result) || !strings.HasPrefix(m.Result.Parts[0].Text, "Tool result offloaded to ") {
					t.Errorf("message %d is no pointer: %+v", i, m.Result.Parts)
				}
				if rec != (compact.Record{Strategy: "tool_result_offloading", OriginalTokens: counter.Count([]compact.Message{o})}) {
					t.Errorf("message %d record %+v", i, rec)
				}
				// Keys are the hook's: the step, the tool, the call id or the position.
				key := hook.References(*m.Result)[0].Key
				if o.Result.CallID != "" && !strings.Contains(key, "_"+o.Result.Tool+"_"+o.Result.CallID) {
					t.Errorf("message %d stored under %q", i, key)
				}
				if o.Result.CallID == "" && !strings.Contains(key, "_"+o.Result.Tool+"_call") {
					t.Errorf("id-less message %d stored under %q", i, key)
				}
			}
			n := checkPointersResolve(t, s, out, orig)
			t.Logf("%d results offloaded, %d references read back", offloaded, n)
			// Pruning what offloading left never touches its pointers.
			p, _ := compact.NewToolResultPruning(compact.Options{MinKeepSteps: keepLast, NoMinTokens: true}, "")
			pruned, _, err := p.Compact(ctx, out, 0, counter)
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range pruned {
				if out[i].IsToolResult() && hook.IsPointer(*out[i].Result) && !reflect.DeepEqual(m, out[i]) {
					t.Errorf("pruning touched pointer %d", i)
				}
			}
			checkPointersResolve(t, s, pruned, orig)
		})
	}
}

// TestOffloadingKeepsIDlessKeysApart: id-less results in one step get the
// keys their positions give them, never a version of each other's.
func TestOffloadingKeepsIDlessKeysApart(t *testing.T) {
	ctx := context.Background()
	s := hook.NewMemStore()
	big := func(s string) *hook.Result {
		return &hook.Result{Tool: "search", Parts: []hook.Part{hook.Text(strings.Repeat(s, 4000))}}
	}
	msgs := []compact.Message{
		{Role: compact.RoleAssistant, Step: 4},
		{Role: compact.RoleTool, Result: big("a"), Step: 4},
		{Role: compact.RoleTool, Result: big("b"), Step: 4},
		{Role: compact.RoleAssistant, Step: 5},
		{Role: compact.RoleTool, Result: big("c"), Step: 5},
	}
	c, err := compact.NewOffloading(s, "r", compact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := c.Compact(ctx, msgs, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int]string{1: "r/4_search_call0.txt", 2: "r/4_search_call1.txt"} {
		refs := hook.References(*out[i].Result)
		if len(refs) != 1 || refs[0].Key != want {
			t.Errorf("message %d stored under %v, want %s", i, refs, want)
			continue
		}
		got, err := s.Read(ctx, "r", want)
		if err != nil || string(got.Data) != msgs[i].Result.Parts[0].Text {
			t.Errorf("%s reads back %v", want, err)
		}
	}
	if hook.IsPointer(*out[4].Result) {
		t.Error("the latest step was offloaded")
	}
}

func TestH21PruningHaystackRules(t *testing.T) {
	ctx := context.Background()
	res := func(tool, text string, meta map[string]any) compact.Message {
		return compact.Message{Role: compact.RoleTool, Result: &hook.Result{Tool: tool, CallID: "c", Parts: []hook.Part{hook.Text(text)}, Meta: meta}}
	}
	msgs := []compact.Message{
		{Role: compact.RoleUser, Text: "q"},
		{Role: compact.RoleAssistant},
		res("a", strings.Repeat("x", 791), nil),                                   // "[tool:a] " and 791 x: 200 tokens, not over min_tokens 200
		res("b", strings.Repeat("x", 795), nil),                                   // 201 tokens: pruned
		res("c", strings.Repeat("x", 4000), map[string]any{hook.MetaKey: nil}),    // a pointer, whatever the value
		res("d", strings.Repeat("x", 4000), map[string]any{compact.MetaKey: nil}), // already compacted
		{Role: compact.RoleAssistant},
		res("e", strings.Repeat("x", 4000), nil), // the latest step
	}
	c, err := compact.NewToolResultPruning(compact.Options{}, "")
	if err != nil {
		t.Fatal(err)
	}
	counter := compact.Approximate()
	if _, changed, _ := c.Compact(ctx, msgs, counter.Count(msgs), counter); changed {
		t.Error("compacted a conversation already at its target")
	}
	out, changed, err := c.Compact(ctx, msgs, 0, counter)
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	for i, want := range []bool{false, false, false, true, false, false, false, false} {
		got := false
		if out[i].Result != nil {
			_, got = out[i].Result.Meta[compact.MetaKey]
		}
		if i == 5 {
			got = !reflect.DeepEqual(out[i], msgs[i])
		}
		if got != want {
			t.Errorf("message %d pruned = %v, want %v", i, got, want)
		}
	}
	// A custom placeholder: only {tool_name} is filled; one larger than the
	// result is not used.
	small := []compact.Message{msgs[1], msgs[3], msgs[6], msgs[7]}
	c, _ = compact.NewToolResultPruning(compact.Options{NoMinTokens: true}, `{"gone": "{tool_name}", "{other}": 1}`)
	out, _, _ = c.Compact(ctx, small, 0, counter)
	if got := out[1].Result.Parts[0].Text; got != `{"gone": "b", "{other}": 1}` {
		t.Errorf("placeholder = %q", got)
	}
	c, _ = compact.NewToolResultPruning(compact.Options{NoMinTokens: true}, strings.Repeat("long placeholder ", 100))
	if _, changed, _ := c.Compact(ctx, small, 0, counter); changed {
		t.Error("a placeholder larger than the result replaced it")
	}
	for _, o := range []compact.Options{{MinKeepSteps: -1}, {MinTokens: -1}} {
		if _, err := compact.NewToolResultPruning(o, ""); err == nil {
			t.Errorf("NewToolResultPruning(%+v) accepted", o)
		}
		if _, err := compact.NewOffloading(hook.NewMemStore(), "", o); err == nil {
			t.Errorf("NewOffloading(%+v) accepted", o)
		}
	}
	if _, err := compact.NewOffloading(hook.NewMemStore(), "a\x00b", compact.Options{}); err == nil {
		t.Error("NewOffloading with a bad run accepted")
	}
}

// TestOffloadingPerRunStore: a compactor built without a store writes to
// the one the run brings with hook.WithStore, and fails clearly without.
func TestOffloadingPerRunStore(t *testing.T) {
	msgs := []compact.Message{
		{Role: compact.RoleAssistant},
		{Role: compact.RoleTool, Result: &hook.Result{Tool: "search", CallID: "c1", Parts: []hook.Part{hook.Text(strings.Repeat("x", 4000))}}},
		{Role: compact.RoleAssistant},
		{Role: compact.RoleTool, Result: &hook.Result{Tool: "search", CallID: "c2", Parts: []hook.Part{hook.Text("latest")}}},
	}
	c, err := compact.NewOffloading(nil, "r", compact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Compact(context.Background(), msgs, 0, nil); err == nil || !strings.Contains(err.Error(), "no store") {
		t.Errorf("Compact without a store = %v, want an error saying so", err)
	}
	s := hook.NewMemStore()
	out, changed, err := c.Compact(hook.WithStore(context.Background(), s), msgs, 0, nil)
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	got, err := s.Read(context.Background(), "r", "r/1_search_c1.txt")
	if err != nil || string(got.Data) != strings.Repeat("x", 4000) || !hook.IsPointer(*out[1].Result) {
		t.Errorf("the run's store holds %v, %v", got, err)
	}
}

// TestOffloadingShortensPointers: with short pointers, the compactor also
// shortens the hook's pointers of steps the model has read, keeping their
// references, and leaves the latest step's as they are; without, it never
// touches a pointer.
func TestOffloadingShortensPointers(t *testing.T) {
	t.Run("MemStore", func(t *testing.T) { testOffloadingShortensPointers(t, hook.NewMemStore()) })
	t.Run("Store", func(t *testing.T) {
		s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "tool_results"), store.WithCreate())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		testOffloadingShortensPointers(t, s)
	})
}

func testOffloadingShortensPointers(t *testing.T, s hook.Store) {
	ctx := context.Background()
	h, err := hook.New(s, policy.MustStrategies(policy.Default(policy.OverChars(1000))))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []compact.Message{{Role: compact.RoleSystem, Text: "You are an agent."}}
	texts := map[string]string{} // by call id, what each tool returned
	for step := 1; step <= 4; step++ {
		results := []hook.Result{
			{Tool: "bash", CallID: fmt.Sprint("big", step), Parts: []hook.Part{hook.Text(strings.Repeat(fmt.Sprint("line ", step, " of a long listing\n"), 200))}},
			{Tool: "bash", CallID: fmt.Sprint("mid", step), Parts: []hook.Part{hook.Text(strings.Repeat("some output ", 70))}},
		}
		for k := range results {
			results[k].Meta = map[string]any{"origin": "test"}
			texts[results[k].CallID] = results[k].Parts[0].Text
		}
		out, err := h.Offload(ctx, hook.Step{Run: run, Number: step}, results)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, compact.Message{Role: compact.RoleAssistant, Step: step, ToolCalls: []compact.ToolCall{{Tool: "bash", ID: results[0].CallID}, {Tool: "bash", ID: results[1].CallID}}})
		for i := range out {
			msgs = append(msgs, compact.Message{Role: compact.RoleTool, Step: step, Result: &out[i]})
		}
	}
	orig := deepCopy(msgs)
	counter := compact.Approximate()

	// Full pointers: the hook's pointers stay; only the results are offloaded.
	c, err := compact.NewOffloading(s, run, compact.Options{MinTokens: minTok})
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := c.Compact(ctx, msgs, 0, counter)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range out {
		if m.IsToolResult() && hook.IsPointer(*orig[i].Result) && !reflect.DeepEqual(m, orig[i]) {
			t.Errorf("full pointers: message %d, a pointer, was rewritten", i)
		}
	}

	c, err = compact.NewOffloading(s, run, compact.Options{MinTokens: minTok}, hook.WithShortPointers())
	if err != nil {
		t.Fatal(err)
	}
	out, changed, err := c.Compact(ctx, msgs, 0, counter)
	if err != nil || !changed {
		t.Fatalf("Compact = %v, %v", changed, err)
	}
	if !reflect.DeepEqual(msgs, orig) {
		t.Fatal("Compact modified its input")
	}
	keepFrom := protectedFrom(msgs, 1)
	shortened := 0
	for i, m := range out {
		o := orig[i]
		if !m.IsToolResult() {
			continue
		}
		if i >= keepFrom {
			if !reflect.DeepEqual(m, o) {
				t.Errorf("message %d of the latest step was rewritten", i)
			}
			continue
		}
		text := m.Result.Parts[0].Text
		if !strings.HasPrefix(text, "Tool result offloaded (") || strings.Contains(text, "Preview") {
			t.Errorf("message %d is not a short pointer: %q", i, text)
		}
		rec, ok := m.Result.Meta[compact.MetaKey].(compact.Record)
		if !ok || rec.Strategy != compact.StrategyOffloading || rec.OriginalTokens != counter.Count([]compact.Message{o}) {
			t.Errorf("message %d record %+v", i, m.Result.Meta[compact.MetaKey])
		}
		if !hook.IsPointer(*o.Result) {
			continue
		}
		shortened++
		if !reflect.DeepEqual(hook.References(*m.Result), hook.References(*o.Result)) {
			t.Errorf("message %d: references changed from %+v to %+v", i, hook.References(*o.Result), hook.References(*m.Result))
		}
		want := fmt.Sprintf("Tool result offloaded (%d characters, key '%s').", 200*len(fmt.Sprint("line ", o.Step, " of a long listing\n")), hook.References(*o.Result)[0].Key)
		if text != want {
			t.Errorf("message %d = %q, want %q", i, text, want)
		}
		if counter.Count([]compact.Message{m}) >= counter.Count([]compact.Message{o}) {
			t.Errorf("message %d was not shortened", i)
		}
	}
	if shortened != 3 {
		t.Errorf("%d pointers shortened, want the 3 of the steps before the latest", shortened)
	}
	// Compacting again finds nothing left to do.
	if _, changed, err := c.Compact(ctx, out, 0, counter); changed || err != nil {
		t.Errorf("second Compact = %v, %v, want nothing changed", changed, err)
	}
	// Every pointer's reference reads back what the tool returned.
	pointers := 0
	for i, m := range out {
		if !m.IsToolResult() || !hook.IsPointer(*m.Result) {
			continue
		}
		pointers++
		ref := hook.References(*m.Result)[0]
		got, err := s.Read(ctx, run, ref.Key)
		if err != nil || string(got.Data) != texts[m.Result.CallID] {
			t.Errorf("message %d: %s reads back %v", i, ref.Key, err)
		}
	}
	if pointers != 7 {
		t.Errorf("%d pointers, want 7 (every result but the latest step's small one)", pointers)
	}
}
