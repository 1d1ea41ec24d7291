package s3blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/cancel"
)

// Put stores the bytes read from r as a blob. The content is read to its
// end into a temp file in the cache directory while it is hashed, since the
// object's name is its digest; then, unless an object of that name and size
// exists (a dedup hit, with PutResult.Existed), it goes up conditionally
// (If-None-Match: *): in one request up to the part size, else as a
// multipart upload whose parts are read from the temp file, so memory stays
// bounded whatever the size. A writer that finds the object made meanwhile
// by another succeeds with Existed set. An object of the name with another
// size is damage and is overwritten with the blob's bytes. On any failure
// the upload is
// aborted and no object is made. The temp file then becomes the blob's file
// in the cache, if it can: once the object is stored, a failure to cache it
// does not fail the put.
func (be *Backend) Put(ctx context.Context, r io.Reader, ext string) (cas.PutResult, error) {
	return be.put(ctx, r, ext, false)
}

// Rewrite stores the bytes read from r as a blob, as Put does, but writes
// its object whatever the blob's name holds: for an object of the right
// size that a read found damaged, which Put trusts as a dedup hit. Every
// writer of the name writes the same bytes, so the object is overwritten
// in place, never deleted first (see upload).
func (be *Backend) Rewrite(ctx context.Context, r io.Reader, ext string) (cas.PutResult, error) {
	return be.put(ctx, r, ext, true)
}

func (be *Backend) put(ctx context.Context, r io.Reader, ext string, rewrite bool) (cas.PutResult, error) {
	if err := cas.CheckExt(ext); err != nil {
		return cas.PutResult{}, fmt.Errorf("s3blob: put: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return cas.PutResult{}, err
	}
	tmp, err := be.cache.createTemp()
	if err != nil {
		return cas.PutResult{}, err
	}
	h := cas.NewHashingReader(r)
	if _, err := cas.CopyContext(ctx, tmp, h); err != nil {
		be.cache.discard(tmp)
		if ctx.Err() != nil {
			return cas.PutResult{}, fmt.Errorf("s3blob: put: %w", ctx.Err())
		}
		return cas.PutResult{}, fmt.Errorf("s3blob: put: read content: %w", err)
	}
	b := cas.Blob{Digest: h.Digest(), Ext: ext}
	res := cas.PutResult{Blob: b, Size: h.Size()}
	var existed bool
	if rewrite {
		err = be.write(ctx, tmp, b, be.key(b), res.Size, false)
	} else {
		existed, err = be.upload(ctx, tmp, b, res.Size)
	}
	if err != nil {
		be.cache.discard(tmp)
		return res, err
	}
	res.Existed = existed
	// The blob is stored: the cache is best effort from here. A copy that
	// cannot be installed is dropped, and a read fetches the blob.
	if f, _, err := be.cache.install(tmp, b, res.Size); err == nil {
		f.Close()
	}
	return res, nil
}

// upload makes the blob's object from the temp file unless it exists,
// reporting whether it did.
func (be *Backend) upload(ctx context.Context, f *os.File, b cas.Blob, size int64) (bool, error) {
	key := be.key(b)
	for attempt := 0; ; attempt++ {
		info, err := be.Stat(ctx, b)
		switch {
		case err == nil && info.Size == size:
			return true, nil
		case err == nil:
			// An object of the blob's name with another size is damage
			// (one of the same size is trusted as a dedup hit: verify,
			// which re-hashes every object, is what finds that). Every
			// writer of this name writes the same bytes, so it is
			// overwritten unconditionally, never deleted first: a delete
			// could remove a good object another writer just made and
			// reported, and a writer dying between the delete and its
			// write would lose a blob that others recorded.
			return false, be.write(ctx, f, b, key, size, false)
		case !errors.Is(err, cas.ErrNotFound):
			return false, err
		}
		err = be.send(ctx, f, key, size, true)
		switch {
		case err == nil:
			return false, nil
		case isPreconditionFailed(err):
			// Another writer made the object first: the same bytes.
			return true, nil
		case isConditionalConflict(err) && attempt < 5:
			// Another conditional write of the key is in flight: wait for
			// its object to show rather than send everything again at
			// once; if it never does (that write failed), upload again.
			found, werr := be.awaitObject(ctx, b, size)
			if werr != nil || found {
				return found, werr
			}
			continue
		case ctx.Err() == nil:
			// A server refusing a conditional write may answer before it
			// has read the body and close the connection, which the client
			// sees as a reset rather than as 412: if the object is there
			// now, another writer made it.
			if info, serr := be.Stat(ctx, b); serr == nil && info.Size == size {
				return true, nil
			}
		}
		return false, be.classify("put "+b.FileName(), err)
	}
}

// write sends the temp file as the blob's object (see send) and
// classifies a failure.
func (be *Backend) write(ctx context.Context, f *os.File, b cas.Blob, key string, size int64, conditional bool) error {
	if err := be.send(ctx, f, key, size, conditional); err != nil {
		return be.classify("put "+b.FileName(), err)
	}
	return nil
}

// send uploads the temp file as the object key: in one request up to the
// part size, else as a multipart upload. When conditional is set the write
// is refused if the object exists (If-None-Match: *).
func (be *Backend) send(ctx context.Context, f *os.File, key string, size int64, conditional bool) error {
	if size <= be.partSize {
		return be.putObject(ctx, f, key, size, conditional)
	}
	return be.putMultipart(ctx, f, key, size, conditional)
}

// conflictPolls is how many times a writer that met another conditional
// write of its key in flight looks for that write's object before it
// uploads again.
const conflictPolls = 6

// awaitObject polls the blob's object with jittered, growing delays (from
// be.pollBase), honouring ctx, and reports whether it appeared with the
// blob's size.
func (be *Backend) awaitObject(ctx context.Context, b cas.Blob, size int64) (bool, error) {
	d := be.pollBase
	for range conflictPolls {
		wait := d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
		if err := cancel.Sleep(ctx, wait); err != nil {
			return false, fmt.Errorf("s3blob: put %s: %w", b.FileName(), err)
		}
		info, err := be.Stat(ctx, b)
		switch {
		case err == nil:
			return info.Size == size, nil
		case !errors.Is(err, cas.ErrNotFound):
			return false, err
		}
		d *= 2
	}
	return false, nil
}

func (be *Backend) putObject(ctx context.Context, f *os.File, key string, size int64, conditional bool) error {
	in := &s3.PutObjectInput{
		Bucket:        &be.loc.Bucket,
		Key:           &key,
		Body:          io.NewSectionReader(f, 0, size),
		ContentLength: aws.Int64(size),
	}
	if conditional {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := be.client.PutObject(ctx, in)
	return err
}

// partSizeFor returns the part size for content of size bytes: the
// backend's, or larger when that would need more than maxParts parts.
func (be *Backend) partSizeFor(size int64) int64 {
	ps := be.partSize
	if need := (size + maxParts - 1) / maxParts; need > ps {
		ps = (need + MinPartSize - 1) / MinPartSize * MinPartSize
	}
	return ps
}

// putMultipart uploads the file in parts, a few at a time, each read from
// the file as it is sent, and completes the upload (conditionally when
// conditional is set). Any failure aborts the upload, so that its parts do
// not linger.
func (be *Backend) putMultipart(ctx context.Context, f *os.File, key string, size int64, conditional bool) (err error) {
	created, err := be.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &be.loc.Bucket, Key: &key})
	if err != nil {
		return err
	}
	id := created.UploadId
	defer func() {
		if err == nil {
			return
		}
		// Abort even when ctx is done; give up after a while if the
		// server is gone.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		be.abortUpload(actx, key, id)
	}()
	ps := be.partSizeFor(size)
	n := int((size + ps - 1) / ps)
	parts := make([]types.CompletedPart, n)
	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	sem := make(chan struct{}, be.conc)
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-uctx.Done():
		}
		if uctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			off := int64(i) * ps
			length := min(ps, size-off)
			num := int32(i + 1)
			out, err := be.client.UploadPart(uctx, &s3.UploadPartInput{
				Bucket: &be.loc.Bucket, Key: &key, UploadId: id, PartNumber: &num,
				Body: io.NewSectionReader(f, off, length), ContentLength: aws.Int64(length),
			})
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				cancel()
				return
			}
			parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: &num}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	in := &s3.CompleteMultipartUploadInput{
		Bucket: &be.loc.Bucket, Key: &key, UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	if conditional {
		in.IfNoneMatch = aws.String("*")
	}
	_, err = be.client.CompleteMultipartUpload(ctx, in)
	return err
}

// AbortUploads aborts the multipart uploads of blobs under the store's
// prefix that began more than olderThan ago, and returns how many it
// aborted. A put that lost its server midway could not abort its upload;
// the parts stay invisible but take space until this runs, as gc will.
func (be *Backend) AbortUploads(ctx context.Context, olderThan time.Duration) (int, error) {
	prefix := be.keyBase + cas.BlobsDir + "/"
	cutoff := time.Now().Add(-olderThan)
	in := &s3.ListMultipartUploadsInput{Bucket: &be.loc.Bucket, Prefix: &prefix}
	if be.pageSize > 0 {
		in.MaxUploads = aws.Int32(be.pageSize)
	}
	// List every page first, then abort: a server may refuse a page
	// marker naming an upload that was aborted meanwhile.
	var stale []types.MultipartUpload
	for {
		out, err := be.client.ListMultipartUploads(ctx, in)
		if code, _ := apiCode(err); code == "InvalidArgument" && in.UploadIdMarker != nil {
			// Some servers (versitygw 1.8.0) refuse the upload-id marker
			// they returned. Go on after the key alone: further uploads
			// of that one key wait for the next run.
			in.UploadIdMarker = nil
			out, err = be.client.ListMultipartUploads(ctx, in)
		}
		if err != nil {
			return 0, be.classify("list uploads in "+be.loc.String(), err)
		}
		for _, u := range out.Uploads {
			if u.Initiated == nil || !u.Initiated.After(cutoff) {
				stale = append(stale, u)
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
	n := 0
	for _, u := range stale {
		if _, err := be.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
			Bucket: &be.loc.Bucket, Key: u.Key, UploadId: u.UploadId,
		}); err != nil {
			if errors.Is(be.classify("", err), cas.ErrNotFound) {
				continue // aborted or completed meanwhile
			}
			return n, be.classify("abort upload of "+aws.ToString(u.Key), err)
		}
		n++
	}
	return n, nil
}

// abortUpload aborts a multipart upload until the server no longer lists
// it: a part whose request was cut off may still be landing on the server
// when the first abort arrives, and bring the upload back, so S3 asks
// callers to abort again until ListParts no longer finds it. It gives up
// when ctx ends or the server cannot tell; AbortUploads collects what is
// left.
func (be *Backend) abortUpload(ctx context.Context, key string, id *string) {
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		be.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &be.loc.Bucket, Key: &key, UploadId: id})
		// Only an upload the server still lists is aborted again: gone
		// (NoSuchUpload) is done, and any other error (a server that went
		// away) leaves the rest to AbortUploads.
		if _, err := be.client.ListParts(ctx, &s3.ListPartsInput{Bucket: &be.loc.Bucket, Key: &key, UploadId: id}); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
