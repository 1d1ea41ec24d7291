package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/s3blob"
)

// ErrLocalOnly is returned by the operations that exist only for a store
// in a local directory (pack, repair), on a store in an object store.
var ErrLocalOnly = errors.New("works on a store in a local directory only")

// IsRemoteLocation reports whether a store location names an object store
// (s3://BUCKET/PREFIX) rather than a directory.
func IsRemoteLocation(location string) bool {
	return strings.HasPrefix(location, "s3://")
}

// OpenAt opens the store at location: a directory, as Open does, or an
// S3-compatible object store, s3://BUCKET[/PREFIX][?endpoint=URL][&region=R]
// (s3blob.ParseURL's syntax). A store in an object store keeps its keys in
// a shared PostgreSQL index: WithCreate needs WithIndexURL, which the store
// then records beside its marker, under the prefix, so that later opens
// need no index URL; it keeps recent blobs in a local read-through cache
// (WithCacheDir), whose files are what its pointers name. Credentials,
// region and endpoint come the standard AWS way (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL),
// or from the URL's endpoint= and region=.
func OpenAt(ctx context.Context, location string, opts ...Option) (*Store, error) {
	if IsRemoteLocation(location) {
		return openRemote(ctx, location, opts)
	}
	var c config
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if c.remote.cacheDir != "" || len(c.remote.s3opts) > 0 {
		return nil, fmt.Errorf("store: %s is a directory: a cache directory and object store options are for an s3:// store", location)
	}
	return Open(ctx, location, opts...)
}

// WithCacheDir sets the local read-through cache of a store in an object
// store: a directory of plain blob files at their digest paths, which
// pointers name, bounded (WithCacheSize) and evicting the least recently
// used. Several stores and processes may share one. The default is
// toolcas/BUCKET/HASH under the user's cache directory, HASH naming the
// endpoint and prefix (DefaultCacheDir). A directory store has no cache:
// OpenAt refuses the option there.
func WithCacheDir(dir string) Option {
	return func(c *config) error {
		if dir == "" {
			return errors.New("store: empty cache directory")
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fmt.Errorf("store: cache directory %s: %w", dir, err)
		}
		c.remote.cacheDir = abs
		return nil
	}
}

// WithCacheSize bounds the read-through cache of a store in an object
// store (default s3blob.DefaultCacheBytes).
func WithCacheSize(bytes int64) Option {
	return func(c *config) error {
		if bytes <= 0 {
			return fmt.Errorf("store: cache size %d: want a positive number of bytes", bytes)
		}
		c.remote.cacheMax = bytes
		return nil
	}
}

// WithS3Options passes options to s3blob.Open for a store in an object
// store: static credentials, an HTTP client, a part size.
func WithS3Options(opts ...s3blob.Option) Option {
	return func(c *config) error {
		c.remote.s3opts = append(c.remote.s3opts, opts...)
		return nil
	}
}

// DefaultCacheDir returns the cache directory of a store in an object
// store when none is given: toolcas/BUCKET/HASH under the user's cache
// directory, HASH the first 16 hex digits of the SHA-256 of the endpoint
// and prefix, so that stores of one bucket keep apart.
func DefaultCacheDir(loc s3blob.Location) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("store: no user cache directory (give one with --cache or WithCacheDir): %w", err)
	}
	sum := sha256.Sum256([]byte(loc.Endpoint + "\x00" + loc.Prefix))
	return filepath.Join(base, "toolcas", loc.Bucket, hex.EncodeToString(sum[:8])), nil
}

// Backend returns where the store keeps its blobs: the local directory
// (the same as Blobs), or the object store of a store opened at an s3://
// location.
func (s *Store) Backend() cas.Backend {
	if s.remote != nil {
		return s.remote.be
	}
	return s.blobs
}

// Remote reports whether the store keeps its blobs in an object store.
func (s *Store) Remote() bool { return s.remote != nil }

// Location returns where the store is: its directory, or its s3:// URL.
func (s *Store) Location() string {
	if s.remote != nil {
		return s.remote.be.Location().String()
	}
	return s.dir
}

// OpenBlob opens a blob for a read checked against its digest, from the
// store's blobs (for an object store, through the cache).
func (s *Store) OpenBlob(ctx context.Context, b cas.Blob) (*cas.Reader, error) {
	return s.Backend().Open(ctx, b)
}

// VerifyBlob re-hashes a blob, returning an error wrapping cas.ErrCorrupt
// when it does not hash to its name. On an object store the copy checked
// is the one reads use: the cached file, fetched (and checked) if absent.
func (s *Store) VerifyBlob(ctx context.Context, b cas.Blob) error {
	if s.remote == nil {
		return s.blobs.Verify(ctx, b)
	}
	r, err := s.remote.be.Open(ctx, b)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = cas.CopyContext(ctx, discard{}, r)
	return err
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
