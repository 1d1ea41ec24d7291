// Package summarizertest checks a compact.Summarizer against
// compact.Summarization: the test every adapter's Summarizer runs, with its
// model scripted to reply with a summary.
package summarizertest

import (
	"context"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/compact"
)

// The conversation Compacts compacts: an old turn the summary replaces, and
// the current question, which stays.
const (
	OldQuestion = "how did the old deploy go?"
	OldAnswer   = "the old deploy went fine."
	Question    = "and the new one?"
)

// Compacts has a trigger compact, through a Summarization on s, a
// conversation of a system message, an old turn and the current question,
// and checks that the result is the system message, summary (the reply s's
// model was scripted to give) and the question. The caller then checks
// what its model was sent: compact.DefaultSummaryInstruction as the system
// and a user message holding OldQuestion, not Question.
func Compacts(t testing.TB, s compact.Summarizer, summary string) {
	t.Helper()
	c, err := compact.NewSummarization(s, compact.SummarizationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []compact.Message{
		{Role: compact.RoleSystem, Text: "You are a helpful agent."},
		{Role: compact.RoleUser, Text: strings.Repeat(OldQuestion+" ", 40)},
		{Role: compact.RoleAssistant, Text: strings.Repeat(OldAnswer+" ", 40)},
		{Role: compact.RoleUser, Text: Question},
	}
	trigger, err := compact.NewTrigger(c, compact.Approximate().Count(msgs)*5/4)
	if err != nil {
		t.Fatal(err)
	}
	out, _, compacted, err := trigger.Before(context.Background(), msgs, 0)
	if err != nil || !compacted {
		t.Fatalf("compacted %v, error %v", compacted, err)
	}
	if len(out) != 3 || out[0].Text != msgs[0].Text || out[2].Text != msgs[3].Text || out[1].Role != compact.RoleUser ||
		!strings.Contains(out[1].Text, summary) {
		t.Errorf("compacted conversation %+v, want the system message, the summary, the current question", out)
	}
}
