package compact_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/compact"
	"github.com/toolcas/toolcas/tokens"
)

// recording is a compactor that returns a preset result and records the
// targets it was given.
type recording struct {
	result  []compact.Message
	targets []int
}

func (r *recording) Compact(_ context.Context, msgs []compact.Message, target int, _ compact.TokenCounter) ([]compact.Message, bool, error) {
	r.targets = append(r.targets, target)
	if r.result == nil {
		return msgs, false, nil
	}
	return r.result, true, nil
}

const testWindow = 1000

func trigger(t *testing.T, c compact.Compactor, opts ...compact.TriggerOption) *compact.Trigger {
	t.Helper()
	tr, err := compact.NewTrigger(c, testWindow, append([]compact.TriggerOption{compact.WithCounter(fakeCounter)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// The cases are Haystack's tests of CompactionHook, its window of 1000
// tokens, its 0.7 and 0.4, and its test counter.
func TestTriggerHaystackCases(t *testing.T) {
	ctx := context.Background()
	for _, f := range [][2]float64{{0.7, 0.7}, {0.4, 0.7}, {1.5, 0.4}, {0.7, 0}} {
		_, err := compact.NewTrigger(&recording{}, testWindow, compact.CompactAt(f[0]), compact.CompactTo(f[1]))
		if !errors.Is(err, compact.ErrTrigger) || !strings.Contains(err.Error(), "0 < compact_to < compact_at <= 1") {
			t.Errorf("compact_at %v, compact_to %v: %v", f[0], f[1], err)
		}
	}
	if _, err := compact.NewTrigger(&recording{}, 0); err == nil || !strings.Contains(err.Error(), "context_window must be a positive number of tokens") {
		t.Errorf("window 0: %v", err)
	}
	if _, err := compact.NewTrigger(nil, testWindow); !errors.Is(err, compact.ErrTrigger) {
		t.Errorf("no compactor: %v", err)
	}
	for ct, want := range map[int]bool{800: true, 700: true, 300: false} {
		r := &recording{}
		if _, _, _, err := trigger(t, r).Before(ctx, freshTwoSteps(), ct); err != nil {
			t.Fatal(err)
		}
		if got := len(r.targets) == 1; got != want {
			t.Errorf("context tokens %d: compacted %v, want %v", ct, got, want)
		}
	}
	t.Run("counts locally without reported usage", func(t *testing.T) {
		r := &recording{}
		big := []compact.Message{user(strings.Repeat("x", 4000)), user(strings.Repeat("x", 4000)), user(strings.Repeat("x", 4000))}
		trigger(t, r).Before(ctx, big, 0)
		if len(r.targets) != 1 {
			t.Error("did not compact")
		}
	})
	t.Run("the raw target when there is no overhead", func(t *testing.T) {
		var msgs []compact.Message
		for range 9 {
			msgs = append(msgs, user(strings.Repeat("x", 400)))
		}
		msgs = append(msgs, asst(strings.Repeat("y", 400)))
		r := &recording{}
		trigger(t, r).Before(ctx, msgs, fakeCounter.Count(msgs))
		if len(r.targets) != 1 || r.targets[0] < 395 || r.targets[0] > 405 {
			t.Errorf("targets %v, want about 400", r.targets)
		}
	})
	t.Run("overhead comes off the target", func(t *testing.T) {
		r := &recording{}
		trigger(t, r).Before(ctx, freshTwoSteps(), 800)
		if !reflect.DeepEqual(r.targets, []int{0}) {
			t.Errorf("targets %v, want [0]", r.targets)
		}
	})
	t.Run("rewrites the messages and estimates the context again", func(t *testing.T) {
		msgs := freshTwoSteps()
		tr := trigger(t, window(t, 1, compact.DefaultOmissionNote))
		estimated := tr.Estimate(msgs, 800)
		overhead := estimated - fakeCounter.Count(msgs)
		out, ct, changed, err := tr.Before(ctx, msgs, 800)
		if err != nil || !changed || len(out) != 5 || markers(out) != 1 {
			t.Fatalf("Before = %d messages, %v, %v", len(out), changed, err)
		}
		last := 0
		for i, m := range out {
			if m.Role == compact.RoleAssistant {
				last = i
			}
		}
		if want := fakeCounter.Count(out[:last+1]) + overhead; ct != want || ct <= 0 || ct >= 800 {
			t.Errorf("context tokens %d, want %d", ct, want)
		}
	})
	t.Run("keeps the no-usage sentinel", func(t *testing.T) {
		kept := []compact.Message{asst("kept")}
		out, ct, changed, _ := trigger(t, &recording{result: kept}).Before(ctx, []compact.Message{user(strings.Repeat("x", 4000))}, 0)
		if !changed || !reflect.DeepEqual(out, kept) || ct != 0 {
			t.Errorf("Before = %v, %d, %v", out, ct, changed)
		}
	})
	t.Run("leaves the conversation when the compactor declines", func(t *testing.T) {
		msgs := freshTwoSteps()
		out, ct, changed, _ := trigger(t, &recording{}).Before(ctx, msgs, 800)
		if changed || !reflect.DeepEqual(out, msgs) || ct != 800 {
			t.Errorf("Before = %v, %d, %v", out, ct, changed)
		}
	})
	t.Run("pruning, then the sliding window", func(t *testing.T) {
		counter := compact.Counter{Text: tokens.Approximate{CharsPerToken: 1}, NoMediaTokens: true}
		msgs := []compact.Message{user("task"), call("old"), result(strings.Repeat("old result ", 400), "old"), call("recent"), result(strings.Repeat("recent result ", 400), "recent")}
		opts := []compact.TriggerOption{compact.WithCounter(counter), compact.CompactAt(0.5), compact.CompactTo(0.1)}
		pruning, _ := compact.NewToolResultPruning(compact.Options{MinKeepSteps: 1, NoMinTokens: true}, "")
		ph, err := compact.NewTrigger(pruning, 2000, opts...)
		if err != nil {
			t.Fatal(err)
		}
		wh, _ := compact.NewTrigger(window(t, 1, compact.DefaultOmissionNote), 2000, opts...)
		ct := counter.Count(msgs[:len(msgs)-1]) + 100
		after, ct, changed, err := ph.Before(ctx, msgs, ct)
		if err != nil || !changed || len(after) != len(msgs) {
			t.Fatalf("pruning: %d messages, %v, %v", len(after), changed, err)
		}
		if rec, _ := after[2].Result.Meta[compact.MetaKey].(compact.Record); rec.Strategy != "tool_result_pruning" {
			t.Errorf("message 2 record %v", after[2].Result.Meta)
		}
		out, _, changed, err := wh.Before(ctx, after, ct)
		if err != nil || !changed || len(out) >= len(after) || !reflect.DeepEqual(out[len(out)-2:], msgs[len(msgs)-2:]) {
			t.Fatalf("window: %v, %v, %v", out, changed, err)
		}
		noted := false
		for _, m := range out {
			noted = noted || record(m)["strategy"] == "sliding_window"
		}
		if !noted {
			t.Error("no omission note")
		}
	})
}
