package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// shardRowsOf reads the rows of the blobs' shards, by blob.
func shardRowsOf(t *testing.T, x *Index, blobs ...cas.Blob) map[cas.Blob]ShardBlob {
	t.Helper()
	out := map[cas.Blob]ShardBlob{}
	for _, b := range blobs {
		rows, err := x.BlobsInShard(context.Background(), b.Digest[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.ID == 0 {
				t.Errorf("row of %s without an id", r.Blob)
			}
			out[r.Blob] = r
		}
	}
	return out
}

func TestDeleteUnusedRows(t *testing.T) { forEachBackend(t, testDeleteUnusedRows) }

func testDeleteUnusedRows(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1_000_000, 0)}
	x := MustOpen(t, WithClock(c.now))
	used, old, young := newPart("keep", 1, "t", "c", "used"), newPart("gone", 1, "t", "c", "old"), newPart("young", 1, "t", "c", "young")
	other := newPart("gone", 2, "t", "c", "old too")
	mustRecord(t, x, used, old, other)
	c.t = c.t.Add(time.Hour)
	mustRecord(t, x, young)
	for _, run := range []string{"gone", "young"} {
		if _, err := x.Prune(ctx, PruneOptions{Run: run}); err != nil {
			t.Fatal(err)
		}
	}
	rows := shardRowsOf(t, x, used.Blob, old.Blob, young.Blob, other.Blob)
	ids := func(bs ...cas.Blob) []BlobID {
		var out []BlobID
		for _, b := range bs {
			out = append(out, BlobID{ID: rows[b].ID, Blob: b})
		}
		return out
	}
	cutoff := c.t.Add(-30 * time.Minute)
	// A row whose id names another blob now is left alone; the rest go.
	wrong := ids(old.Blob, other.Blob)
	wrong[0].Blob = young.Blob
	if gone, err := x.DeleteUnusedRows(ctx, wrong, cutoff, c.t); err != nil || len(gone) != 1 || gone[0] != other.Blob {
		t.Errorf("delete of an id of another blob and a row of its blob = %v, %v; want only %s", gone, err, other.Blob)
	}
	if _, err := x.Blob(ctx, old.Blob); err != nil {
		t.Errorf("the row whose id was given with another blob went: %v", err)
	}
	if _, err := x.Blob(ctx, other.Blob); !errors.Is(err, ErrNotFound) {
		t.Errorf("old unused row given with its blob: %v, want it gone", err)
	}
	gone, err := x.DeleteUnusedRows(ctx, ids(used.Blob, old.Blob, young.Blob), cutoff, c.t)
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 1 || gone[0] != old.Blob {
		t.Errorf("deleted %v; want only the old unused row", gone)
	}
	if _, err := x.Blob(ctx, old.Blob); !errors.Is(err, ErrNotFound) {
		t.Errorf("old unused row: %v, want it gone", err)
	}
	for _, b := range []cas.Blob{used.Blob, young.Blob} {
		if _, err := x.Blob(ctx, b); err != nil {
			t.Errorf("row of %s: %v, want it kept", b, err)
		}
	}
	// With the clock at or before the cutoff, every unused row is old.
	gone, err = x.DeleteUnusedRows(ctx, ids(used.Blob, young.Blob), c.t, c.t)
	if err != nil || len(gone) != 1 || gone[0] != young.Blob {
		t.Errorf("delete with no grace = %v, %v; want the young unused row", gone, err)
	}
	if gone, err := x.DeleteUnusedRows(ctx, nil, c.t, c.t); err != nil || len(gone) != 0 {
		t.Errorf("delete of nothing = %v, %v", gone, err)
	}
}

func TestBlobsWithRows(t *testing.T) { forEachBackend(t, testBlobsWithRows) }

func testBlobsWithRows(t *testing.T) {
	ctx := context.Background()
	x := MustOpen(t)
	var parts []NewPart
	var want []cas.Blob
	for i := range rowsChunk + 10 {
		p := newPart("r", i, "t", "c", string(rune('a'+i%26))+time.Duration(i).String())
		parts = append(parts, p)
		want = append(want, p.Blob)
	}
	mustRecord(t, x, parts...)
	other := cas.Blob{Digest: cas.Sum([]byte("no row")), Ext: ".txt"}
	otherExt := cas.Blob{Digest: parts[0].Blob.Digest, Ext: ".bin"}
	has, err := x.BlobsWithRows(ctx, append(slices.Clone(want), other, otherExt))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range want {
		if !has[b] {
			t.Errorf("%s has a row, not found", b)
		}
	}
	if has[other] || has[otherExt] || len(has) != len(want) {
		t.Errorf("found %d blobs with rows, want %d, not %s or %s", len(has), len(want), other, otherExt)
	}
}

// TestMarkVerifiedIDTaken: verify read a row, gc deleted it, and a
// writer's new row for another blob took its id, with a clock that stepped
// back so that the new row looks stored before the check began, or at the
// same time. Marking the id verify read must not mark the new row, whose
// file verify never hashed.
func TestMarkVerifiedIDTaken(t *testing.T) { forEachBackend(t, testMarkVerifiedIDTaken) }

func testMarkVerifiedIDTaken(t *testing.T) {
	for _, tc := range []struct {
		name string
		// back is how far before the check's start the new row is stored.
		back time.Duration
	}{
		{"clock stepped back", time.Hour},
		{"same time", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := &clock{time.Unix(1_000_000, 0)}
			x := MustOpen(t, WithClock(c.now))
			keep, read := newPart("keep", 1, "t", "c", "keep"), newPart("gone", 1, "t", "c", "read by verify")
			mustRecord(t, x, keep)
			mustRecord(t, x, read)
			c.t = c.t.Add(time.Hour)
			since := c.t
			readID := shardRowsOf(t, x, read.Blob)[read.Blob].ID
			if _, err := x.Prune(ctx, PruneOptions{Run: "gone"}); err != nil {
				t.Fatal(err)
			}
			if gone, err := x.DeleteUnusedRows(ctx, []BlobID{{ID: readID, Blob: read.Blob}}, c.t, c.t); err != nil || len(gone) != 1 {
				t.Fatalf("gc's delete = %v, %v", gone, err)
			}
			c.t = since.Add(-tc.back)
			fresh := newPart("new", 1, "t", "c", "never hashed")
			mustRecord(t, x, fresh)
			freshID := shardRowsOf(t, x, fresh.Blob)[fresh.Blob].ID
			if !onPostgres(t) && freshID != readID {
				t.Fatalf("SQLite gave the new row id %d, not the deleted row's %d", freshID, readID)
			}
			// On PostgreSQL ids are never given again: the mark names the
			// new row's id with the blob verify read, as SQLite's reuse does.
			c.t = since.Add(time.Minute)
			if err := x.MarkVerifiedChecked(ctx, []CheckedRow{{ID: freshID, Check: RowCheck(read.Blob.Digest, read.Blob.Ext)}}, since, c.t); err != nil {
				t.Fatal(err)
			}
			if r, err := x.Blob(ctx, fresh.Blob); err != nil || !r.VerifiedAt.IsZero() {
				t.Errorf("the new row under the id verify read: verified at %v, %v; want never", r.VerifiedAt, err)
			}
		})
	}
}

// TestMarkVerifiedStoredAtStart: a row first stored at the very time
// the check began may have been stored after verify read the row whose id
// it took, the same blob stored again: it is left for the next verify.
func TestMarkVerifiedStoredAtStart(t *testing.T) {
	forEachBackend(t, testMarkVerifiedStoredAtStart)
}

func testMarkVerifiedStoredAtStart(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Unix(1_000_000, 0)}
	x := MustOpen(t, WithClock(c.now))
	p := newPart("r", 1, "t", "c", "stored again at the start")
	mustRecord(t, x, p)
	since := c.t
	id := shardRowsOf(t, x, p.Blob)[p.Blob].ID
	if err := x.MarkVerifiedChecked(ctx, []CheckedRow{{ID: id, Check: RowCheck(p.Blob.Digest, p.Blob.Ext)}}, since, since.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if r, err := x.Blob(ctx, p.Blob); err != nil || !r.VerifiedAt.IsZero() {
		t.Errorf("a row stored when the check began: verified at %v, %v; want never", r.VerifiedAt, err)
	}
}

func TestQuickCheck(t *testing.T) { forEachBackend(t, testQuickCheck) }

func testQuickCheck(t *testing.T) {
	x := MustOpen(t)
	mustRecord(t, x, newPart("r", 1, "t", "c", "a"))
	if p, err := x.QuickCheck(context.Background()); err != nil || len(p) != 0 {
		t.Errorf("QuickCheck of a sound index = %q, %v", p, err)
	}
}

// TestQuickCheckMissesWhatIntegrityCheckFinds damages an index so that one
// of its secondary indexes no longer matches its table (its definition
// changed under it, as a bad write to the schema would): the quick check,
// which reads every page but not every index against its table, passes;
// the full integrity check names the index. That is why verify runs the
// full check unless told --quick-index-check.
func TestQuickCheckMissesWhatIntegrityCheckFinds(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "index.db")
	x, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustRecord(t, x, newPart("r", i, "t", fmt.Sprint("c", i), fmt.Sprint("content ", i)))
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`PRAGMA writable_schema = ON`,
		`UPDATE sqlite_schema SET sql = 'CREATE INDEX parts_blob ON parts (blob_id, step)' WHERE name = 'parts_blob'`,
		`PRAGMA writable_schema = OFF`,
	} {
		if _, err := db.Exec(q); err != nil {
			db.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	x, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if p, err := x.QuickCheck(ctx); err != nil || len(p) != 0 {
		t.Errorf("QuickCheck = %q, %v; want nothing found (it does not compare indexes with tables)", p, err)
	}
	p, err := x.IntegrityCheck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) == 0 || !strings.Contains(strings.Join(p, "\n"), "parts_blob") {
		t.Errorf("IntegrityCheck = %q, want the damaged index parts_blob named", p)
	}
}
