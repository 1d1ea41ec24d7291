package index

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/internal/pgtest"
)

// schemaShape is what must match between the SQLite and the PostgreSQL
// schema of one version: each table's columns and whether they may be
// NULL, the column lists each table keeps unique (primary keys included),
// and each plain index by name with its table and columns.
type schemaShape struct {
	columns map[string]bool   // "table.column": NOT NULL
	unique  map[string]bool   // "table(col,col)"
	indexes map[string]string // name: "table(col,col)"
}

func newShape() schemaShape {
	return schemaShape{columns: map[string]bool{}, unique: map[string]bool{}, indexes: map[string]string{}}
}

type sqliteColumn struct {
	Name    string `db:"name"`
	NotNull bool   `db:"notnull"`
	PK      int    `db:"pk"`
}

func sqliteShape(t *testing.T, x *Index) schemaShape {
	ctx := context.Background()
	s := newShape()
	var tables []string
	if err := x.db.SelectContext(ctx, &tables, `SELECT name FROM sqlite_master WHERE type = 'table'
		AND name NOT LIKE 'sqlite_%' AND name <> 'goose_db_version'`); err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		var cols []sqliteColumn
		if err := x.db.SelectContext(ctx, &cols, `SELECT name, "notnull", pk FROM pragma_table_info(?)`, tb); err != nil {
			t.Fatal(err)
		}
		var pk []string
		slices.SortFunc(cols, func(a, b sqliteColumn) int { return a.PK - b.PK })
		for _, c := range cols {
			s.columns[tb+"."+c.Name] = c.NotNull || c.PK > 0
			if c.PK > 0 {
				pk = append(pk, c.Name)
			}
		}
		if len(pk) > 0 {
			s.unique[tb+"("+strings.Join(pk, ",")+")"] = true
		}
		var idx []struct {
			Name   string `db:"name"`
			Unique bool   `db:"unique"`
		}
		if err := x.db.SelectContext(ctx, &idx, `SELECT name, "unique" FROM pragma_index_list(?)`, tb); err != nil {
			t.Fatal(err)
		}
		for _, i := range idx {
			var icols []string
			// An index of an expression has no column name: "expr".
			if err := x.db.SelectContext(ctx, &icols, `SELECT coalesce(name, 'expr') FROM pragma_index_info(?) ORDER BY seqno`, i.Name); err != nil {
				t.Fatal(err)
			}
			shape := tb + "(" + strings.Join(icols, ",") + ")"
			if i.Unique {
				s.unique[shape] = true
			} else {
				s.indexes[i.Name] = shape
			}
		}
	}
	return s
}

func postgresShape(t *testing.T, x *Index) schemaShape {
	ctx := context.Background()
	s := newShape()
	var cols []struct {
		Table   string `db:"table_name"`
		Column  string `db:"column_name"`
		NotNull bool   `db:"not_null"`
	}
	if err := x.db.SelectContext(ctx, &cols, `SELECT c.relname AS table_name, a.attname AS column_name, a.attnotnull AS not_null
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname <> 'goose_db_version'
		AND a.attnum > 0 AND NOT a.attisdropped`); err != nil {
		t.Fatal(err)
	}
	for _, c := range cols {
		s.columns[c.Table+"."+c.Column] = c.NotNull
	}
	var idx []struct {
		Table   string `db:"table_name"`
		Name    string `db:"index_name"`
		Unique  bool   `db:"is_unique"`
		Columns string `db:"columns"`
	}
	if err := x.db.SelectContext(ctx, &idx, `SELECT t.relname AS table_name, i.relname AS index_name, ix.indisunique AS is_unique,
		array_to_string(ARRAY(SELECT coalesce(a.attname, 'expr') FROM unnest(ix.indkey) WITH ORDINALITY AS k(attnum, ord)
			LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY k.ord), ',') AS columns
		FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid JOIN pg_class t ON t.oid = ix.indrelid
		JOIN pg_namespace n ON n.oid = t.relnamespace
		WHERE n.nspname = current_schema() AND t.relname <> 'goose_db_version'`); err != nil {
		t.Fatal(err)
	}
	for _, i := range idx {
		shape := i.Table + "(" + i.Columns + ")"
		if i.Unique {
			s.unique[shape] = true
		} else {
			s.indexes[i.Name] = shape
		}
	}
	return s
}

// The SQLite and the PostgreSQL schema, each migrated to the latest
// version, have the same tables and columns, the same NOT NULL columns,
// the same unique column lists and the same indexes, by name and columns.
func TestSchemasMatch(t *testing.T) {
	ctx := context.Background()
	lite, err := Open(ctx, filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	pg, err := Open(ctx, pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	a, b := sqliteShape(t, lite), postgresShape(t, pg)
	if len(a.columns) == 0 || len(a.unique) == 0 || len(a.indexes) == 0 {
		t.Fatalf("SQLite schema read as %+v: the test reads nothing", a)
	}
	diff := func(what string, x, y map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if v, ok := y[k]; !ok || v != x[k] {
				t.Errorf("%s %s: SQLite %s, PostgreSQL %s", what, k, x[k], orMissing(v, ok))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(y)) {
			if _, ok := x[k]; !ok {
				t.Errorf("%s %s: SQLite missing, PostgreSQL %s", what, k, y[k])
			}
		}
	}
	str := func(m map[string]bool) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = fmt.Sprint(v)
		}
		return out
	}
	diff("column (NOT NULL)", str(a.columns), str(b.columns))
	diff("unique", str(a.unique), str(b.unique))
	// PostgreSQL finds the blobs the search index lags behind by an index
	// of them; SQLite by search_state.low (see the migrations' 00011).
	if b.indexes["blobs_unsearched"] != "blobs(id)" {
		t.Errorf("PostgreSQL index blobs_unsearched: %q, want blobs(id)", b.indexes["blobs_unsearched"])
	}
	delete(b.indexes, "blobs_unsearched")
	diff("index", a.indexes, b.indexes)
}

func orMissing(v string, ok bool) string {
	if !ok {
		return "missing"
	}
	return v
}
