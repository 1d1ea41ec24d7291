package s3blob

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/toolcas/toolcas/cas"
)

// maxMeta bounds what ReadMeta reads: a store's small records, never blobs.
const maxMeta = 64 << 10

// checkMetaName accepts the name of a record at the store's top level: no
// slash, nothing under blobs/.
func checkMetaName(name string) error {
	if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." || name == cas.BlobsDir {
		return fmt.Errorf("s3blob: %q is not a record name", name)
	}
	return nil
}

// ReadMeta returns the bytes of a small record the store keeps beside its
// blobs (PREFIX/name), or an error wrapping cas.ErrNotFound when there is
// none. Records are at most 64 KiB.
func (be *Backend) ReadMeta(ctx context.Context, name string) ([]byte, error) {
	if err := checkMetaName(name); err != nil {
		return nil, err
	}
	key := be.keyBase + name
	out, err := be.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &be.loc.Bucket, Key: &key})
	if err != nil {
		return nil, be.classify("read "+key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, maxMeta+1))
	if err != nil {
		return nil, be.classify("read "+key, err)
	}
	if len(b) > maxMeta {
		return nil, fmt.Errorf("s3blob: %s is over %d bytes: not a record of this store", key, maxMeta)
	}
	return b, nil
}

// CreateMeta writes a small record beside the blobs (PREFIX/name) unless
// one exists, conditionally (If-None-Match: *): of several processes
// creating it at once one wins, and each then reads back what was written.
// It reports whether this call wrote it.
func (be *Backend) CreateMeta(ctx context.Context, name string, data []byte) (bool, error) {
	if err := checkMetaName(name); err != nil {
		return false, err
	}
	if len(data) > maxMeta {
		return false, fmt.Errorf("s3blob: record %s: %d bytes, want at most %d", name, len(data), maxMeta)
	}
	key := be.keyBase + name
	_, err := be.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &be.loc.Bucket, Key: &key, Body: strings.NewReader(string(data)),
		ContentLength: aws.Int64(int64(len(data))), IfNoneMatch: aws.String("*"),
	})
	switch {
	case err == nil:
		return true, nil
	case isPreconditionFailed(err):
		return false, nil
	}
	return false, be.classify("write "+key, err)
}
