package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// oldRow is a part as toolcas wrote it before keys read as Haystack's: the
// call id escaped ('_' as %5F, an id that looked like a number or like
// call{index} with its first byte escaped).
type oldRow struct {
	key, tool, call, text string
	step                  int
}

var oldRows = []oldRow{
	{"r/1_t_toolu%5F01A.txt", "t", "toolu_01A", "anthropic id", 1},
	{"r/2_search_call%5F00%5Fyjs8KtEk.txt", "search", "call_00_yjs8KtEk", "deepseek id", 2},
	{"r/3_search_%63all7.txt", "search", "call7", "call7", 3},
	{"r/3_search_call7.txt", "search", "", "empty id at index 7", 3},
	{"r/1_a_%31.txt", "a", "1", "numeric id", 1},
	{"r/4_a_b%5Fc.txt", "a", "b_c", "tool a, call b_c", 4},
}

// TestOldKeysResolve opens a store whose rows were written with the old
// escaping, as an earlier build left them: every old key still resolves
// to its content, new writes of the same calls get today's keys (or a
// version of the old key where it reads the same), and a new call whose key
// renders like an old one of another call gets "~2".
func TestOldKeysResolve(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Open(ctx, dir, WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range oldRows {
		put, err := localOf(s).blobs.PutBytes(ctx, []byte(r.text), ".txt")
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Exec(`INSERT INTO blobs (digest, ext, size, first_stored, last_referenced) SELECT ?, '.txt', ?, 1, 1
			WHERE NOT EXISTS (SELECT 1 FROM blobs WHERE digest = ? AND ext = '.txt')`, put.Blob.Digest[:], len(r.text), put.Blob.Digest[:])
		if err == nil {
			_, err = db.Exec(`INSERT INTO runs (name, prefix) VALUES ('r', 'r/') ON CONFLICT DO NOTHING`)
		}
		if err == nil {
			_, err = db.Exec(`INSERT INTO parts (run_id, key, step, tool, call_id, part, version, kind, mime, filename, chars, bytes, blob_id, created_at)
				SELECT (SELECT id FROM runs WHERE name = 'r'), ?, ?, ?, ?, -1, 1, 'text', '', '', ?, ?, id, ? FROM blobs WHERE digest = ? AND ext = '.txt'`,
				strings.TrimPrefix(r.key, "r/"), r.step, r.tool, r.call, len(r.text), len(r.text), 1000+i, put.Blob.Digest[:])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s.Close()

	s, err = Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, r := range oldRows {
		c, err := s.Read(ctx, "r", r.key)
		if err != nil || string(c.Data) != r.text {
			t.Errorf("old key %q: %v, %v; want %q", r.key, c, err, r.text)
		}
	}
	for _, tc := range []struct {
		k       hook.Key
		key     string
		version int
	}{
		// Today's key for an id that was escaped: a new key.
		{hook.Key{Run: "r", Step: 1, Tool: "t", CallID: "toolu_01A", Part: -1, Ext: ".txt"}, "r/1_t_toolu_01A.txt", 1},
		// The empty id at index 7 renders as it did: a new version.
		{hook.Key{Run: "r", Step: 3, Tool: "search", Index: 7, Part: -1, Ext: ".txt"}, "r/3_search_call7.txt", 2},
		// The call7 id now renders like the empty id's old key: "~2".
		{hook.Key{Run: "r", Step: 3, Tool: "search", CallID: "call7", Part: -1, Ext: ".txt"}, "r/3_search_call7~2.txt", 1},
		{hook.Key{Run: "r", Step: 4, Tool: "a_b", CallID: "c", Part: -1, Ext: ".txt"}, "r/4_a_b_c.txt", 1},
		{hook.Key{Run: "r", Step: 4, Tool: "a", CallID: "b_c", Part: -1, Ext: ".txt"}, "r/4_a_b_c~2.txt", 1},
	} {
		st, err := s.Write(ctx, []hook.Item{{Key: tc.k, Part: hook.Text("new " + tc.key)}})
		if err != nil {
			t.Fatal(err)
		}
		if st[0].Key != tc.key || st[0].Version != tc.version {
			t.Errorf("Write(%+v) = %q v%d, want %q v%d", tc.k, st[0].Key, st[0].Version, tc.key, tc.version)
		}
		if c, err := s.Read(ctx, "r", tc.key); err != nil || string(c.Data) != "new "+tc.key {
			t.Errorf("Read(%q) = %v, %v", tc.key, c, err)
		}
	}
	// Old pointers still show what they showed, but for the one key a new
	// version was added to, whose old version stays readable by path.
	for _, r := range oldRows {
		if r.key == "r/3_search_call7.txt" {
			continue
		}
		if c, err := s.Read(ctx, "r", r.key); err != nil || string(c.Data) != r.text {
			t.Errorf("after new writes, old key %q: %v, %v", r.key, c, err)
		}
	}
	if vs, err := s.ix.Versions(ctx, "r/3_search_call7.txt"); err != nil || len(vs) != 2 {
		t.Errorf("versions of r/3_search_call7.txt: %d, %v; want 2", len(vs), err)
	}
}
