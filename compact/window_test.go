package compact_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/tokens"
)

// The cases below are Haystack's own tests of SlidingWindowCompactor, with
// their inputs, targets and expectations, and its test counter: the
// rendered conversation's length over 4, rounded down.
var fakeCounter = compact.Counter{Text: tokens.Approximate{}, NoMediaTokens: true}

// smallest forces the window down to min_keep_steps.
const smallest = 1

func sys(text string) compact.Message  { return compact.Message{Role: compact.RoleSystem, Text: text} }
func user(text string) compact.Message { return compact.Message{Role: compact.RoleUser, Text: text} }
func asst(text string) compact.Message {
	return compact.Message{Role: compact.RoleAssistant, Text: text}
}

func call(ids ...string) compact.Message {
	m := compact.Message{Role: compact.RoleAssistant}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, compact.ToolCall{Tool: "search", ID: id})
	}
	return m
}

func result(text, id string) compact.Message {
	return compact.Message{Role: compact.RoleTool, Result: &hook.Result{Tool: "search", CallID: id, Parts: []hook.Part{hook.Text(text)}}}
}

func windowNote(text string) compact.Message {
	m := user(text)
	m.Meta = map[string]any{compact.MetaKey: map[string]any{"strategy": "sliding_window"}}
	return m
}

func freshTwoSteps() []compact.Message {
	return []compact.Message{
		sys("rules"), user("start"),
		call("c1"), result(strings.Repeat("first result ", 12), "c1"),
		call("c2"), result(strings.Repeat("second result ", 12), "c2"),
	}
}

func window(t *testing.T, minKeep int, note string) *compact.SlidingWindow {
	t.Helper()
	w, err := compact.NewSlidingWindow(minKeep, note)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func cat(parts ...[]compact.Message) []compact.Message {
	var out []compact.Message
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func one(m compact.Message) []compact.Message { return []compact.Message{m} }

func compactOrNil(t *testing.T, w *compact.SlidingWindow, msgs []compact.Message, target int) []compact.Message {
	t.Helper()
	out, changed, err := w.Compact(context.Background(), msgs, target, fakeCounter)
	if err != nil {
		t.Fatal(err)
	}
	if !changed {
		if !reflect.DeepEqual(out, msgs) {
			t.Fatal("unchanged, but returned other messages")
		}
		return nil
	}
	return out
}

func record(m compact.Message) map[string]any {
	r, _ := m.Meta[compact.MetaKey].(map[string]any)
	return r
}

func markers(msgs []compact.Message) int {
	n := 0
	for _, m := range msgs {
		meta := m.Meta
		if m.Result != nil {
			meta = m.Result.Meta
		}
		if _, ok := meta[compact.MetaKey]; ok {
			n++
		}
	}
	return n
}

func TestSlidingWindowHaystackCases(t *testing.T) {
	t.Run("replaces all historical turns", func(t *testing.T) {
		msgs := []compact.Message{sys("rules"), user(strings.Repeat("old question ", 100)), asst("old answer"), user("current task")}
		got := compactOrNil(t, window(t, 0, ""), msgs, smallest)
		if want := []compact.Message{msgs[0], msgs[3]}; !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("replaces oldest agent step", func(t *testing.T) {
		msgs := freshTwoSteps()
		got := compactOrNil(t, window(t, 1, compact.DefaultOmissionNote), msgs, smallest)
		if len(got) != 5 || !reflect.DeepEqual(cat(got[:2], got[3:]), cat(msgs[:2], msgs[4:])) {
			t.Fatalf("got %v", got)
		}
		if want := map[string]any{"strategy": "sliding_window", "removed_messages": 2, "kept_messages": 4}; !reflect.DeepEqual(record(got[2]), want) {
			t.Errorf("note record %v, want %v", record(got[2]), want)
		}
		if want := strings.ReplaceAll(compact.DefaultOmissionNote, "{num_removed}", "2"); got[2].Text != want || got[2].Role != compact.RoleUser {
			t.Errorf("note %s %q, want user %q", got[2].Role, got[2].Text, want)
		}
	})
	t.Run("replaces oldest historical turn", func(t *testing.T) {
		msgs := []compact.Message{sys("rules"), user("old question"), asst(strings.Repeat("old answer ", 100)), user("recent question"), asst("recent answer"), user("current task"), asst("current answer")}
		got := compactOrNil(t, window(t, 1, compact.DefaultOmissionNote), msgs, 30)
		if len(got) != 6 || !reflect.DeepEqual(cat(one(got[0]), got[2:]), cat(one(msgs[0]), msgs[3:])) || record(got[1]) == nil {
			t.Errorf("got %v", got)
		}
	})
	t.Run("drops all historical turns and oldest agent step", func(t *testing.T) {
		history := []compact.Message{user("old question"), call("old-call"), result("old result", "old-call"), asst("old final answer")}
		task := []compact.Message{user("current task"), call("current-call-1"), result(strings.Repeat("large intermediate result ", 100), "current-call-1"), call("current-call-2"), result("latest result", "current-call-2")}
		msgs := cat(one(sys("rules")), history, task)
		got := compactOrNil(t, window(t, 1, ""), msgs, 52)
		if want := cat(one(msgs[0]), one(task[0]), task[3:]); !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("replaces earlier note and oldest historical turn", func(t *testing.T) {
		msgs := []compact.Message{sys("rules"), windowNote("Earlier messages were removed."), user(strings.Repeat("old question ", 200)), asst("old answer"), user("recent question"), asst("recent answer"), user("current task"), asst("current step")}
		got := compactOrNil(t, window(t, 1, compact.DefaultOmissionNote), msgs, 30)
		if len(got) != 6 || !reflect.DeepEqual(cat(one(got[0]), got[2:]), cat(one(msgs[0]), msgs[4:])) {
			t.Fatalf("got %v", got)
		}
		if markers(got) != 1 || record(got[1])["removed_messages"] != 3 {
			t.Errorf("%d markers, note %v; want one note that removed 3", markers(got), record(got[1]))
		}
	})
	t.Run("replaces earlier note and oldest agent step", func(t *testing.T) {
		msgs := []compact.Message{sys("rules"), user("current task"), windowNote("Earlier messages were removed."), call("c1"), result("first result", "c1"), call("c2"), result("second result", "c2")}
		got := compactOrNil(t, window(t, 1, compact.DefaultOmissionNote), msgs, smallest)
		if len(got) != 5 || !reflect.DeepEqual(cat(got[:2], got[3:]), cat(msgs[:2], msgs[5:])) {
			t.Fatalf("got %v", got)
		}
		if markers(got) != 1 || record(got[2])["removed_messages"] != 3 {
			t.Errorf("%d markers, note %v; want one note that removed 3", markers(got), record(got[2]))
		}
	})
	t.Run("keeps a pruned tool result inside a kept turn", func(t *testing.T) {
		pruned := result("[Tool result removed to free up context.]", "old")
		pruned.Result.Meta = map[string]any{compact.MetaKey: map[string]any{"strategy": "tool_result_pruning", "original_tokens": 180}}
		msgs := []compact.Message{sys("rules"), user(strings.Repeat("ancient question ", 200)), asst("ancient answer"), user("old question"), call("old"), pruned, user("current task"), asst("current step")}
		got := compactOrNil(t, window(t, 1, ""), msgs, 45)
		if want := cat(one(msgs[0]), msgs[3:]); !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("omission note can be turned off", func(t *testing.T) {
		msgs := freshTwoSteps()
		got := compactOrNil(t, window(t, 1, ""), msgs, smallest)
		if want := cat(msgs[:2], msgs[4:]); !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	for note, want := range map[string]string{
		"Dropped {num_removed} messages.": "Dropped 2 messages.",
		"Some history is missing.":        "Some history is missing.",
		"Gone: {other} x{num_removed}":    "Gone: {other} x2",
	} {
		t.Run("custom note "+note, func(t *testing.T) {
			got := compactOrNil(t, window(t, 1, note), freshTwoSteps(), smallest)
			if got == nil || got[2].Text != want {
				t.Errorf("note = %v, want %q", got, want)
			}
		})
	}
	t.Run("declines when only an earlier note would go", func(t *testing.T) {
		msgs := []compact.Message{sys("rules"), windowNote(strings.ReplaceAll(compact.DefaultOmissionNote, "{num_removed}", "12")), user("current task"), asst("current step")}
		if got := compactOrNil(t, window(t, 1, compact.DefaultOmissionNote), msgs, 16); got != nil {
			t.Errorf("got %v, want no change", got)
		}
	})
	for name, tc := range map[string]struct {
		msgs   []compact.Message
		target int
	}{
		"conversation already fits": {freshTwoSteps(), 100_000},
		"only system":               {[]compact.Message{sys("a"), sys("b")}, smallest},
		"only system and task":      {[]compact.Message{sys("rules"), user("hi")}, smallest},
	} {
		t.Run("nothing to remove: "+name, func(t *testing.T) {
			if got := compactOrNil(t, window(t, 1, compact.DefaultOmissionNote), tc.msgs, tc.target); got != nil {
				t.Errorf("got %v, want no change", got)
			}
		})
	}
	t.Run("keeps a parallel tool call with all its results", func(t *testing.T) {
		msgs := []compact.Message{sys("rules"), user("task"), call("old"), result(strings.Repeat("old result ", 40), "old"), call("a", "b", "c"), result("first", "a"), result("second", "b"), result("third", "c")}
		got := compactOrNil(t, window(t, 1, compact.DefaultOmissionNote), msgs, smallest)
		if got == nil || !reflect.DeepEqual(got[len(got)-4:], msgs[4:]) {
			t.Errorf("got %v, want the last step whole", got)
		}
	})
	for _, tc := range []struct{ minKeep, want int }{{0, 0}, {1, 1}, {2, 2}, {20, 2}} {
		t.Run("min_keep_steps wins over an unaffordable target", func(t *testing.T) {
			msgs := freshTwoSteps()
			got := compactOrNil(t, window(t, tc.minKeep, ""), msgs, smallest)
			if got == nil {
				got = msgs
			}
			n := 0
			for _, m := range got {
				if m.Role == compact.RoleAssistant {
					n++
				}
			}
			if n != tc.want {
				t.Errorf("min_keep_steps %d: %d steps kept, want %d", tc.minKeep, n, tc.want)
			}
		})
	}
	t.Run("keeping no steps still keeps the task", func(t *testing.T) {
		msgs := freshTwoSteps()
		if got := compactOrNil(t, window(t, 0, ""), msgs, smallest); !reflect.DeepEqual(got, msgs[:2]) {
			t.Errorf("got %v, want %v", got, msgs[:2])
		}
	})
	t.Run("rejects negative min_keep_steps", func(t *testing.T) {
		if _, err := compact.NewSlidingWindow(-1, ""); err == nil || !strings.Contains(err.Error(), "min_keep_steps must be at least 0") {
			t.Errorf("NewSlidingWindow(-1) = %v", err)
		}
	})
}

// TestSlidingWindowKeepsPointers: a kept step keeps its offload pointer as
// it was, and the compactor never rewrites it.
func TestSlidingWindowKeepsPointers(t *testing.T) {
	ptr := result("Tool result offloaded to text (9000 characters) at '/s/blobs/ab/ab.txt' (key 'r/2_search_c2.txt'). Preview: x...", "c2")
	ptr.Result.Meta = map[string]any{hook.MetaKey: []hook.Reference{{Key: "r/2_search_c2.txt"}}}
	msgs := []compact.Message{sys("rules"), user("start"), call("c1"), result(strings.Repeat("first result ", 200), "c1"), call("c2"), ptr}
	got := compactOrNil(t, window(t, 1, compact.DefaultOmissionNote), msgs, smallest)
	if got == nil || !reflect.DeepEqual(got[len(got)-1], ptr) || !hook.IsPointer(*got[len(got)-1].Result) {
		t.Errorf("got %v, want the pointer kept as it was", got)
	}
}
