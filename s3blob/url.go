package s3blob

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// A Location says where a store's blobs live in an object store: a bucket,
// a prefix inside it, and optionally the endpoint and region to reach it.
type Location struct {
	// Bucket is the bucket's name.
	Bucket string
	// Prefix is the path inside the bucket under which the store's objects
	// live, without a leading or trailing slash; empty for the bucket's top.
	Prefix string
	// Endpoint is the base URL of an S3-compatible server (http or https),
	// empty for the one the standard AWS configuration names.
	Endpoint string
	// Region is the region to sign requests for, empty for the one the
	// standard AWS configuration names.
	Region string
}

// ParseURL parses a store URL of the form
//
//	s3://BUCKET[/PREFIX][?endpoint=URL][&region=REGION]
//
// It returns an error wrapping ErrBadURL that names the problem.
func ParseURL(s string) (Location, error) {
	bad := func(format string, args ...any) (Location, error) {
		return Location{}, fmt.Errorf("%w %q: %s", ErrBadURL, clip(redactUserinfo(s)), fmt.Sprintf(format, args...))
	}
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return bad("want s3://BUCKET/PREFIX")
	}
	if strings.ContainsAny(rest, "#\\") {
		return bad("a store URL has no fragment and no backslash")
	}
	for _, c := range rest {
		if c < 0x20 || c == 0x7f || c == ' ' {
			return bad("control characters and spaces are not allowed")
		}
	}
	rest, rawQuery, _ := strings.Cut(rest, "?")
	bucket, prefix, _ := strings.Cut(rest, "/")
	if err := checkBucket(bucket); err != nil {
		return bad("%v", err)
	}
	loc := Location{Bucket: bucket}
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix != "" {
		unescaped, err := url.PathUnescape(prefix)
		if err != nil {
			return bad("prefix: %v", err)
		}
		if err := checkPrefix(unescaped); err != nil {
			return bad("%v", err)
		}
		loc.Prefix = unescaped
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return bad("query: %v", err)
	}
	for k, v := range q {
		if len(v) != 1 {
			return bad("%s= given %d times", k, len(v))
		}
		switch k {
		case "endpoint":
			ep, err := checkEndpoint(v[0])
			if err != nil {
				return bad("endpoint: %v", err)
			}
			loc.Endpoint = ep
		case "region":
			if err := checkRegion(v[0]); err != nil {
				return bad("region: %v", err)
			}
			loc.Region = v[0]
		default:
			return bad("unknown parameter %q (want endpoint= or region=)", clip(k))
		}
	}
	return loc, nil
}

// String returns the location as a URL that ParseURL reads back.
func (l Location) String() string {
	var b strings.Builder
	b.WriteString("s3://")
	b.WriteString(l.Bucket)
	if l.Prefix != "" {
		b.WriteString("/")
		b.WriteString((&url.URL{Path: l.Prefix}).EscapedPath())
	}
	q := url.Values{}
	if l.Endpoint != "" {
		q.Set("endpoint", l.Endpoint)
	}
	if l.Region != "" {
		q.Set("region", l.Region)
	}
	if len(q) > 0 {
		b.WriteString("?")
		b.WriteString(q.Encode())
	}
	return b.String()
}

// checkBucket applies S3's rules for bucket names: 3 to 63 lowercase
// letters, digits, dots and hyphens, starting and ending with a letter or
// digit, no two dots in a row, not an IP address.
func checkBucket(b string) error {
	if b == "" {
		return fmt.Errorf("no bucket name")
	}
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket name %q has %d characters, want 3 to 63", clip(b), len(b))
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return fmt.Errorf("bucket name %q has %q at offset %d; want lowercase letters, digits, dots and hyphens", clip(b), c, i)
		}
	}
	if !isAlnum(b[0]) || !isAlnum(b[len(b)-1]) {
		return fmt.Errorf("bucket name %q must start and end with a letter or digit", b)
	}
	if strings.Contains(b, "..") {
		return fmt.Errorf("bucket name %q has two dots in a row", b)
	}
	dotted := strings.Split(b, ".")
	if len(dotted) == 4 {
		digits := true
		for _, p := range dotted {
			for i := 0; i < len(p); i++ {
				digits = digits && '0' <= p[i] && p[i] <= '9'
			}
		}
		if digits {
			return fmt.Errorf("bucket name %q looks like an IP address", b)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
}

// checkPrefix refuses prefixes whose object names would not be what they
// say: empty elements, "." or "..", a leading slash, control characters.
func checkPrefix(p string) error {
	if len(p) > 512 {
		return fmt.Errorf("prefix is %d bytes long, want at most 512", len(p))
	}
	if strings.HasPrefix(p, "/") || path.Clean("/"+p) != "/"+p {
		return fmt.Errorf("prefix %q is not a clean path: no empty, \".\" or \"..\" elements", clip(p))
	}
	for _, c := range p {
		if c < 0x20 || c == 0x7f || c == '\\' || c == '?' || c == '#' || c == 0xfffd {
			return fmt.Errorf("prefix %q has a control character, a backslash, '?', '#' or invalid UTF-8", clip(p))
		}
	}
	return nil
}

// checkEndpoint accepts an http or https URL with a host and nothing after
// the path, and returns it without a trailing slash.
func checkEndpoint(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL", clip(stripUserinfo(s)))
	}
	shown := clip(stripUserinfo(s))
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: want an http:// or https:// URL", shown)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", fmt.Errorf("%q has no host", shown)
	}
	if u.User != nil {
		return "", fmt.Errorf("%q: holds credentials (user:secret@), which are not printed; give them as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", shown)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("%q: want only scheme, host, port and path", shown)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// userinfoRE matches the user and password of a URL inside a store URL,
// plain or query-escaped.
var userinfoRE = regexp.MustCompile(`(?i)(://|%3A%2F%2F)[^/?&#@]*(@|%40)`)

// redactUserinfo removes every user:password@ from a store URL.
func redactUserinfo(s string) string { return userinfoRE.ReplaceAllString(s, "$1") }

// stripUserinfo removes the user and password of a URL, or of what looks
// like one, so that an error never prints a secret.
func stripUserinfo(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	host, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = host[i+1:]
	}
	if path != "" || strings.Contains(rest, "/") {
		return scheme + "://" + host + "/" + path
	}
	return scheme + "://" + host
}

func checkRegion(r string) error {
	if r == "" || len(r) > 64 {
		return fmt.Errorf("%q: want 1 to 64 characters", clip(r))
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return fmt.Errorf("%q has %q; want lowercase letters, digits and hyphens", clip(r), c)
		}
	}
	return nil
}

func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// OpenURL parses a store URL (see ParseURL) and opens the store there, as
// Open does.
func OpenURL(ctx context.Context, rawURL string, opts ...Option) (*Backend, error) {
	loc, err := ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("s3blob: %w", err)
	}
	return Open(ctx, loc, opts...)
}

// DefaultCacheBytes is a cache bound for callers that have no better one:
// 10 GiB.
const DefaultCacheBytes = 10 << 30

// DefaultCacheDir returns the cache directory for callers that name none:
// toolcas/blobs under the user's cache directory ($XDG_CACHE_HOME or
// ~/.cache on Linux). Every store may share it: cached files are named by
// their digest and checked on every read.
func DefaultCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("s3blob: no user cache directory (give one): %w", err)
	}
	return filepath.Join(base, "toolcas", "blobs"), nil
}
