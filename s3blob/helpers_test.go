package s3blob

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/versitygw"
)

var bucketSeq atomic.Int64

// newBucketName returns a bucket name no other test of this process uses.
func newBucketName(t testing.TB) string {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	return strings.Trim(fmt.Sprintf("%s-%d-%d", name, os.Getpid()%10000, bucketSeq.Add(1)), "-.")
}

// openOn opens a new store in a new bucket on srv, with a cache in a temp
// directory.
func openOn(t testing.TB, srv *versitygw.Server, opts ...Option) *Backend {
	t.Helper()
	loc := Location{Bucket: newBucketName(t), Prefix: "team/store", Endpoint: srv.Endpoint()}
	all := append([]Option{
		WithCreate(),
		WithCredentials(srv.AccessKey, srv.SecretKey),
		WithCache(t.TempDir(), 1<<30),
		WithPartSize(MinPartSize),
	}, opts...)
	be, err := Open(t.Context(), loc, all...)
	if err != nil {
		t.Fatalf("Open(%v): %v", loc, err)
	}
	return be
}

// overwrite replaces a blob's object with data behind the backend's back
// (no condition), and drops its cached file.
func overwrite(t *testing.T, be *Backend, b cas.Blob, data []byte) {
	t.Helper()
	key := be.key(b)
	if _, err := be.client.PutObject(t.Context(), &s3.PutObjectInput{
		Bucket: &be.loc.Bucket, Key: &key, Body: strings.NewReader(string(data)), ContentLength: aws.Int64(int64(len(data))),
	}); err != nil {
		t.Fatalf("overwrite %s: %v", key, err)
	}
	if err := os.Remove(be.Path(b)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}
