package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/hook/storetest"
	"github.com/toolcas/toolcas/internal/pgtest"
	"github.com/toolcas/toolcas/internal/versitygw"
	"github.com/toolcas/toolcas/s3blob"
)

// remoteEnv is a shared store's servers: an S3 server and a PostgreSQL
// database, and the store's URL.
type remoteEnv struct {
	srv *versitygw.Server
	db  string
	url string
}

var remoteSeq atomic.Int64

// startRemote makes a database and names a store in a bucket of its own,
// on the package's versitygw (started at its first use, stopped by
// TestMain). The test is skipped when either server is not installed,
// unless $TOOLCAS_REQUIRE_SERVERS is 1.
func startRemote(tb testing.TB) remoteEnv {
	tb.Helper()
	return remoteOn(tb, versitygw.Shared(tb))
}

// startRemoteAlone is startRemote on a versitygw of the test's own, for a
// test that stops or kills it.
func startRemoteAlone(tb testing.TB) remoteEnv {
	tb.Helper()
	return remoteOn(tb, versitygw.Start(tb))
}

func remoteOn(tb testing.TB, srv *versitygw.Server) remoteEnv {
	tb.Helper()
	db := pgtest.Database(tb)
	bucket := fmt.Sprintf("store-%d-%d", os.Getpid()%100000, remoteSeq.Add(1))
	return remoteEnv{srv: srv, db: db, url: "s3://" + bucket + "/team/st?endpoint=" + srv.Endpoint()}
}

// options returns the options that reach the env's servers, with a cache
// of the given directory.
func (e remoteEnv) options(cache string, opts ...Option) []Option {
	return append([]Option{WithCacheDir(cache), WithS3Options(s3blob.WithCredentials(e.srv.AccessKey, e.srv.SecretKey))}, opts...)
}

// mustOpenRemote opens (creating) the env's store with a cache of its own.
func mustOpenRemote(tb testing.TB, e remoteEnv, opts ...Option) *Store {
	tb.Helper()
	s, err := Open(context.Background(), e.url, e.options(tb.TempDir(), append([]Option{WithCreate(), WithIndexURL(e.db)}, opts...)...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// A store on S3 and PostgreSQL does what a directory store does: writes,
// streamed puts, reads by key and by the pointer's path (a cache file),
// show, stats, ls, verify, prune and gc; pack and repair say they are
// local-only.
func TestRemoteStore(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	c := &clock{time.Now()}
	s := mustOpenRemote(t, e, WithClock(c.now))
	if _, shared := s.eng.(*sharedEngine); !s.Remote() || !shared {
		t.Fatalf("Remote = %v, engine %T", s.Remote(), s.eng)
	}
	if got := s.Location(); !strings.HasPrefix(got, "s3://") {
		t.Errorf("Location = %q, want the s3 URL", got)
	}
	st := mustWrite(t, s, item("r1", 1, "hello from s3"), item("r1", 2, "second"))
	if !strings.HasPrefix(st[0].Path, s.Dir()) {
		t.Errorf("path %s is not in the cache %s", st[0].Path, s.Dir())
	}
	if b, err := os.ReadFile(st[0].Path); err != nil || string(b) != "hello from s3" {
		t.Errorf("pointer's file = %q, %v", b, err)
	}
	// The same content again is a dedup hit.
	again := mustWrite(t, s, item("r2", 1, "hello from s3"))
	if !again[0].Dedup || again[0].Digest != st[0].Digest {
		t.Errorf("second write = %+v, want a dedup hit of %v", again[0], st[0].Digest)
	}
	pr, err := s.Put(ctx, StreamPart{Key: hook.Key{Run: "r3", Step: 1, Tool: "t", CallID: "p", Part: -1}}, strings.NewReader("streamed text"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ref, want string }{
		{st[0].Key, "hello from s3"},
		{st[1].Path, "second"},
		{pr.Key, "streamed text"},
		{pr.Digest.String(), "streamed text"},
	} {
		got, err := s.Read(ctx, "", tc.ref)
		if err != nil || string(got.Data) != tc.want {
			t.Errorf("Read(%q) = %v, %v; want %q", tc.ref, got, err, tc.want)
		}
	}
	// An evicted (deleted) cache file is fetched again on read.
	if err := os.Remove(st[1].Path); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	p, err := s.Resolve(ctx, "", st[1].Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Copy(ctx, &buf, p); err != nil || buf.String() != "second" {
		t.Errorf("Copy = %q, %v", buf.String(), err)
	}
	if _, err := os.Stat(st[1].Path); err != nil {
		t.Errorf("the read did not put the blob back in the cache: %v", err)
	}
	d, err := s.Show(ctx, st[0].Key)
	if err != nil || d.OnDiskErr != nil || d.OnDisk.Size != int64(len("hello from s3")) || d.SharingTotal != 1 {
		t.Errorf("Show = %+v, %v", d, err)
	}
	stats, err := s.Stats(ctx, "")
	if err != nil || stats.Parts != 4 || stats.Blobs != 3 {
		t.Errorf("Stats = %+v, %v; want 4 parts, 3 blobs", stats, err)
	}
	ls, err := s.List(ctx, ListOptions{Run: "r1"})
	if err != nil || len(ls) != 2 {
		t.Errorf("List = %v, %v", ls, err)
	}
	v, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || !v.OK || v.Checked != 3 {
		t.Errorf("Verify = %+v, %v; want ok, 3 checked", v, err)
	}
	if _, err := s.Pack(ctx, PackOptions{}); !errors.Is(err, ErrLocalOnly) {
		t.Errorf("Pack = %v, want ErrLocalOnly", err)
	}
	if _, err := s.Repair(ctx, RepairOptions{}); !errors.Is(err, ErrLocalOnly) {
		t.Errorf("Repair = %v, want ErrLocalOnly", err)
	}
	// prune r1: "second" is unused; "hello" is still r2's. gc within the
	// grace period keeps it, after it removes it.
	if _, err := s.Prune(ctx, PruneOptions{Run: "r1"}); err != nil {
		t.Fatal(err)
	}
	res, err := s.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil || res.RemovedBlobs != 0 || res.KeptYoung != 1 {
		t.Errorf("GC in the grace period = %+v, %v; want 0 removed, 1 kept young", res, err)
	}
	c.t = c.t.Add(2 * time.Hour)
	res, err = s.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil || res.RemovedBlobs != 1 || res.Removed[0].Digest != st[1].Digest {
		t.Errorf("GC = %+v, %v; want the blob of %q removed", res, err, st[1].Key)
	}
	if _, err := s.eng.backend().Stat(ctx, cas.Blob{Digest: st[1].Digest, Ext: ".txt"}); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("Stat of the removed blob = %v, want ErrNotFound", err)
	}
	if got, err := s.Read(ctx, "", again[0].Key); err != nil || string(got.Data) != "hello from s3" {
		t.Errorf("Read of the kept blob = %v, %v", got, err)
	}
	if v, err := s.Verify(ctx, VerifyOptions{}); err != nil || !v.OK || v.Checked != 2 {
		t.Errorf("Verify after gc = %+v, %v", v, err)
	}
}

// Verify reads the objects themselves, not the cache: an object damaged
// behind the store's back is reported, though its cached copy is whole.
func TestRemoteVerifyReadsTheStore(t *testing.T) {
	e := startRemote(t)
	s := mustOpenRemote(t, e)
	st := mustWrite(t, s, item("r", 1, "the original bytes"))
	b := cas.Blob{Digest: st[0].Digest, Ext: ".txt"}
	overwriteObject(t, e, b, "damaged!")
	v, err := s.Verify(context.Background(), VerifyOptions{})
	if err != nil || v.OK || len(v.Corrupt) != 1 || v.Corrupt[0].Blob != b || !strings.HasPrefix(v.Corrupt[0].Path, "s3://") {
		t.Errorf("Verify = %+v, %v; want the object reported corrupt", v, err)
	}
}

// objectFile returns the file in which the versitygw posix backend keeps
// a blob's object.
func (e remoteEnv) objectFile(b cas.Blob) string {
	loc, _ := s3blob.ParseURL(e.url)
	return filepath.Join(e.srv.Dir, loc.Bucket, filepath.FromSlash(loc.Prefix), filepath.FromSlash(b.RelPath()))
}

// overwriteObject replaces a blob's object with other bytes, as damage,
// behind the server's back.
func overwriteObject(t *testing.T, e remoteEnv, b cas.Blob, data string) {
	t.Helper()
	if err := os.WriteFile(e.objectFile(b), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Opening a location that holds no store says to run init; creating or
// opening one without a PostgreSQL index says to pass --index; another
// index than the recorded one is refused.
func TestRemoteOpenErrors(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	_, err := Open(ctx, e.url, e.options(t.TempDir())...)
	if !errors.Is(err, s3blob.ErrNoBucket) || !strings.Contains(err.Error(), "init") {
		t.Errorf("Open of no bucket = %v, want ErrNoBucket saying to run init", err)
	}
	_, err = Open(ctx, e.url, e.options(t.TempDir(), WithCreate())...)
	if !errors.Is(err, ErrNeedSharedIndex) || !strings.Contains(err.Error(), "--index postgres://") {
		t.Errorf("Open create without an index = %v, want ErrNeedSharedIndex naming --index", err)
	}
	s := mustOpenRemote(t, e)
	mustWrite(t, s, item("r", 1, "x"))
	s.Close()
	// Later opens use the recorded index.
	s2, err := Open(ctx, e.url, e.options(t.TempDir())...)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s2.Read(ctx, "", "r/1_t_c.txt"); err != nil || string(got.Data) != "x" {
		t.Errorf("Read through the recorded index = %v, %v", got, err)
	}
	s2.Close()
	// The bucket is there now, but no store under another prefix.
	if _, err := Open(ctx, strings.Replace(e.url, "/team/st", "/elsewhere", 1), e.options(t.TempDir())...); !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), "init") {
		t.Errorf("Open of no store = %v, want ErrNoStore saying to run init", err)
	}
	other := pgtest.Database(t)
	if _, err := Open(ctx, e.url, e.options(t.TempDir(), WithIndexURL(other))...); !errors.Is(err, ErrIndexMismatch) {
		t.Errorf("Open with another index = %v, want ErrIndexMismatch", err)
	}
	if _, err := Open(ctx, t.TempDir(), WithCacheDir(t.TempDir())); err == nil {
		t.Error("OpenAt of a directory with a cache directory succeeded")
	}
	if _, err := Open(ctx, "s3://Bad_Bucket/x", e.options(t.TempDir())...); !errors.Is(err, s3blob.ErrBadURL) {
		t.Errorf("Open of a bad URL = %v, want ErrBadURL", err)
	}
	// The marker and the index record are objects under the prefix.
	loc, _ := s3blob.ParseURL(e.url)
	if _, err := os.Stat(filepath.Join(e.srv.Dir, loc.Bucket, "team", "st", IndexRecordFile)); err != nil {
		t.Errorf("no %s object: %v", IndexRecordFile, err)
	}
}

// On a store on S3, whose objects keep the time of their first write, a
// dedup hit refreshes the blob's last-referenced time in the index (in the
// transaction of its row), and gc counts the grace period from it: a blob
// written long ago and referenced again lately is kept once its rows go,
// until the grace period has passed since that reference.
func TestRemoteDedupHitRefreshesLastReferenced(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	c := &clock{time.Now()}
	s := mustOpenRemote(t, e, WithClock(c.now))
	first := mustWrite(t, s, item("r1", 1, "shared result"))
	b := cas.Blob{Digest: first[0].Digest, Ext: ".txt"}
	c.t = c.t.Add(3 * time.Hour)
	again := mustWrite(t, s, item("r2", 1, "shared result"))
	if !again[0].Dedup {
		t.Fatalf("second write = %+v, want a dedup hit", again[0])
	}
	row, err := s.ix.Blob(ctx, b)
	if err != nil || !row.LastReferenced.Equal(c.t) {
		t.Fatalf("last referenced = %v, %v; want %v", row.LastReferenced, err, c.t)
	}
	for _, run := range []string{"r1", "r2"} {
		if _, err := s.Prune(ctx, PruneOptions{Run: run}); err != nil {
			t.Fatal(err)
		}
	}
	c.t = c.t.Add(30 * time.Minute)
	if res, err := s.GC(ctx, GCOptions{Grace: time.Hour}); err != nil || res.RemovedBlobs != 0 || res.KeptYoung != 1 {
		t.Errorf("GC 30 min after the last reference = %+v, %v; want it kept", res, err)
	}
	c.t = c.t.Add(time.Hour)
	if res, err := s.GC(ctx, GCOptions{Grace: time.Hour}); err != nil || res.RemovedBlobs != 1 {
		t.Errorf("GC past the grace period = %+v, %v; want it removed", res, err)
	}
}

// Open takes an s3:// location as OpenAt does, rather than making a
// directory of that name; the durability a store on S3 is opened with is
// how its index commits (a put is durable when it returns whatever it is).
func TestRemoteOpenAndDurability(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	mustOpenRemote(t, e).Close()
	wd, _ := os.Getwd()
	s, err := Open(ctx, e.url, e.options(t.TempDir(), WithDurability(cas.SyncNone))...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Remote() || s.Durability() != "none" {
		t.Errorf("Open(s3://…) = remote %v, durability %q; want remote, none", s.Remote(), s.Durability())
	}
	if _, err := os.Stat(filepath.Join(wd, "s3:")); !os.IsNotExist(err) {
		t.Errorf("Open made a directory named s3: (%v)", err)
	}
	st := mustWrite(t, s, item("r", 1, "durable once put"))
	if _, err := s.eng.backend().Stat(ctx, cas.Blob{Digest: st[0].Digest, Ext: ".txt"}); err != nil {
		t.Errorf("the object after the write: %v", err)
	}
}

// The hook's store conformance suite on a store on S3 and PostgreSQL: a
// new bucket and database for each subtest, on one server.
func TestRemoteConformance(t *testing.T) {
	e := startRemote(t)
	storetest.Run(t, func(t *testing.T) hook.Store {
		f := e
		f.db = pgtest.Database(t)
		f.url = strings.Replace(e.url, "s3://"+bucketOf(e.url), fmt.Sprintf("s3://conf-%d-%d", os.Getpid()%100000, remoteSeq.Add(1)), 1)
		return mustOpenRemote(t, f)
	}, storetest.Options{})
}

// bucketOf returns the bucket of a store URL.
func bucketOf(url string) string {
	loc, _ := s3blob.ParseURL(url)
	return loc.Bucket
}
