package index

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/catalog"
)

// listRunQueries are List's reads of one run's newest parts, with every
// combination of the filters, and their arguments but the run, the oldest
// time and the limit.
func listRunQueries() (qs []string, args [][]any) {
	for _, tool := range []bool{false, true} {
		for _, kind := range []bool{false, true} {
			for _, allv := range []bool{false, true} {
				var a []any
				if tool {
					a = append(a, "t4")
				}
				if kind {
					a = append(a, string(catalog.KindText))
				}
				qs = append(qs, listRunSQL(tool, kind, allv))
				args = append(args, a)
			}
		}
	}
	return qs, args
}

// listPlanIndex fills an index for the plan tests of List: runs of many
// parts of several tools.
func listPlanIndex(t *testing.T) *Index {
	x := MustOpen(t)
	var ps []NewPart
	for i := range 600 {
		ps = append(ps, newPart(fmt.Sprint("r", i%7), i, fmt.Sprint("t", i%25), fmt.Sprint("c", i), fmt.Sprint("content ", i%50)))
	}
	mustRecord(t, x, ps...)
	return x
}

// TestListNewestPlans checks that List's read of a run's newest parts is a
// search of parts_run from the run's newest end, sorting nothing, whatever
// the filters, and that ordering the runs reads the counters, not parts.
func TestListNewestPlans(t *testing.T) {
	ctx := context.Background()
	x := listPlanIndex(t)
	if _, err := x.db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	walk := func(plan string) bool {
		return strings.Contains(plan, "SEARCH p USING INDEX parts_run (run_id=? AND created_at>?)") &&
			!strings.Contains(plan, "SCAN p") && !strings.Contains(plan, "SCAN parts") && !strings.Contains(plan, "TEMP B-TREE")
	}
	// The check sees the plain query's scan and sort.
	if plan := explain(t, x, `SELECT `+partColumns+` FROM parts p JOIN blobs b ON b.id = p.blob_id
		ORDER BY p.created_at DESC, p.id DESC LIMIT 50`); walk(plan) {
		t.Errorf("the plain query passes for a walk of parts_run:\n%s", plan)
	}
	qs, args := listRunQueries()
	for i, q := range qs {
		plan := explain(t, x, q, append(append([]any{3}, args[i]...), 100, 50)...)
		t.Logf("%s:\n%s", q, plan)
		if !walk(plan) {
			t.Errorf("a run's newest parts are not a walk of parts_run:\n%s\n%s", q, plan)
		}
	}
	for _, tc := range []struct {
		q    string
		args []any
	}{{listGroupsSQL(false), []any{0}}, {listGroupsSQL(true), []any{"t4", 0}}} {
		plan := explain(t, x, tc.q, tc.args...)
		t.Logf("%s:\n%s", tc.q, plan)
		for _, line := range strings.Split(plan, "\n") {
			if f := strings.Fields(line); len(f) > 1 && (f[0] == "SCAN" || f[0] == "SEARCH") && f[1] != "counts" {
				t.Errorf("ordering the runs reads %s:\n%s", f[1], plan)
			}
		}
	}
}

// TestListNewestPlansPostgres checks on PostgreSQL that List's read of a
// run's newest parts searches parts_run by run and time, whatever the
// filters, and that ordering the runs reads the counters, not parts.
func TestListNewestPlansPostgres(t *testing.T) { t.Run("postgres", testListNewestPlansPostgres) }

func testListNewestPlansPostgres(t *testing.T) {
	x := listPlanIndex(t)
	explainPG := pgExplainer(t, x)
	// PostgreSQL may read a small run's rows through the index as a bitmap
	// and sort them rather than walk it in order: either is a search of
	// parts_run by the run and the time, never a scan of parts.
	walk := func(plan string) bool {
		return strings.Contains(plan, "parts_run") && !strings.Contains(plan, "Seq Scan on parts") &&
			strings.Contains(plan, "Index Cond: ((run_id = '3'::bigint) AND (created_at >= '100'::bigint))")
	}
	if plan := explainPG(`SELECT ` + partColumns + ` FROM parts p JOIN blobs b ON b.id = p.blob_id
		ORDER BY p.created_at DESC, p.id DESC LIMIT 50`); walk(plan) {
		t.Errorf("the plain query passes for a search of parts_run:\n%s", plan)
	}
	qs, args := listRunQueries()
	for i, q := range qs {
		plan := explainPG(q, append(append([]any{3}, args[i]...), 100, 50)...)
		t.Logf("%s:\n%s", q, plan)
		if !walk(plan) {
			t.Errorf("a run's newest parts are not a walk of parts_run:\n%s\n%s", q, plan)
		}
	}
	for _, tc := range []struct {
		q    string
		args []any
	}{{listGroupsSQL(false), []any{0}}, {listGroupsSQL(true), []any{"t4", 0}}} {
		plan := explainPG(tc.q, tc.args...)
		t.Logf("%s:\n%s", tc.q, plan)
		if strings.Contains(plan, " on parts") || strings.Contains(plan, "using parts") {
			t.Errorf("ordering the runs reads parts:\n%s\n%s", tc.q, plan)
		}
	}
}
