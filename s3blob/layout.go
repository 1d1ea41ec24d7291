package s3blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/toolcas/toolcas/cas"
)

// checkStore checks that the bucket exists and the prefix holds a store,
// making both when create is set.
func (be *Backend) checkStore(ctx context.Context, create bool) error {
	key := be.keyBase + cas.MarkerFile
	out, err := be.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &be.loc.Bucket, Key: &key})
	err = be.classify("open "+be.loc.String(), err)
	switch {
	case errors.Is(err, ErrNoBucket) && create:
		if err := be.createBucket(ctx); err != nil {
			return err
		}
		return be.writeMarker(ctx)
	case errors.Is(err, cas.ErrNotFound) && create:
		return be.writeMarker(ctx)
	case errors.Is(err, cas.ErrNotFound):
		return fmt.Errorf("s3blob: %w at %s: no %s (create one with casctl init)", cas.ErrNoStore, be.loc, cas.MarkerFile)
	case err != nil:
		return err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, 64<<10))
	if err != nil {
		return be.classify("read "+key, err)
	}
	if err := cas.CheckMarker(b, cas.MarkerFile+" in "+be.loc.String(), be.loc.String()); err != nil {
		return fmt.Errorf("s3blob: %w", err)
	}
	return nil
}

func (be *Backend) createBucket(ctx context.Context) error {
	_, err := be.client.CreateBucket(ctx, createBucketInput(be.loc.Bucket, be.region))
	if err != nil {
		var owned *types.BucketAlreadyOwnedByYou
		var exists *types.BucketAlreadyExists
		if errors.As(err, &owned) || errors.As(err, &exists) {
			// Another process made it first.
			return nil
		}
		return be.classify("create bucket "+be.loc.Bucket, err)
	}
	return nil
}

// createBucketInput is the request that creates a bucket in region: AWS
// makes buckets in us-east-1 unless told otherwise, and refuses a request
// that names no location to an endpoint of another region.
func createBucketInput(bucket, region string) *s3.CreateBucketInput {
	in := &s3.CreateBucketInput{Bucket: &bucket}
	if region != "" && region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(region),
		}
	}
	return in
}

func (be *Backend) writeMarker(ctx context.Context) error {
	b := cas.MarkerContent()
	key := be.keyBase + cas.MarkerFile
	_, err := be.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &be.loc.Bucket, Key: &key, Body: strings.NewReader(string(b)),
		ContentLength: aws.Int64(int64(len(b))), IfNoneMatch: aws.String("*"),
	})
	if err != nil && !isPreconditionFailed(err) {
		return be.classify("write "+key, err)
	}
	return nil
}
