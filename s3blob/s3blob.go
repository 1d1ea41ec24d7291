// Package s3blob keeps a store's blobs in an S3-compatible object store, with
// a bounded local read-through cache of plain files.
//
// Objects are named as blob files are on disk, under the location's prefix:
// PREFIX/blobs/3f/3fa9….txt, and PREFIX/toolcas.json marks the store. Every
// write is conditional (If-None-Match: *), so that writers of the same blob
// on many machines all succeed and none overwrites another; content larger
// than a part goes up as a multipart upload streamed from a local temp file,
// so memory stays bounded; every read is re-hashed. Credentials, region and
// endpoint come from the standard AWS configuration (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL,
// profiles); the location may name the region and endpoint, never
// credentials.
//
// Most programs never import s3blob: store.Open of an s3:// location (with
// the index on PostgreSQL) uses it.
package s3blob

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/option"
)

// MinPartSize is the smallest part of a multipart upload S3 accepts.
const MinPartSize = 5 << 20

// DefaultPartSize is the part size of multipart uploads unless WithPartSize
// says otherwise; content up to this size goes up in one request.
const DefaultPartSize = 16 << 20

// maxParts is the most parts one upload may have.
const maxParts = 10000

// An Option configures Open.
type Option func(*options) error

type options struct {
	create      bool
	cacheDir    string
	cacheMax    int64
	httpClient  *http.Client
	accessKey   string
	secretKey   string
	partSize    int64
	maxAttempts int
	now         func() time.Time
	concurrency int
}

// WithCreate makes Open create the bucket if it does not exist and mark the
// store at the prefix if it is not marked yet, as casctl init does.
func WithCreate() Option {
	return func(o *options) error { o.create = true; return nil }
}

// WithCache sets the local read-through cache: a directory of plain blob
// files at their digest paths, at most maxBytes in total, shared safely by
// every process that names it. It is required.
func WithCache(dir string, maxBytes int64) Option {
	return func(o *options) error {
		if dir == "" {
			return errors.New("s3blob: empty cache directory")
		}
		if maxBytes <= 0 {
			return fmt.Errorf("s3blob: cache size %d: want a positive number of bytes", maxBytes)
		}
		o.cacheDir, o.cacheMax = dir, maxBytes
		return nil
	}
}

// WithHTTPClient sends every request through c, for proxies, TLS settings
// or tests. The client's own TLS settings apply: AWS_CA_BUNDLE is not
// added to them.
func WithHTTPClient(c *http.Client) Option {
	return option.Check(c != nil, func(o *options) { o.httpClient = c }, "s3blob: nil HTTP client")
}

// WithCredentials uses a static access key and secret instead of the
// standard AWS configuration's.
func WithCredentials(accessKey, secretKey string) Option {
	return func(o *options) error {
		if accessKey == "" || secretKey == "" {
			return fmt.Errorf("s3blob: %w: empty access key or secret", ErrCredentials)
		}
		o.accessKey, o.secretKey = accessKey, secretKey
		return nil
	}
}

// WithPartSize sets the size of a multipart upload's parts, and so the
// largest content sent in one request (default DefaultPartSize). Content
// so large that it would need more than 10,000 parts gets larger parts.
func WithPartSize(n int64) Option {
	return option.Check(MinPartSize <= n && n <= 5<<30, func(o *options) { o.partSize = n },
		"s3blob: part size %d: want %d to %d bytes", n, MinPartSize, int64(5<<30))
}

// WithMaxAttempts sets how many times a failing request is tried in all
// (default 3).
func WithMaxAttempts(n int) Option {
	return option.Check(1 <= n && n <= 20, func(o *options) { o.maxAttempts = n }, "s3blob: max attempts %d: want 1 to 20", n)
}

// WithClock replaces the clock the cache uses to order blobs by last use,
// so that tests of eviction advance time instead of sleeping.
func WithClock(now func() time.Time) Option {
	return option.Check(now != nil, func(o *options) { o.now = now }, "s3blob: nil clock")
}

// Backend is a cas.Backend on an S3-compatible object store. It is safe for
// concurrent use by many goroutines and many processes, on many machines.
type Backend struct {
	loc       Location
	region    string // the region requests are signed for
	client    *s3.Client
	endpoint  string
	keyBase   string // the prefix and a slash, or ""
	cache     *Cache
	partSize  int64
	conc      int
	pollBase  time.Duration // first delay of awaitObject
	closeIdle func()        // closes the idle connections of the backend's own HTTP client
	pageSize  int32         // keys per listing page; 0 is the server's default (1000), tests set it small
	fetches   atomic.Int64  // GETs of blob objects, for tests of the cache
}

// The object store is a blob backend whose reads can bypass its cache.
var (
	_ cas.Backend      = (*Backend)(nil)
	_ cas.RemoteOpener = (*Backend)(nil)
)

// Open connects to the store at loc. It checks that the bucket exists and
// holds a store at the prefix: a missing bucket gives ErrNoBucket and a
// missing marker cas.ErrNoStore, unless WithCreate is given, when both are
// made. Refused or missing credentials give ErrCredentials.
func Open(ctx context.Context, loc Location, opts ...Option) (*Backend, error) {
	o := options{partSize: DefaultPartSize, maxAttempts: 3, now: time.Now, concurrency: 4}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if err := checkBucket(loc.Bucket); err != nil {
		return nil, fmt.Errorf("s3blob: %w: %v", ErrBadURL, err)
	}
	if loc.Prefix != "" {
		if err := checkPrefix(loc.Prefix); err != nil {
			return nil, fmt.Errorf("s3blob: %w: %v", ErrBadURL, err)
		}
	}
	if o.cacheDir == "" {
		return nil, errors.New("s3blob: no cache directory: pass WithCache")
	}
	cache, err := NewCache(o.cacheDir, o.cacheMax, o.now)
	if err != nil {
		return nil, err
	}
	if loc.Endpoint != "" {
		if _, err := checkEndpoint(loc.Endpoint); err != nil {
			return nil, fmt.Errorf("s3blob: %w: endpoint %v", ErrBadURL, err)
		}
	}
	if loc.Region != "" {
		if err := checkRegion(loc.Region); err != nil {
			return nil, fmt.Errorf("s3blob: %w: region %v", ErrBadURL, err)
		}
	}
	endpoint := loc.Endpoint
	for _, k := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if endpoint != "" {
			break
		}
		if v := os.Getenv(k); v != "" {
			ep, err := checkEndpoint(v)
			if err != nil {
				return nil, fmt.Errorf("s3blob: %w: %s: %v", ErrBadConfig, k, err)
			}
			endpoint = ep
		}
	}
	var lopts []func(*config.LoadOptions) error
	lopts = append(lopts, config.WithRetryMaxAttempts(o.maxAttempts))
	if loc.Region != "" {
		lopts = append(lopts, config.WithRegion(loc.Region))
	}
	if o.accessKey != "" {
		lopts = append(lopts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.accessKey, o.secretKey, "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lopts...)
	if err != nil {
		return nil, fmt.Errorf("s3blob: load AWS configuration: %w", err)
	}
	if endpoint == "" && cfg.BaseEndpoint != nil {
		ep, err := checkEndpoint(*cfg.BaseEndpoint)
		if err != nil {
			return nil, fmt.Errorf("s3blob: %w: the AWS configuration's endpoint_url: %v", ErrBadConfig, err)
		}
		endpoint = ep
	}
	if cfg.Region != "" && loc.Region == "" {
		if err := checkRegion(cfg.Region); err != nil {
			return nil, fmt.Errorf("s3blob: %w: region from AWS_REGION or the profile: %v", ErrBadConfig, err)
		}
	}
	if cfg.Region == "" {
		if endpoint == "" {
			return nil, fmt.Errorf("s3blob: %w: set AWS_REGION, or region= in the store URL", ErrNoRegion)
		}
		// Servers other than AWS mostly ignore the region, but requests
		// must be signed for one.
		cfg.Region = "us-east-1"
	}
	be := &Backend{loc: loc, region: cfg.Region, endpoint: endpoint, cache: cache, partSize: o.partSize, conc: o.concurrency, pollBase: 200 * time.Millisecond}
	if loc.Prefix != "" {
		be.keyBase = loc.Prefix + "/"
	}
	be.client = s3.NewFromConfig(cfg, func(so *s3.Options) {
		if endpoint != "" {
			so.BaseEndpoint = aws.String(endpoint)
			// Custom endpoints seldom resolve a host name per bucket.
			so.UsePathStyle = true
		}
		if o.httpClient != nil {
			so.HTTPClient = o.httpClient
		} else if bc, ok := sdkClient(cfg.HTTPClient); ok {
			// The SDK's client, as configured (AWS_CA_BUNDLE included),
			// on a transport of the backend's own, so that Close can
			// close its idle connections.
			hc := &http.Client{Transport: bc.GetTransport(), Timeout: bc.GetTimeout()}
			so.HTTPClient = hc
			be.closeIdle = hc.CloseIdleConnections
		}
	})
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("s3blob: %w: none configured: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile", ErrCredentials)
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return nil, fmt.Errorf("s3blob: %w: %s", ErrCredentials, credentialFailure(err))
	}
	if err := be.checkStore(ctx, o.create); err != nil {
		be.Close()
		return nil, err
	}
	return be, nil
}

// sdkClient returns the SDK's buildable HTTP client the configuration holds
// (with AWS_CA_BUNDLE applied), or a default one when it holds none.
func sdkClient(c aws.HTTPClient) (*awshttp.BuildableClient, bool) {
	if c == nil {
		return awshttp.NewBuildableClient(), true
	}
	bc, ok := c.(*awshttp.BuildableClient)
	return bc, ok
}

// Location returns where the store is.
func (be *Backend) Location() Location { return be.loc }

// Cache returns the backend's local read-through cache.
func (be *Backend) Cache() *Cache { return be.cache }

// endpointName names the server in errors, never with a user or password.
func (be *Backend) endpointName() string {
	if be.endpoint != "" {
		return stripUserinfo(be.endpoint)
	}
	return "the object store"
}

func (be *Backend) key(b cas.Blob) string {
	return be.keyBase + b.RelPath()
}

// Path returns the blob's file in the local cache. It is there after a put
// or a read of the blob, until the cache evicts it; the next read fetches it
// again.
func (be *Backend) Path(b cas.Blob) string { return be.cache.Path(b) }

// Stat describes a blob's object without reading it.
func (be *Backend) Stat(ctx context.Context, b cas.Blob) (cas.BlobInfo, error) {
	if err := ctx.Err(); err != nil {
		return cas.BlobInfo{}, err
	}
	if err := cas.CheckExt(b.Ext); err != nil {
		return cas.BlobInfo{}, fmt.Errorf("s3blob: stat: %w", err)
	}
	key := be.key(b)
	out, err := be.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &be.loc.Bucket, Key: &key})
	if err != nil {
		return cas.BlobInfo{}, be.classify("stat "+b.FileName(), err)
	}
	return cas.BlobInfo{Blob: b, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// Open opens a blob for a checked read: from the cache when it holds the
// blob (re-hashed before it is handed out, and fetched again if it is
// damaged), else fetched into the cache, re-hashed on the way, and read from
// there. A blob whose object does not hash to its name gives an error
// wrapping cas.ErrCorrupt, and nothing enters the cache.
//
// A cached blob is served without asking the store whether it still holds
// it, as cas.Fetcher allows: after another machine's Remove, Open may still
// succeed from the cache while Stat and OpenRemote say cas.ErrNotFound. A
// round trip per read would defeat the cache, and gc removes only blobs no
// index row names. Callers that must see the store, as verify does, use
// Stat or OpenRemote (cas.OpenStored).
func (be *Backend) Open(ctx context.Context, b cas.Blob) (*cas.Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := cas.CheckExt(b.Ext); err != nil {
		return nil, fmt.Errorf("s3blob: open: %w", err)
	}
	f, size, err := be.cache.open(ctx, b)
	if errors.Is(err, cas.ErrNotFound) {
		f, size, err = be.fetch(ctx, b)
	}
	if err != nil {
		return nil, err
	}
	return cas.NewReader(f, b, size), nil
}

// OpenRemote opens a blob's object for a checked read straight from the
// object store, bypassing the cache: verify reads so, to check what is
// stored rather than a copy.
func (be *Backend) OpenRemote(ctx context.Context, b cas.Blob) (*cas.Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := cas.CheckExt(b.Ext); err != nil {
		return nil, fmt.Errorf("s3blob: open: %w", err)
	}
	key := be.key(b)
	be.fetches.Add(1)
	out, err := be.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &be.loc.Bucket, Key: &key})
	if err != nil {
		return nil, be.classify("open "+b.FileName(), err)
	}
	return cas.NewReader(out.Body, b, aws.ToInt64(out.ContentLength)), nil
}

// fetch downloads a blob into the cache, checks it, and opens the cached
// file.
func (be *Backend) fetch(ctx context.Context, b cas.Blob) (*os.File, int64, error) {
	r, err := be.OpenRemote(ctx, b)
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	tmp, err := be.cache.createTemp()
	if err != nil {
		return nil, 0, err
	}
	n, err := cas.CopyContext(ctx, tmp, r)
	if err != nil {
		be.cache.discard(tmp)
		if errors.Is(err, cas.ErrCorrupt) {
			return nil, 0, fmt.Errorf("s3blob: fetch %s: %w", b.FileName(), err)
		}
		return nil, 0, be.classify("fetch "+b.FileName(), err)
	}
	return be.cache.install(tmp, b, n)
}

// Remove deletes a blob's object and its cached file.
func (be *Backend) Remove(ctx context.Context, b cas.Blob) error {
	if _, err := be.Stat(ctx, b); err != nil {
		return err
	}
	key := be.key(b)
	if _, err := be.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &be.loc.Bucket, Key: &key}); err != nil {
		return be.classify("remove "+b.FileName(), err)
	}
	return be.cache.remove(b)
}

// Walk lists every object under the store's blobs/, page by page. Object
// stores keep no temp files: an upload in progress is not an object.
func (be *Backend) Walk(ctx context.Context, fn func(cas.Entry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	prefix := be.keyBase + cas.BlobsDir + "/"
	in := &s3.ListObjectsV2Input{Bucket: &be.loc.Bucket, Prefix: &prefix}
	if be.pageSize > 0 {
		in.MaxKeys = aws.Int32(be.pageSize)
	}
	p := s3.NewListObjectsV2Paginator(be.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return be.classify("list "+be.loc.String(), err)
		}
		for _, obj := range page.Contents {
			if err := ctx.Err(); err != nil {
				return err
			}
			rel := strings.TrimPrefix(aws.ToString(obj.Key), be.keyBase)
			e := cas.Entry{Kind: cas.EntryBlob, RelPath: rel, Size: aws.ToInt64(obj.Size), ModTime: aws.ToTime(obj.LastModified)}
			b, err := cas.ParseBlobPath(rel)
			if err != nil {
				e.Kind = cas.EntryStray
				e.Problem = "not a blob name"
			} else {
				e.Blob = b
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close closes the idle connections of the backend's HTTP client (not of
// one given with WithHTTPClient, which is the caller's). Requests still in
// flight finish.
func (be *Backend) Close() error {
	if be.closeIdle != nil {
		be.closeIdle()
	}
	return nil
}
