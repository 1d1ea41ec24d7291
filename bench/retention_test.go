package main

import (
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/hook"
)

// TestCopyResults: a copy renames call ids and marks every text part over
// the threshold, so that no copy dedups against another, and leaves copy
// 0, and what stays in the conversation, as recorded.
func TestCopyResults(t *testing.T) {
	big := strings.Repeat("x", 30)
	rs := []hook.Result{
		{Tool: "bash", CallID: "c1", Parts: []hook.Part{hook.Text(big)}},
		{Tool: "bash", CallID: "", Parts: []hook.Part{hook.Text("short")}},
	}
	got, n := copyResults(rs, 0, 20)
	if n != 1 || got[0].CallID != "c1" || got[0].Parts[0].Text != big {
		t.Errorf("copy 0 = %+v, %d big", got, n)
	}
	got, n = copyResults(rs, 3, 20)
	if n != 1 || got[0].CallID != "c1-copy3" || got[0].Parts[0].Text != big+"\n[copy3]\n" {
		t.Errorf("copy 3 of the big result = %+v, %d big", got[0], n)
	}
	if got[1].CallID != "" || got[1].Parts[0].Text != "short" {
		t.Errorf("copy 3 of the short result = %+v", got[1])
	}
	if rs[0].Parts[0].Text != big || rs[0].CallID != "c1" {
		t.Errorf("copying changed the original: %+v", rs[0])
	}
}

// TestRetentionTargets: the goals read the passes as they should.
func TestRetentionTargets(t *testing.T) {
	rep := retentionReport{Passes: []retentionPass{
		{Quota: 0, P99: 10},
		{Quota: 100, P99: 11, MaxOver: 1.05},
		{Quota: 100, P99: 13, MaxOver: 1.2, ActiveRemoved: 1},
		{Quota: 0, P99: 10},
	}}
	ts := retentionTargets(rep)
	if len(ts) != 3 {
		t.Fatalf("%d targets", len(ts))
	}
	if ts[0].Met || ts[0].Value != 1.2 {
		t.Errorf("size target %+v: want 1.2, not met", ts[0])
	}
	if ts[1].Met || ts[1].Value != 1.3 {
		t.Errorf("p99 target %+v: want the upper median rounds' 13/10, not met", ts[1])
	}
	if ts[2].Met || ts[2].Value != 1 {
		t.Errorf("active target %+v: want 1 removal, not met", ts[2])
	}
	if q := quantileSorted([]time.Duration{1, 2, 3, 4}, 0.99); q != 4 {
		t.Errorf("p99 of 4 = %v", q)
	}
}
