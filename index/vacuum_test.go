package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// leafOrder returns the share of a table's leaf pages, taken in key order,
// that lie right after the one before in the file (SQLite's dbstat).
func leafOrder(t *testing.T, x *Index, table string) float64 {
	t.Helper()
	var pages []int64
	if err := x.db.SelectContext(context.Background(), &pages,
		`SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY path`, table); err != nil {
		t.Fatal(err)
	}
	if len(pages) < 100 {
		t.Fatalf("%s has %d leaf pages: too few to tell their order", table, len(pages))
	}
	next := 0
	for i := 1; i < len(pages); i++ {
		if pages[i] == pages[i-1]+1 {
			next++
		}
	}
	return float64(next) / float64(len(pages)-1)
}

// dump returns every row of the index's part and blob tables, as text.
func dump(t *testing.T, x *Index) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"runs", "parts", "blobs"} {
		rows, err := x.db.QueryContext(context.Background(), `SELECT * FROM `+table+` ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]sql.RawBytes, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %q\n", table, vals)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// Vacuum keeps every row as it was, gives the free pages back, and lays
// out a table whose pages rows written over time had spread across the
// file in the order of its keys; on PostgreSQL it is unsupported.
func TestVacuum(t *testing.T) { forEachBackend(t, testVacuum) }

func testVacuum(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	if x.IsPostgres() {
		if _, err := x.Vacuum(ctx); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "PostgreSQL") {
			t.Errorf("Vacuum on PostgreSQL = %v, want errors.ErrUnsupported naming PostgreSQL", err)
		}
		return
	}
	// Steps one at a time, as writers make them: each adds to the runs,
	// parts and blobs tables and their indexes, page by page in turn.
	for i := range 3000 {
		mustRecord(t, x, stepPart(i, true))
	}
	if _, err := x.db.ExecContext(ctx, `DELETE FROM parts WHERE step % 3 = 0`); err != nil {
		t.Fatal(err)
	}
	want := dump(t, x)
	if got := leafOrder(t, x, "parts"); got > 0.5 {
		t.Fatalf("before Vacuum, %.2f of the parts' leaf pages follow the one before: the test needs them spread", got)
	}
	res, err := x.Vacuum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Free == 0 || res.After >= res.Before {
		t.Errorf("Vacuum = %+v, want free pages before and a smaller database after", res)
	}
	if free, _ := freePages(t, x); free != 0 {
		t.Errorf("%d free pages after Vacuum, want none", free)
	}
	if got := leafOrder(t, x, "parts"); got < 0.9 {
		t.Errorf("after Vacuum, %.2f of the parts' leaf pages follow the one before, want at least 0.9", got)
	}
	if got := dump(t, x); got != want {
		t.Errorf("rows after Vacuum differ from the rows before")
	}
	var check string
	if err := x.db.GetContext(ctx, &check, `PRAGMA integrity_check`); err != nil || check != "ok" {
		t.Errorf("integrity_check after Vacuum = %q, %v", check, err)
	}
	// Still an index that records and resolves.
	p := stepPart(5000, true)
	mustRecord(t, x, p)
	if got, err := x.Resolve(ctx, mustParse(t, p.Key), ""); err != nil || got.Blob != p.Blob {
		t.Errorf("Resolve(%s) after Vacuum = %v, %v", p.Key, got.Blob, err)
	}
}
