package store

import (
	"context"
	"net/url"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// gc, even with no grace period, leaves another machine's multipart
// upload in flight alone: it aborts only uploads older than
// remoteUploadAge, by the object store's clock, since it takes no lock
// against the writers uploading.
func TestRemoteGCKeepsUploadsInFlight(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	s := mustOpenRemote(t, e)
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	client := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(e.srv.Endpoint()),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(e.srv.AccessKey, e.srv.SecretKey, ""),
	})
	bucket := u.Host
	key := u.Path[1:] + "/blobs/ab/another-machines-upload"
	up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.GC(ctx, GCOptions{Grace: 0})
	if err != nil || res.RemovedTemp != 0 {
		t.Errorf("GC with no grace period = %+v, %v; want no upload aborted", res, err)
	}
	if _, err := client.ListParts(ctx, &s3.ListPartsInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId}); err != nil {
		t.Errorf("the upload in flight after gc: %v", err)
	}
}
