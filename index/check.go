package index

import (
	"context"
	"fmt"
)

// QuickCheck runs SQLite's quick check and returns what it found wrong,
// nothing when the database is sound. It reads every page, as the
// integrity check does, and checks each page's structure, the order of
// its keys and the table's constraints, but not that every index holds
// exactly its table's rows: it costs a pass over the database instead of a
// search of each index for each row, a few times less than IntegrityCheck
// on a large index. On PostgreSQL it only makes sure the server answers,
// as IntegrityCheck does.
func (x *Index) QuickCheck(ctx context.Context) ([]string, error) {
	if x.pg {
		return x.IntegrityCheck(ctx)
	}
	lines, err := x.pragmaCheck(ctx, `PRAGMA quick_check`)
	if err != nil {
		return nil, fmt.Errorf("quick check: %w", err)
	}
	return lines, nil
}

// pragmaCheck runs q, SQLite's integrity_check or quick_check, and returns
// the lines of what it found wrong: none when its one line is "ok".
func (x *Index) pragmaCheck(ctx context.Context, q string) ([]string, error) {
	lines, err := selectRows[string](ctx, x, q)
	if err != nil || len(lines) == 1 && lines[0] == "ok" {
		return nil, err
	}
	return lines, nil
}
