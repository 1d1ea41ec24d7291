package compact

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// StrategySlidingWindow is what SlidingWindow records as its strategy.
const StrategySlidingWindow = "sliding_window"

// DefaultOmissionNote is the note SlidingWindow leaves where it removed
// messages, Haystack's text; {num_removed} is replaced by their number.
const DefaultOmissionNote = "[{num_removed} earlier messages were removed from this conversation to free up context and cannot be recovered.]"

// SlidingWindow keeps the agent's instructions, its current task and as
// much complete recent conversation as the target allows, and drops the
// rest: Haystack's SlidingWindowCompactor.
//
// The leading system messages and the latest user message (the current
// task) are always kept. Earlier turns (a user message and all that
// follows it up to the next) are kept whole, newest first, while they fit;
// when the current task's own steps do not fit, every earlier turn goes and
// its oldest steps (an assistant message and the tool results right after
// it, never split) go until the rest fits, the newest MinKeepSteps staying
// whatever their size. A user message, the omission note, takes the place
// of what was removed; a later compaction folds it into its own, so there
// is never more than one. Offload pointers are messages like any other: a
// kept step keeps its pointers.
type SlidingWindow struct {
	minKeepSteps int
	note         string
}

var _ Compactor = (*SlidingWindow)(nil)

// NewSlidingWindow returns a sliding-window compactor keeping at least
// minKeepSteps of the newest steps (0 lets every completed step go), that
// leaves note where it removed messages (DefaultOmissionNote; "" removes
// them silently).
func NewSlidingWindow(minKeepSteps int, note string) (*SlidingWindow, error) {
	if minKeepSteps < 0 {
		return nil, fmt.Errorf("compact: min_keep_steps must be at least 0, got %d", minKeepSteps)
	}
	return &SlidingWindow{minKeepSteps: minKeepSteps, note: note}, nil
}

// MinKeepSteps returns the fewest newest steps the compactor keeps.
func (w *SlidingWindow) MinKeepSteps() int { return w.minKeepSteps }

// OmissionNote returns the note the compactor leaves ("" for none).
func (w *SlidingWindow) OmissionNote() string { return w.note }

// Compact implements Compactor.
func (w *SlidingWindow) Compact(ctx context.Context, msgs []Message, target int, counter TokenCounter) ([]Message, bool, error) {
	if counter == nil {
		counter = Approximate()
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if counter.Count(msgs) <= target {
		return msgs, false, nil
	}
	kept, noteAt, removed := w.split(msgs, target, counter)
	if len(removed) == 0 {
		return msgs, false, nil
	}
	if w.note == "" {
		return kept, true, nil
	}
	// Swapping an earlier note for a new one frees nothing.
	if !slices.ContainsFunc(removed, func(m Message) bool { return !isWindowNote(m) }) {
		return msgs, false, nil
	}
	note := Message{
		Role: RoleUser,
		// Replace, not format: a custom note may hold other braces.
		Text: strings.ReplaceAll(w.note, "{num_removed}", strconv.Itoa(len(removed))),
		Meta: map[string]any{MetaKey: map[string]any{
			"strategy":         StrategySlidingWindow,
			"removed_messages": len(removed),
			"kept_messages":    len(kept),
		}},
	}
	out := make([]Message, 0, len(kept)+1)
	out = append(out, kept[:noteAt]...)
	out = append(out, note)
	out = append(out, kept[noteAt:]...)
	return out, true, nil
}

// split returns the messages kept, in order, the position the note goes
// in them, and the messages removed.
func (w *SlidingWindow) split(msgs []Message, target int, counter TokenCounter) (kept []Message, noteAt int, removed []Message) {
	systemEnd := leadingSystemEnd(msgs)
	task := latestUser(msgs)
	var taskIdx []int
	if task >= 0 {
		taskIdx = []int{task}
	}
	// An earlier note is left out of its turn, so that keeping the turn
	// folds the note into the one this compaction leaves.
	var turns [][]int
	for _, g := range historicalTurns(msgs, systemEnd, task) {
		turns = append(turns, slices.DeleteFunc(g, func(i int) bool { return isWindowNote(msgs[i]) }))
	}
	stepStart := systemEnd
	if task >= 0 {
		stepStart = task + 1
	}
	var stepGroups [][]int
	for _, s := range stepSpans(msgs, stepStart) {
		stepGroups = append(stepGroups, indices(s.start, s.end))
	}
	protected := append(indices(0, systemEnd), taskIdx...)
	available := target - counter.Count(at(msgs, protected))
	firstTurn, firstStep := len(turns), 0
	if taskTokens := counter.Count(at(msgs, flatten(stepGroups))); taskTokens > available {
		firstStep = min(firstToKeep(msgs, stepGroups, available, counter), max(len(stepGroups)-w.minKeepSteps, 0))
	} else {
		firstTurn = firstToKeep(msgs, turns, available-taskTokens, counter)
	}
	keptTurns := flatten(turns[firstTurn:])
	keep := append(append(append(indices(0, systemEnd), keptTurns...), taskIdx...), flatten(stepGroups[firstStep:])...)
	noteAt = systemEnd
	if firstStep != 0 {
		noteAt = systemEnd + len(keptTurns) + len(taskIdx)
	}
	in := make(map[int]bool, len(keep))
	for _, i := range keep {
		in[i] = true
	}
	for i, m := range msgs {
		if !in[i] {
			removed = append(removed, m)
		}
	}
	return at(msgs, keep), noteAt, removed
}

// firstToKeep returns the position in groups from which they are kept:
// added up newest first, stopping at the first that does not fit.
func firstToKeep(msgs []Message, groups [][]int, available int, counter TokenCounter) int {
	first := len(groups)
	for first > 0 {
		n := counter.Count(at(msgs, groups[first-1]))
		if n > available {
			break
		}
		available -= n
		first--
	}
	return first
}

// leadingSystemEnd returns the end of the leading system messages, a
// system message a compactor wrote ending it.
func leadingSystemEnd(msgs []Message) int {
	for i, m := range msgs {
		if _, marked := m.meta()[MetaKey]; m.Role != RoleSystem || marked {
			return i
		}
	}
	return len(msgs)
}

// latestUser returns the position of the latest user message no
// compactor wrote, or -1.
func latestUser(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if _, marked := msgs[i].meta()[MetaKey]; msgs[i].Role == RoleUser && !marked {
			return i
		}
	}
	return -1
}

// historicalTurns groups the messages from the end of the system block up
// to the current task in turns: each from a user message no compactor
// wrote up to the next.
func historicalTurns(msgs []Message, systemEnd, task int) [][]int {
	end := systemEnd
	if task >= 0 {
		end = task
	}
	var users []int
	for i := systemEnd; i < end; i++ {
		if _, marked := msgs[i].meta()[MetaKey]; msgs[i].Role == RoleUser && !marked {
			users = append(users, i)
		}
	}
	var out [][]int
	for k, u := range users {
		next := end
		if k+1 < len(users) {
			next = users[k+1]
		}
		out = append(out, indices(u, next))
	}
	return out
}

// stepSpans returns the agent steps from start on: each an assistant
// message and the tool results right after it, which may be none.
func stepSpans(msgs []Message, start int) []span {
	var out []span
	for i := start; i < len(msgs); {
		if msgs[i].Role != RoleAssistant {
			i++
			continue
		}
		j := i + 1
		for j < len(msgs) && msgs[j].IsToolResult() {
			j++
		}
		out = append(out, span{i, j})
		i = j
	}
	return out
}

// isWindowNote reports whether m is an omission note SlidingWindow left.
func isWindowNote(m Message) bool {
	return m.Role == RoleUser && strategyOf(m.meta()[MetaKey]) == StrategySlidingWindow
}

// strategyOf returns the strategy a compaction record names, whether the
// record is a Record or a map decoded from JSON.
func strategyOf(v any) string {
	switch r := v.(type) {
	case Record:
		return r.Strategy
	case *Record:
		if r != nil {
			return r.Strategy
		}
	case map[string]any:
		s, _ := r["strategy"].(string)
		return s
	}
	return ""
}

func indices(from, to int) []int {
	out := make([]int, 0, max(to-from, 0))
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func flatten(groups [][]int) []int {
	var out []int
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func at(msgs []Message, idx []int) []Message {
	out := make([]Message, len(idx))
	for k, i := range idx {
		out[k] = msgs[i]
	}
	return out
}
