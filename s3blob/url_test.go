package s3blob

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/internal/versitygw"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Location
	}{
		{"s3://bucket", Location{Bucket: "bucket"}},
		{"s3://bucket/", Location{Bucket: "bucket"}},
		{"s3://my.bucket-1/team/store", Location{Bucket: "my.bucket-1", Prefix: "team/store"}},
		{"s3://bucket/team/store/", Location{Bucket: "bucket", Prefix: "team/store"}},
		{"s3://bucket/a%20b", Location{Bucket: "bucket", Prefix: "a b"}},
		{"s3://bucket/p?endpoint=http://127.0.0.1:7070", Location{Bucket: "bucket", Prefix: "p", Endpoint: "http://127.0.0.1:7070"}},
		{"s3://bucket?endpoint=https%3A%2F%2Fs3.example.com%2F&region=eu-west-3",
			Location{Bucket: "bucket", Endpoint: "https://s3.example.com", Region: "eu-west-3"}},
	} {
		got, err := ParseURL(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		back, err := ParseURL(got.String())
		if err != nil || back != got {
			t.Errorf("ParseURL(%q.String() = %q) = %+v, %v; want %+v", tc.in, got.String(), back, err, got)
		}
	}
}

func TestParseURLErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "want s3://BUCKET/PREFIX"},
		{"/tmp/store", "want s3://BUCKET/PREFIX"},
		{"S3://bucket", "want s3://BUCKET/PREFIX"},
		{"s3://", "no bucket name"},
		{"s3:///prefix", "no bucket name"},
		{"s3://ab", "want 3 to 63"},
		{"s3://" + strings.Repeat("a", 64), "want 3 to 63"},
		{"s3://Bucket", "lowercase"},
		{"s3://buck_et", "lowercase"},
		{"s3://-bucket", "start and end"},
		{"s3://bucket.", "start and end"},
		{"s3://buc..ket", "two dots"},
		{"s3://192.168.1.1", "IP address"},
		{"s3://bucket//p", "not a clean path"},
		{"s3://bucket/a/../b", "not a clean path"},
		{"s3://bucket/./b", "not a clean path"},
		{"s3://bucket/a%2F%2Fb", "not a clean path"},
		{"s3://bucket/a%00b", "control character"},
		{"s3://bucket/a%zz", "prefix"},
		{"s3://bucket/p#frag", "no fragment"},
		{"s3://bucket/p q", "spaces"},
		{"s3://bucket?endpoint=ftp://x", "http:// or https://"},
		{"s3://bucket?endpoint=http://", "no host"},
		{"s3://bucket?endpoint=http://u:topsecret@host", "AWS_ACCESS_KEY_ID"},
		{"s3://bucket?endpoint=http%3A%2F%2Fu%3Atopsecret%40host", "AWS_ACCESS_KEY_ID"},
		{"s3://bucket?endpoint=http://h&endpoint=http://i", "given 2 times"},
		{"s3://bucket?region=EU", "lowercase"},
		{"s3://bucket?region=", "want 1 to 64"},
		{"s3://bucket?pathstyle=1", "unknown parameter"},
		{"s3://bucket?a=%zz", "query"},
	} {
		_, err := ParseURL(tc.in)
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseURL(%q) = %v, want ErrBadURL saying %q", tc.in, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "topsecret") {
			t.Errorf("ParseURL(%q) = %v: prints the secret", tc.in, err)
		}
	}
}

// FuzzParseURL checks that ParseURL never panics, and that whatever it
// accepts is a valid location that prints back to itself.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://bucket", "s3://b-1.x/a/b?endpoint=http://h:1&region=us-east-1", "s3://bucket/a%20b/", "s3://x", "s3://bucket?endpoint=https%3A%2F%2Fh"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		loc, err := ParseURL(s)
		if err != nil {
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("ParseURL(%q) = %v, not wrapping ErrBadURL", s, err)
			}
			return
		}
		if err := checkBucket(loc.Bucket); err != nil {
			t.Fatalf("ParseURL(%q) accepted bucket %q: %v", s, loc.Bucket, err)
		}
		if loc.Prefix != "" {
			if err := checkPrefix(loc.Prefix); err != nil {
				t.Fatalf("ParseURL(%q) accepted prefix %q: %v", s, loc.Prefix, err)
			}
			if strings.HasSuffix(loc.Prefix, "/") || strings.Contains(loc.Prefix, "..") && strings.Contains("/"+loc.Prefix+"/", "/../") {
				t.Fatalf("ParseURL(%q) accepted prefix %q", s, loc.Prefix)
			}
		}
		back, err := ParseURL(loc.String())
		if err != nil || back != loc {
			t.Fatalf("ParseURL(%q) = %+v, whose String %q parses to %+v, %v", s, loc, loc.String(), back, err)
		}
	})
}

func TestOpenURL(t *testing.T) {
	if _, err := OpenURL(t.Context(), "s3://UPPER", WithCache(t.TempDir(), 1<<20)); !errors.Is(err, ErrBadURL) {
		t.Errorf("OpenURL of a bad URL = %v, want ErrBadURL", err)
	}
	srv := versitygw.Start(t)
	be, err := OpenURL(t.Context(), "s3://open-url/p?endpoint="+srv.Endpoint(), WithCreate(),
		WithCredentials(srv.AccessKey, srv.SecretKey), WithCache(t.TempDir(), 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Location{Bucket: "open-url", Prefix: "p", Endpoint: srv.Endpoint()}); be.Location() != want {
		t.Errorf("Location() = %+v, want %+v", be.Location(), want)
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/somewhere/cache")
	t.Setenv("HOME", "/home/someone")
	got, err := DefaultCacheDir()
	if err != nil || got != "/somewhere/cache/toolcas/blobs" {
		t.Errorf("DefaultCacheDir() = %q, %v; want /somewhere/cache/toolcas/blobs", got, err)
	}
}
