package migrations

import (
	"io/fs"
	"strings"
	"testing"
)

// The PostgreSQL migrations hold no '?': the index's connections rewrite
// every '?' of the SQL they run to a $n placeholder, wherever it stands
// (a string, a comment, a jsonb operator), so a '?' would break them.
func TestPostgresMigrationsHaveNoQuestionMark(t *testing.T) {
	n := 0
	err := fs.WalkDir(Postgres(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := fs.ReadFile(Postgres(), path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "?") {
				t.Errorf("%s:%d has a '?', which the index's placeholder rewriting would turn into $n: %s", path, i+1, line)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no PostgreSQL migrations found")
	}
}
