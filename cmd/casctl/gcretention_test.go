package main

import (
	"strings"
	"testing"

	"github.com/toolcas/toolcas/store"
)

// TestGCReportsRunTTLsWithoutPolicy: on a store with no policy, gc says
// nothing of retention unless a run's own ttl removed something, and then
// says what, as text and as JSON.
func TestGCReportsRunTTLsWithoutPolicy(t *testing.T) {
	var b strings.Builder
	printRetentionRun(&b, store.RetentionResult{})
	if b.Len() != 0 || retentionRunOf(store.RetentionResult{}) != nil {
		t.Errorf("no policy, nothing removed: printed %q, JSON %+v; want nothing", b.String(), retentionRunOf(store.RetentionResult{}))
	}
	r := store.RetentionResult{Rules: []store.RuleResult{{Rule: store.RuleRunTTL, Parts: 2, Runs: []string{"brief"}}}}
	printRetentionRun(&b, r)
	if got, want := b.String(), "retention: removed 2 parts of 1 run by ttl\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	if j := retentionRunOf(r); j == nil || j.RemovedParts != 2 || len(j.Rules) != 1 || j.Rules[0].Rule != store.RuleRunTTL {
		t.Errorf("JSON %+v, want brief's 2 parts by ttl", j)
	}
}
