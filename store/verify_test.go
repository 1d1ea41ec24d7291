package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
)

func damage(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, f(b), 0o444); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyFindsDamage(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	st := mustWrite(t, s,
		item("r", 1, strings.Repeat("flip me ", 100)),
		item("r", 2, strings.Repeat("truncate me ", 100)),
		item("r", 3, strings.Repeat("delete me ", 100)),
		item("r", 4, strings.Repeat("replace me with a directory ", 10)),
		item("r", 5, strings.Repeat("fine ", 100)),
		item("r", 6, strings.Repeat("misname me ", 100)),
	)
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || !res.OK || res.Checked != 6 {
		t.Fatalf("clean store: %+v, %v", res, err)
	}
	damage(t, st[0].Path, func(b []byte) []byte { b[7] ^= 0x20; return b })
	damage(t, st[1].Path, func(b []byte) []byte { return b[:10] })
	os.Remove(st[2].Path)
	os.Chmod(st[3].Path, 0o644)
	os.Remove(st[3].Path)
	os.Mkdir(st[3].Path, 0o755)
	// Blob 6's file now holds blob 5's content.
	good, _ := os.ReadFile(st[4].Path)
	damage(t, st[5].Path, func([]byte) []byte { return good })
	orphan, _ := localOf(s).blobs.PutBytes(ctx, []byte("nobody's"), ".txt")
	os.WriteFile(filepath.Join(s.Dir(), "blobs", "00", ".tmp-crash"), []byte("x"), 0o644)

	res, err = s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK {
		t.Error("verify says OK")
	}
	reasons := map[string]string{}
	for _, p := range res.Corrupt {
		reasons[p.Path] = p.Reason
		if len(p.Keys) == 0 {
			t.Errorf("corrupt %s lists no keys", p.Path)
		}
	}
	for i, want := range map[int]string{0: "content hashes to", 1: "truncated: 10 of 1200 bytes", 3: "directory", 5: "misnamed: holds the content of " + st[4].Digest.String()} {
		if !strings.Contains(reasons[st[i].Path], want) {
			t.Errorf("part %d: reason %q, want %q", i, reasons[st[i].Path], want)
		}
	}
	if len(res.Corrupt) != 4 {
		t.Errorf("%d corrupt, want 4: %+v", len(res.Corrupt), res.Corrupt)
	}
	if len(res.Missing) != 1 || res.Missing[0].Path != st[2].Path || res.Missing[0].Keys[0] != st[2].Key {
		t.Errorf("missing = %+v", res.Missing)
	}
	if len(res.Orphans) != 1 || res.Orphans[0].Blob != orphan.Blob {
		t.Errorf("orphans = %+v", res.Orphans)
	}
	if len(res.Temp) != 1 {
		t.Errorf("temp = %+v", res.Temp)
	}
	// Reads of damaged blobs fail cleanly; the rest of the store works.
	for i := range 6 {
		c, err := s.Read(ctx, "r", st[i].Key)
		if i == 4 {
			if err != nil || string(c.Data) != string(good) {
				t.Errorf("intact part: %v", err)
			}
			continue
		}
		if err == nil {
			t.Errorf("damaged part %d read back %d bytes", i, len(c.Data))
		}
	}
	if _, err := s.Write(ctx, []hook.Item{item("r", 7, "new after damage")}); err != nil {
		t.Errorf("write after damage: %v", err)
	}
	b, _ := s.ix.Blob(ctx, cas.Blob{Digest: st[4].Digest, Ext: ".txt"})
	if b.VerifiedAt.IsZero() {
		t.Error("verified blob not marked")
	}
}

// TestVerifyBadShard puts a symbolic link, then a file, where a shard
// directory should be: the store still opens, verify reports the damage
// and the parts it hides, and checks every other blob.
func TestVerifyBadShard(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, shard string)
		reason string
	}{
		{"symbolic link", func(t *testing.T, shard string) {
			moved := filepath.Join(t.TempDir(), "moved")
			if err := os.Rename(shard, moved); err != nil {
				t.Fatal(err)
			}
			os.Symlink(moved, shard)
		}, "a symbolic link where a shard directory should be"},
		{"file", func(t *testing.T, shard string) {
			os.RemoveAll(shard)
			os.WriteFile(shard, []byte("not a directory"), 0o644)
		}, "where a shard directory should be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := MustOpenDir(t, dir, WithCreate())
			var items []hook.Item
			for i := range 20 {
				items = append(items, item("r", i, fmt.Sprintf("part %d", i)))
			}
			st := mustWrite(t, s, items...)
			s.Close()
			tc.damage(t, filepath.Dir(st[0].Path))
			s, err := Open(ctx, dir)
			if err != nil {
				t.Fatalf("open with a damaged shard: %v", err)
			}
			defer s.Close()
			res, err := s.Verify(ctx, VerifyOptions{})
			if err != nil {
				t.Fatalf("verify failed instead of reporting: %v", err)
			}
			if res.OK || len(res.Corrupt) == 0 || !strings.Contains(res.Corrupt[0].Reason, tc.reason) {
				t.Errorf("verify: ok %v, corrupt %+v; want the shard reported as damage", res.OK, res.Corrupt)
			}
			hidden := 0
			for _, x := range st {
				if filepath.Dir(x.Path) == filepath.Dir(st[0].Path) {
					hidden++
				}
			}
			if res.Checked != len(st)-hidden {
				t.Errorf("verify checked %d blobs, want the %d outside the damaged shard", res.Checked, len(st)-hidden)
			}
		})
	}
}

// TestVerifyFullIndexCheck damages one of the index's secondary indexes so
// that it no longer matches its table, as gc relies on it: verify's default
// full check reports it and fails the verify; QuickIndexCheck does not see
// it.
func TestVerifyFullIndexCheck(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := MustOpenDir(t, dir, WithCreate())
	for i := range 10 {
		mustWrite(t, s, item("r", i, fmt.Sprint("text ", i)))
	}
	s.Close()
	db, err := sql.Open("sqlite", filepath.Join(dir, "index.db"))
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
	s = MustOpenDir(t, dir)
	full, err := s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if full.OK || !strings.Contains(strings.Join(full.IndexProblems, "\n"), "parts_blob") {
		t.Errorf("Verify() = OK %v, index problems %q; want not OK, parts_blob named", full.OK, full.IndexProblems)
	}
	quick, err := s.Verify(ctx, VerifyOptions{QuickIndexCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	if !quick.OK || len(quick.IndexProblems) != 0 {
		t.Errorf("Verify(QuickIndexCheck) = OK %v, index problems %q; want OK, none (the quick check does not compare indexes with tables)", quick.OK, quick.IndexProblems)
	}
}

// TestVerifyEntryCancelled: an entry the walk found after verify's context
// was done is never hashed, so it carries the context's error, never a
// clean result.
func TestVerifyEntryCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	job := &verifyJob{shard: 0}
	it := &verifyEntry{job: job, e: cas.Entry{Kind: cas.EntryBlob}}
	job.done.Add(1)
	if err := it.submit(ctx, make(chan *verifyEntry)); !errors.Is(err, context.Canceled) {
		t.Errorf("submit with the context done = %v, want context.Canceled", err)
	}
	if !errors.Is(it.err, context.Canceled) {
		t.Errorf("the entry's error = %v, want context.Canceled", it.err)
	}
	job.done.Wait() // done, or the test hangs
}

// TestVerifyShardInTwoRuns: a walk that gives a shard's files in two runs
// fails verify rather than judging the shard's rows without the second
// run's files.
func TestVerifyShardInTwoRuns(t *testing.T) {
	ctx := context.Background()
	s := MustOpenDir(t, t.TempDir(), WithCreate())
	var a, b cas.Entry
	for i := 0; a.Blob == (cas.Blob{}) || b.Blob == (cas.Blob{}); i++ {
		bl := cas.Blob{Digest: cas.Sum(fmt.Append(nil, "content ", i)), Ext: ".txt"}
		e := cas.Entry{Kind: cas.EntryBlob, Blob: bl, RelPath: bl.RelPath()}
		switch bl.Digest[0] {
		case 0x00:
			if a.Blob == (cas.Blob{}) {
				a = e
			}
		case 0x01:
			if b.Blob == (cas.Blob{}) {
				b = e
			}
		}
	}
	var res VerifyResult
	ahead, err := newShardRows(ctx, s.ix)
	if err != nil {
		t.Fatal(err)
	}
	v := &verifier{s: s, res: &res, inPacks: map[cas.Blob]bool{}, seen: map[cas.Blob]bool{},
		mtimes: map[cas.Blob]time.Time{}, used: map[cas.Blob]index.ShardBlob{}, ahead: ahead, whole: newWholeRows(), start: s.now()}
	walk := func(ctx context.Context, fn func(cas.Entry) error) error {
		for _, e := range []cas.Entry{a, b, a} {
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	}
	if err := v.run(ctx, walk); !errors.Is(err, errWalkOrder) {
		t.Errorf("verify of a walk giving shard 00 twice = %v, want errWalkOrder", err)
	}
}

// TestVerifyMarksOnlyWhole: among many blobs, over several blocks of ids,
// verify marks verified exactly the used blobs it found whole, at its end:
// not those it found corrupt or missing, nor those no part uses, and it
// reports every one of the damaged among the whole.
func TestVerifyMarksOnlyWhole(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	var items []hook.Item
	for i := range 1500 {
		run := "keep"
		if i%10 == 3 {
			run = "gone"
		}
		items = append(items, item(run, i, fmt.Sprint("blob number ", i, " of many")))
	}
	st := mustWrite(t, s, items...)
	if _, err := s.Prune(ctx, PruneOptions{Run: "gone"}); err != nil {
		t.Fatal(err)
	}
	flipped := map[int]bool{17: true, 700: true, 1499: true}
	for i := range flipped {
		damage(t, st[i].Path, func(b []byte) []byte { b[0] ^= 0x20; return b })
	}
	const deleted = 901
	os.Remove(st[deleted].Path)
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK {
		t.Error("verify says OK")
	}
	corrupt := map[string]bool{}
	for _, p := range res.Corrupt {
		corrupt[p.Path] = true
	}
	for i := range flipped {
		if !corrupt[st[i].Path] {
			t.Errorf("part %d's flipped blob not reported corrupt", i)
		}
	}
	if len(res.Corrupt) != len(flipped) {
		t.Errorf("%d corrupt, want %d: %+v", len(res.Corrupt), len(flipped), res.Corrupt)
	}
	if len(res.Missing) != 1 || res.Missing[0].Path != st[deleted].Path {
		t.Errorf("missing = %+v, want part %d's blob", res.Missing, deleted)
	}
	if len(res.Orphans) != 150 {
		t.Errorf("%d orphans, want the 150 pruned parts' blobs", len(res.Orphans))
	}
	for i, p := range st {
		b, err := s.ix.Blob(ctx, cas.Blob{Digest: p.Digest, Ext: ".txt"})
		if err != nil {
			t.Fatal(err)
		}
		want := i%10 != 3 && !flipped[i] && i != deleted
		if got := !b.VerifiedAt.IsZero(); got != want {
			t.Errorf("part %d: marked verified %v, want %v", i, got, want)
		}
	}
}

// Without syncs, a blob is written under its own name: verify takes one
// whose writer holds it for a write under way, not for damage, and a torn
// one that nobody writes for damage.
func TestVerifyBlobWrittenInPlace(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t, WithDurability(cas.SyncNone))
	mustWrite(t, s, item("r", 1, strings.Repeat("whole ", 100)))
	data := []byte(strings.Repeat("being written ", 100))
	b := cas.Blob{Digest: cas.Sum(data), Ext: ".txt"}
	path := localOf(s).blobs.Path(b)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:10], 0o444); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := cas.LockTempFile(f); err != nil {
		t.Fatal(err)
	}
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || !res.OK || len(res.Corrupt) > 0 || len(res.Orphans) > 0 || res.Checked != 1 {
		t.Fatalf("verify while a blob is written: %+v, %v", res, err)
	}
	f.Close()
	res, err = s.Verify(ctx, VerifyOptions{})
	if err != nil || res.OK || len(res.Corrupt) != 1 || res.Corrupt[0].Path != path {
		t.Fatalf("verify of a torn blob nobody writes: %+v, %v", res, err)
	}
}
