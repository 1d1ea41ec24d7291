package store

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/internal/pgtest"
	"github.com/toolcas/toolcas/s3blob"
)

// The object store stops in the middle of a write of two parts, after the
// first blob went up and before the second: the write fails with an error
// that says the object store is unreachable, no row is committed, and the
// same write succeeds once the server is back on the same directory and
// port; verify then finds everything whole.
func TestRemoteObjectStoreStopsMidWrite(t *testing.T) {
	ctx := context.Background()
	e := startRemoteAlone(t)
	var puts atomic.Int64
	s := mustOpenRemote(t, e, withFaults(func(point string) error {
		if point == "remote:put" && puts.Add(1) == 2 {
			e.srv.Kill()
		}
		return nil
	}), WithS3Options(s3blob.WithMaxAttempts(1)))
	items := []hook.Item{item("r", 1, "first part, stored before the server stops"), item("r", 2, "second part")}
	_, err := s.Write(ctx, items)
	if !errors.Is(err, s3blob.ErrUnreachable) {
		t.Fatalf("Write with the object store stopped = %v, want ErrUnreachable", err)
	}
	t.Logf("the writer's error: %v", err)
	if st, err := s.Stats(ctx, ""); err != nil || st.Parts != 0 {
		t.Fatalf("Stats after the failed write = %+v, %v; want no part", st, err)
	}
	e.srv.Restart(t)
	st, err := s.Write(ctx, items)
	if err != nil {
		t.Fatalf("the same write after the restart: %v", err)
	}
	for i, x := range st {
		c, err := s.Read(ctx, "", x.Key)
		if err != nil || string(c.Data) != items[i].Part.Text {
			t.Errorf("Read(%s) = %v, %v", x.Key, c, err)
		}
	}
	if v, err := s.Verify(ctx, VerifyOptions{}); err != nil || !v.OK || v.Checked != 2 {
		t.Errorf("Verify = %+v, %v", v, err)
	}
}

// PostgreSQL stops after a write's blob went up and before its row is
// committed: the write fails with an error that says the database is
// unreachable, no row is there once it is back, and the same write then
// succeeds (a dedup hit on the blob already up) on the same store.
func TestRemoteIndexStopsMidWrite(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	c := pgtest.Shared(t)
	var records atomic.Int64
	var down atomic.Bool
	// The cluster is shared: a test that fails before it restarts it must
	// not leave it down for the tests after it.
	t.Cleanup(func() {
		if down.Load() {
			if err := c.Restart(context.Background()); err != nil {
				t.Errorf("restart the shared PostgreSQL: %v", err)
			}
		}
	})
	s := mustOpenRemote(t, e, withFaults(func(point string) error {
		if point == "write:record" && records.Add(1) == 1 {
			down.Store(true)
			if err := c.Crash(); err != nil {
				return err
			}
		}
		return nil
	}))
	items := []hook.Item{item("r", 1, "a part whose row the database never got")}
	_, err := s.Write(ctx, items)
	if !errors.Is(err, index.ErrUnreachable) {
		t.Fatalf("Write with PostgreSQL stopped = %v, want index.ErrUnreachable", err)
	}
	t.Logf("the writer's error: %v", err)
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	down.Store(false)
	if _, err := s.Resolve(ctx, "", "r/1_t_c.txt"); !errors.Is(err, hook.ErrNotFound) {
		t.Fatalf("Resolve after the failed write = %v, want not found", err)
	}
	st, err := s.Write(ctx, items)
	if err != nil {
		t.Fatalf("the same write after the restart: %v", err)
	}
	if !st[0].Dedup {
		t.Errorf("the second write did not find the blob the first put up: %+v", st[0])
	}
	got, err := s.Read(ctx, "", st[0].Key)
	if err != nil || string(got.Data) != items[0].Part.Text {
		t.Errorf("Read = %v, %v", got, err)
	}
	if v, err := s.Verify(ctx, VerifyOptions{}); err != nil || !v.OK {
		t.Errorf("Verify = %+v, %v", v, err)
	}
}

// Wrong credentials and a store URL that is not one are refused with
// errors that say so.
func TestRemoteBadInput(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	mustOpenRemote(t, e)
	_, err := Open(ctx, e.url, WithCacheDir(t.TempDir()), WithS3Options(s3blob.WithCredentials(e.srv.AccessKey, "wrong-secret")))
	if !errors.Is(err, s3blob.ErrCredentials) || strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("Open with a wrong secret = %v, want ErrCredentials without the secret", err)
	}
	for _, bad := range []string{"s3://", "s3://ab/x", "s3://bucket/../x", "s3://bucket/x?color=red"} {
		if _, err := Open(ctx, bad, e.options(t.TempDir())...); !errors.Is(err, s3blob.ErrBadURL) {
			t.Errorf("Open(%q) = %v, want ErrBadURL", bad, err)
		}
	}
}

// A read-only store on S3 refuses a write naming the store's URL, not its
// cache directory; Barriers, a figure of local writes, is 0 there; an
// index record that names no URL is damaged, and the message says why.
func TestRemoteMessagesAndFigures(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	s := mustOpenRemote(t, e)
	mustWrite(t, s, item("r", 1, "a part"))
	if got := s.Barriers(); got != 0 {
		t.Errorf("Barriers on S3 = %d, want 0", got)
	}
	ro, err := Open(ctx, e.url, e.options(t.TempDir(), ReadOnly())...)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	_, err = ro.Write(ctx, []hook.Item{item("r", 2, "refused")})
	if !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), ro.Location()) || strings.Contains(err.Error(), ro.Dir()) {
		t.Errorf("Write on a read-only store on S3 = %v, want ErrReadOnly naming %s", err, ro.Location())
	}
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(e.srv.Dir, u.Host, filepath.FromSlash(u.Path), IndexRecordFile)
	if err := os.Remove(record); err != nil {
		t.Fatal(err)
	}
	if _, err := sharedOf(s).be.CreateMeta(ctx, IndexRecordFile, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, e.url, e.options(t.TempDir())...)
	if err == nil || !strings.Contains(err.Error(), "names no URL") || strings.Contains(err.Error(), "<nil>") {
		t.Errorf("Open with an index record naming no URL = %v", err)
	}
}
