package s3blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/cas/backendtest"
	"github.com/toolcas/toolcas/internal/versitygw"
)

// randomData is the conformance suite's generator of test content.
var randomData = backendtest.RandomBytes

// objectFile is where the posix backend keeps an object: the bucket's
// directory, then the key.
func objectFile(srv *versitygw.Server, be *Backend, b cas.Blob) string {
	return filepath.Join(srv.Dir, be.loc.Bucket, filepath.FromSlash(be.key(b)))
}

// TestObjectNames checks that a blob's object is named as its file is on
// disk, under the prefix, and that the marker object marks the store.
func TestObjectNames(t *testing.T) {
	srv := versitygw.Start(t)
	be := openOn(t, srv)
	data := []byte("hello, object store\n")
	res, err := be.Put(t.Context(), bytes.NewReader(data), ".txt")
	if err != nil {
		t.Fatal(err)
	}
	h := cas.Sum(data).Hex()
	wantKey := "team/store/blobs/" + h[:2] + "/" + h + ".txt"
	if got := be.key(res.Blob); got != wantKey {
		t.Errorf("key = %q, want %q", got, wantKey)
	}
	onDisk, err := os.ReadFile(filepath.Join(srv.Dir, be.loc.Bucket, filepath.FromSlash(wantKey)))
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Errorf("server's file for %s = %q, %v; want the blob's bytes", wantKey, onDisk, err)
	}
	if _, err := os.Stat(filepath.Join(srv.Dir, be.loc.Bucket, "team/store", cas.MarkerFile)); err != nil {
		t.Errorf("no marker object: %v", err)
	}
	if got, err := os.ReadFile(be.Path(res.Blob)); err != nil || !bytes.Equal(got, data) {
		t.Errorf("cache file %s after put = %q, %v; want the blob's bytes", be.Path(res.Blob), got, err)
	}
	if want := filepath.Join(be.cache.Dir(), "blobs", h[:2], h+".txt"); be.Path(res.Blob) != want {
		t.Errorf("Path = %q, want %q", be.Path(res.Blob), want)
	}
}

// TestConditionalWrite checks that the server refuses to overwrite an
// object given If-None-Match: *, and that of many concurrent writers of one
// blob exactly one makes it and the others find it made, for a single
// request and for a multipart upload.
func TestConditionalWrite(t *testing.T) {
	srv := versitygw.Start(t)
	be := openOn(t, srv)
	data := randomData(1, 1000)
	res, err := be.Put(t.Context(), bytes.NewReader(data), ".bin")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write(randomData(2, 1000))
	err = be.putObject(t.Context(), f, be.key(res.Blob), 1000, true)
	if !isPreconditionFailed(err) {
		t.Fatalf("conditional put over an existing object = %v, want 412 Precondition Failed", err)
	}
	if got, err := cas.ReadBlob(t.Context(), be, res.Blob); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after a refused overwrite the blob reads %d bytes, %v", len(got), err)
	}

	for _, size := range []int{64 << 10, 12 << 20} {
		data := randomData(uint64(size), size)
		const writers = 6
		var made atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, writers)
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := be.Put(t.Context(), bytes.NewReader(data), ".bin")
				if err != nil {
					errs <- err
					return
				}
				if !res.Existed {
					made.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%d bytes: concurrent writer: %v", size, err)
		}
		if made.Load() != 1 {
			t.Errorf("%d bytes: %d of %d concurrent writers made the object, want exactly 1", size, made.Load(), writers)
		}
	}
}

// TestWrongCredentials opens a store with a wrong secret and with an
// unknown access key: a clear error naming the credentials.
func TestWrongCredentials(t *testing.T) {
	srv := versitygw.Start(t)
	good := openOn(t, srv)
	for _, tc := range []struct {
		name, access, secret string
		codes                []string // the server's error code: AWS's, or versitygw's own
	}{
		{"wrong secret", srv.AccessKey, "not-the-secret", []string{"SignatureDoesNotMatch"}},
		{"unknown key", "nosuchkey", srv.SecretKey, []string{"InvalidAccessKeyId", "XAdminUserNotFound"}},
	} {
		_, err := Open(t.Context(), good.loc,
			WithCredentials(tc.access, tc.secret), WithCache(t.TempDir(), 1<<20))
		if !errors.Is(err, ErrCredentials) {
			t.Errorf("%s: Open = %v, want ErrCredentials", tc.name, err)
			continue
		}
		for _, want := range []string{"AWS_ACCESS_KEY_ID", "credentials"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, want)
			}
		}
		named := false
		for _, code := range tc.codes {
			named = named || strings.Contains(err.Error(), code)
		}
		if !named {
			t.Errorf("%s: error %q names none of the server's codes %q", tc.name, err, tc.codes)
		}
	}
}

// TestNoCredentials opens a store with no credentials anywhere.
func TestNoCredentials(t *testing.T) {
	isolateAWSConfig(t)
	_, err := Open(t.Context(), Location{Bucket: "any-bucket", Endpoint: "http://127.0.0.1:1"}, WithCache(t.TempDir(), 1<<20))
	if !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("Open without credentials = %v, want ErrCredentials saying what to set", err)
	}
}

// isolateAWSConfig clears every AWS setting of the environment, so that a
// test sees only what it sets.
func isolateAWSConfig(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// TestStandardConfiguration opens stores configured the standard AWS way:
// credentials and endpoint from the environment, or the endpoint in the URL.
func TestStandardConfiguration(t *testing.T) {
	srv := versitygw.Start(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
		url  string
	}{
		{"AWS_ENDPOINT_URL_S3", map[string]string{"AWS_ENDPOINT_URL_S3": srv.Endpoint()}, "s3://env-s3-endpoint/p"},
		{"AWS_ENDPOINT_URL", map[string]string{"AWS_ENDPOINT_URL": srv.Endpoint(), "AWS_REGION": "us-east-1"}, "s3://env-endpoint"},
		{"endpoint in URL", nil, "s3://url-endpoint/a/b?endpoint=" + srv.Endpoint()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolateAWSConfig(t)
			t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
			t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			loc, err := ParseURL(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Open(t.Context(), loc, WithCache(t.TempDir(), 1<<20)); !errors.Is(err, ErrNoBucket) {
				t.Fatalf("Open of a new bucket without WithCreate = %v, want ErrNoBucket", err)
			}
			be, err := Open(t.Context(), loc, WithCreate(), WithCache(t.TempDir(), 1<<20))
			if err != nil {
				t.Fatalf("Open(%s) with WithCreate: %v", tc.url, err)
			}
			res, err := be.Put(t.Context(), strings.NewReader("configured"), ".txt")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(objectFile(srv, be, res.Blob)); err != nil {
				t.Errorf("object not on the server: %v", err)
			}
		})
	}
}

// TestWrongRegion signs for a region the server does not serve: the error
// says to check the region.
func TestWrongRegion(t *testing.T) {
	srv := versitygw.Start(t)
	good := openOn(t, srv)
	loc := good.loc
	loc.Region = "eu-west-3"
	_, err := Open(t.Context(), loc, WithCredentials(srv.AccessKey, srv.SecretKey), WithCache(t.TempDir(), 1<<20))
	if !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), "AWS_REGION") {
		t.Errorf("Open signed for the wrong region = %v, want an error naming AWS_REGION", err)
	}
}

// TestMissingBucketAndStore opens a bucket that does not exist, and a
// prefix that holds no store.
func TestMissingBucketAndStore(t *testing.T) {
	srv := versitygw.Start(t)
	creds := WithCredentials(srv.AccessKey, srv.SecretKey)
	loc := Location{Bucket: "no-such-bucket", Prefix: "x", Endpoint: srv.Endpoint()}
	_, err := Open(t.Context(), loc, creds, WithCache(t.TempDir(), 1<<20))
	if !errors.Is(err, ErrNoBucket) || !strings.Contains(err.Error(), "no-such-bucket") || !strings.Contains(err.Error(), "init") {
		t.Errorf("Open of a missing bucket = %v, want ErrNoBucket naming it and how to create it", err)
	}
	if _, err := os.Stat(filepath.Join(srv.Dir, "no-such-bucket")); !os.IsNotExist(err) {
		t.Errorf("Open without WithCreate made the bucket: %v", err)
	}
	be := openOn(t, srv)
	other := be.loc
	other.Prefix = "elsewhere"
	if _, err := Open(t.Context(), other, creds, WithCache(t.TempDir(), 1<<20)); !errors.Is(err, cas.ErrNoStore) {
		t.Errorf("Open of a prefix without a store = %v, want cas.ErrNoStore", err)
	}
	// A bucket made by init, then opened again without WithCreate.
	if _, err := Open(t.Context(), be.loc, creds, WithCache(t.TempDir(), 1<<20)); err != nil {
		t.Errorf("Open of an initialised store: %v", err)
	}
}

// killingTransport kills the server, by its pid, once a request body has
// sent more than after bytes: the object store going away mid-write.
type killingTransport struct {
	base   http.RoundTripper
	after  int64
	sent   atomic.Int64
	once   sync.Once
	kill   func()
	killed atomic.Bool
}

func (kt *killingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Method == http.MethodPut {
		req.Body = &killingBody{ReadCloser: req.Body, kt: kt}
	}
	return kt.base.RoundTrip(req)
}

type killingBody struct {
	io.ReadCloser
	kt *killingTransport
}

func (b *killingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.kt.sent.Add(int64(n)) > b.kt.after {
		b.kt.once.Do(func() { b.kt.killed.Store(true); b.kt.kill() })
	}
	return n, err
}

// TestServerKilledMidWrite kills the server while a blob goes up, in one
// request and as a multipart upload: the put fails with ErrUnreachable,
// and once the server is back on the same directory and port no object of
// the blob is visible, and the same put succeeds.
func TestServerKilledMidWrite(t *testing.T) {
	for _, tc := range []struct {
		name       string
		size       int
		killAfter  int64
		wantUpload bool
	}{
		{"single request", 4 << 20, 1 << 20, false},
		{"multipart", 24 << 20, 12 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := versitygw.Start(t)
			kt := &killingTransport{base: http.DefaultTransport.(*http.Transport).Clone(), after: tc.killAfter, kill: srv.Kill}
			be := openOn(t, srv, WithHTTPClient(&http.Client{Transport: kt}), WithMaxAttempts(2))
			kt.sent.Store(0)
			data := randomData(uint64(tc.size), tc.size)
			b := cas.Blob{Digest: cas.Sum(data), Ext: ".bin"}
			_, err := be.Put(t.Context(), bytes.NewReader(data), ".bin")
			if !kt.killed.Load() {
				t.Fatalf("the server was not killed: %d bytes sent", kt.sent.Load())
			}
			if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), srv.Endpoint()) {
				t.Fatalf("Put with the server killed = %v, want ErrUnreachable naming %s", err, srv.Endpoint())
			}
			t.Logf("error: %v", err)
			if _, err := os.Stat(be.Path(b)); !os.IsNotExist(err) {
				t.Errorf("a failed put left the blob in the cache: %v", err)
			}
			assertNoTemps(t, be.cache)
			srv.Restart(t)
			kt.after = 1 << 62
			if _, err := be.Stat(t.Context(), b); !errors.Is(err, cas.ErrNotFound) {
				t.Errorf("after the restart, Stat = %v, want ErrNotFound", err)
			}
			if _, err := os.Stat(objectFile(srv, be, b)); !os.IsNotExist(err) {
				t.Errorf("after the restart, the server holds a file for the object: %v", err)
			}
			n := 0
			if err := be.Walk(t.Context(), func(cas.Entry) error { n++; return nil }); err != nil || n != 0 {
				t.Errorf("after the restart, Walk = %d names, %v; want none", n, err)
			}
			uploads, err := be.client.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &be.loc.Bucket})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("multipart uploads left on the server: %d", len(uploads.Uploads))
			if tc.wantUpload && len(uploads.Uploads) != 1 {
				t.Errorf("%d multipart uploads left after the server died mid-upload, want the 1 it could not abort", len(uploads.Uploads))
			}
			if n, err := be.AbortUploads(t.Context(), time.Hour); err != nil || n != 0 {
				t.Errorf("AbortUploads(older than an hour) = %d, %v; want 0, nil", n, err)
			}
			if n, err := be.AbortUploads(t.Context(), 0); err != nil || n != len(uploads.Uploads) {
				t.Errorf("AbortUploads(0) = %d, %v; want %d, nil", n, err, len(uploads.Uploads))
			}
			uploads, err = be.client.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &be.loc.Bucket})
			if err != nil || len(uploads.Uploads) != 0 {
				t.Errorf("after AbortUploads, %d uploads remain, %v", len(uploads.Uploads), err)
			}
			res, err := be.Put(t.Context(), bytes.NewReader(data), ".bin")
			if err != nil || res.Existed || res.Blob != b {
				t.Fatalf("Put after the restart = %+v, %v; want the blob made", res, err)
			}
			os.Remove(be.Path(b))
			if got, err := cas.ReadBlob(t.Context(), be, b); err != nil || !bytes.Equal(got, data) {
				t.Errorf("after the restart the blob reads %d bytes, %v", len(got), err)
			}
			onDisk, err := os.ReadFile(objectFile(srv, be, b))
			if err != nil || !bytes.Equal(onDisk, data) {
				t.Errorf("the server's file holds %d bytes, %v; want the blob", len(onDisk), err)
			}
		})
	}
}

// methodCounter counts the requests sent through it by method.
type methodCounter struct {
	base http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func (mc *methodCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	mc.mu.Lock()
	if mc.n == nil {
		mc.n = map[string]int{}
	}
	mc.n[req.Method]++
	mc.mu.Unlock()
	return mc.base.RoundTrip(req)
}

func (mc *methodCounter) count(method string) int {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.n[method]
}

// TestDamagedObjectReplaced puts a blob whose object exists with the wrong
// size, in one request and as a multipart upload: the put overwrites it in
// place rather than trusting it, and never deletes it first (a delete
// could remove a good object another writer had just made and reported).
func TestDamagedObjectReplaced(t *testing.T) {
	srv := versitygw.Start(t)
	mc := &methodCounter{base: http.DefaultTransport.(*http.Transport).Clone()}
	be := openOn(t, srv, WithHTTPClient(&http.Client{Transport: mc}))
	for _, size := range []int{4000, MinPartSize + 1<<20} {
		data := randomData(uint64(size), size)
		b := cas.Blob{Digest: cas.Sum(data), Ext: ".bin"}
		key := be.key(b)
		if _, err := be.client.PutObject(t.Context(), &s3.PutObjectInput{
			Bucket: &be.loc.Bucket, Key: &key, Body: bytes.NewReader(data[:100]), ContentLength: aws.Int64(100),
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := cas.ReadBlob(t.Context(), be, b); !errors.Is(err, cas.ErrCorrupt) {
			t.Fatalf("%d bytes: read of a truncated object = %v, want ErrCorrupt", size, err)
		}
		if _, err := os.Stat(be.Path(b)); !os.IsNotExist(err) {
			t.Errorf("%d bytes: a corrupt object entered the cache: %v", size, err)
		}
		assertNoTemps(t, be.cache)
		res, err := be.Put(t.Context(), bytes.NewReader(data), ".bin")
		if err != nil || res.Existed {
			t.Fatalf("%d bytes: Put over a damaged object = %+v, %v; want it written", size, res, err)
		}
		if n := mc.count(http.MethodDelete); n != 0 {
			t.Errorf("%d bytes: Put over a damaged object sent %d DELETE requests, want none", size, n)
		}
		os.Remove(be.Path(b))
		if got, err := cas.ReadBlob(t.Context(), be, b); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%d bytes: after the put the blob reads %d bytes, %v", size, len(got), err)
		}
	}
}

// TestCancelDuringUpload cancels the context while a multipart upload is
// sending its parts: the put returns context.Canceled, no object is made,
// and the upload is aborted, leaving no parts on the server.
func TestCancelDuringUpload(t *testing.T) {
	srv := versitygw.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	kt := &killingTransport{base: http.DefaultTransport.(*http.Transport).Clone(), after: 1 << 62, kill: cancel}
	be := openOn(t, srv, WithHTTPClient(&http.Client{Transport: kt}))
	kt.sent.Store(0)
	kt.after = 8 << 20
	data := randomData(77, 24<<20)
	b := cas.Blob{Digest: cas.Sum(data), Ext: ".bin"}
	_, err := be.Put(ctx, bytes.NewReader(data), ".bin")
	if !kt.killed.Load() {
		t.Fatalf("the context was not cancelled: %d bytes sent", kt.sent.Load())
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Put cancelled during the upload = %v, want context.Canceled", err)
	}
	assertNoTemps(t, be.cache)
	if _, err := be.Stat(t.Context(), b); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("after a cancelled upload, Stat = %v, want ErrNotFound", err)
	}
	uploads, err := be.client.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &be.loc.Bucket})
	if err != nil || len(uploads.Uploads) != 0 {
		t.Errorf("after a cancelled upload, %d uploads remain on the server, %v; want it aborted", len(uploads.Uploads), err)
	}
	if res, err := be.Put(t.Context(), bytes.NewReader(data), ".bin"); err != nil || res.Existed {
		t.Errorf("Put after the cancelled one = %+v, %v; want the blob made", res, err)
	}
}

// TestOpenRemote reads a blob from the object store past a cache that
// holds a good copy: the damage to the object shows.
func TestOpenRemote(t *testing.T) {
	srv := versitygw.Start(t)
	be := openOn(t, srv)
	data := randomData(3, 70000)
	res, err := be.Put(t.Context(), bytes.NewReader(data), ".bin")
	if err != nil {
		t.Fatal(err)
	}
	r, err := be.OpenRemote(t.Context(), res.Blob)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) || r.Size() != int64(len(data)) {
		t.Fatalf("OpenRemote read %d bytes, %v, size %d", len(got), err, r.Size())
	}
	bad := bytes.Clone(data)
	bad[0] ^= 1
	key := be.key(res.Blob)
	if _, err := be.client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: &be.loc.Bucket, Key: &key, Body: bytes.NewReader(bad), ContentLength: aws.Int64(int64(len(bad)))}); err != nil {
		t.Fatal(err)
	}
	if got, err := cas.ReadBlob(t.Context(), be, res.Blob); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the cached copy reads %d bytes, %v; want the good bytes", len(got), err)
	}
	r, err = be.OpenRemote(t.Context(), res.Blob)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(r)
	r.Close()
	if !errors.Is(err, cas.ErrCorrupt) {
		t.Errorf("OpenRemote of a damaged object read to its end = %v, want ErrCorrupt", err)
	}
	if _, err := be.OpenRemote(t.Context(), missingBlob()); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("OpenRemote(missing) = %v, want ErrNotFound", err)
	}
}

func missingBlob() cas.Blob {
	return cas.Blob{Digest: cas.Sum([]byte("never stored")), Ext: ".txt"}
}

// TestWalkStrays lists a store holding, besides blobs, objects under blobs/
// whose names are not blob names: they come as strays, and objects outside
// blobs/ not at all.
func TestWalkStrays(t *testing.T) {
	srv := versitygw.Start(t)
	be := openOn(t, srv)
	res, err := be.Put(t.Context(), strings.NewReader("a blob"), ".txt")
	if err != nil {
		t.Fatal(err)
	}
	h := res.Blob.Digest.Hex()
	strays := []string{"blobs/readme", "blobs/00/" + h + ".txt", "blobs/" + h[:2] + "/not-a-digest.txt"}
	for _, rel := range append(strays, "elsewhere/x", "blobsx/y") {
		key := be.keyBase + rel
		if _, err := be.client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: &be.loc.Bucket, Key: &key, Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]cas.EntryKind{}
	if err := be.Walk(t.Context(), func(e cas.Entry) error { got[e.RelPath] = e.Kind; return nil }); err != nil {
		t.Fatal(err)
	}
	want := map[string]cas.EntryKind{res.Blob.RelPath(): cas.EntryBlob}
	for _, s := range strays {
		want[s] = cas.EntryStray
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Walk = %v, want %v", got, want)
	}
}

// conflictTransport answers every conditional PUT with 409
// ConditionalRequestConflict, as a server does while another conditional
// write of the key is in flight, until that other write's object appears:
// at the appearAfter-th HEAD, when appear makes it.
type conflictTransport struct {
	base        http.RoundTripper
	appearAfter int
	appear      func()
	onConflict  func()
	mu          sync.Mutex
	heads, puts int
	appeared    bool
}

func (ct *conflictTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.Contains(req.URL.Path, "/blobs/") {
		return ct.base.RoundTrip(req)
	}
	ct.mu.Lock()
	switch {
	case req.Method == http.MethodHead:
		ct.heads++
		if ct.heads == ct.appearAfter {
			ct.mu.Unlock()
			ct.appear()
			ct.mu.Lock()
			ct.appeared = true
		}
	case req.Method == http.MethodPut && req.Header.Get("If-None-Match") != "":
		ct.puts++
		if !ct.appeared {
			ct.mu.Unlock()
			if req.Body != nil {
				req.Body.Close()
			}
			if ct.onConflict != nil {
				ct.onConflict()
			}
			body := "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>ConditionalRequestConflict</Code><Message>a conditional write of the key is in progress</Message></Error>"
			return &http.Response{
				StatusCode: http.StatusConflict, Status: "409 Conflict", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)),
				ContentLength: int64(len(body)), Request: req,
			}, nil
		}
	}
	ct.mu.Unlock()
	return ct.base.RoundTrip(req)
}

// TestConflictWaitsForOtherWrite meets 409 ConditionalRequestConflict: the
// put polls for the other write's object instead of uploading again, and
// succeeds with Existed once it appears.
func TestConflictWaitsForOtherWrite(t *testing.T) {
	srv := versitygw.Start(t)
	data := randomData(41, 64<<10)
	b := cas.Blob{Digest: cas.Sum(data), Ext: ".bin"}
	ct := &conflictTransport{base: http.DefaultTransport.(*http.Transport).Clone(), appearAfter: 5}
	be := openOn(t, srv, WithHTTPClient(&http.Client{Transport: ct}))
	be.pollBase = time.Millisecond
	ct.appear = func() {
		key := be.key(b)
		if _, err := be.client.PutObject(context.Background(), &s3.PutObjectInput{
			Bucket: &be.loc.Bucket, Key: &key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		}); err != nil {
			t.Errorf("the other writer's put: %v", err)
		}
	}
	res, err := be.Put(t.Context(), bytes.NewReader(data), ".bin")
	if err != nil || !res.Existed {
		t.Fatalf("Put meeting a conflicting write = %+v, %v; want Existed", res, err)
	}
	if ct.puts != 1 {
		t.Errorf("the put sent its content %d times, want once", ct.puts)
	}
}

// TestConflictHonoursContext cancels the context while a put waits for a
// conflicting write's object: it returns at once with context.Canceled.
func TestConflictHonoursContext(t *testing.T) {
	srv := versitygw.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ct := &conflictTransport{base: http.DefaultTransport.(*http.Transport).Clone(), onConflict: cancel}
	be := openOn(t, srv, WithHTTPClient(&http.Client{Transport: ct}))
	be.pollBase = time.Hour
	done := make(chan error, 1)
	go func() {
		_, err := be.Put(ctx, bytes.NewReader(randomData(42, 1000)), ".bin")
		done <- err
	}()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Put cancelled while waiting out a conflict = %v, want context.Canceled", err)
	}
}

// TestOpenAfterRemoteRemove removes a blob through one backend while
// another, on the same store with a cache of its own, holds it cached: that
// one's Open may still serve the checked cached copy, as cas.Fetcher
// documents, while Stat and cas.OpenStored see the store and say
// ErrNotFound.
func TestOpenAfterRemoteRemove(t *testing.T) {
	srv := versitygw.Start(t)
	a := openOn(t, srv)
	b, err := Open(t.Context(), a.loc, WithCredentials(srv.AccessKey, srv.SecretKey), WithCache(t.TempDir(), 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	data := randomData(51, 3000)
	res, err := a.Put(t.Context(), bytes.NewReader(data), ".bin")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(t.Context(), res.Blob); err != nil {
		t.Fatal(err)
	}
	if got, err := cas.ReadBlob(t.Context(), a, res.Blob); err != nil || !bytes.Equal(got, data) {
		t.Errorf("Open from the cache after a remote Remove = %d bytes, %v; want the cached copy", len(got), err)
	}
	if _, err := a.Stat(t.Context(), res.Blob); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("Stat after a remote Remove = %v, want ErrNotFound", err)
	}
	if _, err := cas.OpenStored(t.Context(), a, res.Blob); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("cas.OpenStored after a remote Remove = %v, want ErrNotFound", err)
	}
}

// TestListingPages lists with two keys a page: Walk reports every blob
// and AbortUploads aborts every upload, across pages.
func TestListingPages(t *testing.T) {
	srv := versitygw.Start(t)
	be := openOn(t, srv)
	be.pageSize = 2
	want := map[cas.Blob]bool{}
	for i := range 7 {
		res, err := be.Put(t.Context(), bytes.NewReader(randomData(uint64(600+i), 100)), ".bin")
		if err != nil {
			t.Fatal(err)
		}
		want[res.Blob] = true
	}
	got := map[cas.Blob]bool{}
	if err := be.Walk(t.Context(), func(e cas.Entry) error { got[e.Blob] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("Walk two keys a page found %d blobs, want %d", len(got), len(want))
	}
	for b := range want {
		if !got[b] {
			t.Errorf("Walk two keys a page missed %v", b)
		}
	}
	const uploads = 5
	for i := range uploads {
		key := be.keyBase + cas.BlobsDir + fmt.Sprintf("/0%d/upload-%d", i%2, i)
		if _, err := be.client.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: &be.loc.Bucket, Key: &key}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := be.AbortUploads(t.Context(), 0); err != nil || n != uploads {
		t.Errorf("AbortUploads two a page = %d, %v; want %d", n, err, uploads)
	}
	left, err := be.client.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &be.loc.Bucket})
	if err != nil || len(left.Uploads) != 0 {
		t.Errorf("after AbortUploads, %d uploads remain, %v", len(left.Uploads), err)
	}
}
