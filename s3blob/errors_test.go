package s3blob

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTransportErrors opens stores on endpoints that fail in different
// ways below HTTP: each error says what failed, under its own sentinel.
func TestTransportErrors(t *testing.T) {
	isolateAWSConfig(t)
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	for _, tc := range []struct {
		name     string
		endpoint string
		want     error
		not      error
		says     []string
	}{
		{"self-signed certificate", tlsSrv.URL, ErrTLS, ErrUnreachable, []string{"TLS", "certificate", tlsSrv.URL}},
		{"https to a plain server", strings.Replace(plain.URL, "http:", "https:", 1), ErrTLS, ErrUnreachable, []string{"TLS"}},
		{"unresolvable host", "http://no-such-host.invalid", ErrUnreachable, ErrTLS, []string{"does not resolve", "no-such-host.invalid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(t.Context(), Location{Bucket: "bkt1", Endpoint: tc.endpoint},
				WithCredentials("k", "s"), WithCache(t.TempDir(), 1<<20), WithMaxAttempts(1))
			if !errors.Is(err, tc.want) || errors.Is(err, tc.not) {
				t.Fatalf("Open = %v, want %v and not %v", err, tc.want, tc.not)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

// TestOpenValidatesConfiguration gives Open malformed endpoints and
// regions, in the location and in the environment: a clear error before
// any request, never printing a secret found in an endpoint.
func TestOpenValidatesConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name string
		loc  Location
		env  map[string]string
		want error
		says string
	}{
		{"userinfo in the location's endpoint", Location{Bucket: "bkt1", Endpoint: "http://AKIA:topsecret@127.0.0.1:1"}, nil, ErrBadURL, "credentials"},
		{"ftp endpoint in the location", Location{Bucket: "bkt1", Endpoint: "ftp://127.0.0.1:1"}, nil, ErrBadURL, "http"},
		{"bad region in the location", Location{Bucket: "bkt1", Endpoint: "http://127.0.0.1:1", Region: "EU WEST"}, nil, ErrBadURL, "region"},
		{"userinfo in AWS_ENDPOINT_URL_S3", Location{Bucket: "bkt1"}, map[string]string{"AWS_ENDPOINT_URL_S3": "https://AKIA:topsecret@s3.example.com"}, ErrBadConfig, "AWS_ENDPOINT_URL_S3"},
		{"no host in AWS_ENDPOINT_URL", Location{Bucket: "bkt1"}, map[string]string{"AWS_ENDPOINT_URL": "http://"}, ErrBadConfig, "AWS_ENDPOINT_URL"},
		{"bad AWS_REGION", Location{Bucket: "bkt1", Endpoint: "http://127.0.0.1:1"}, map[string]string{"AWS_REGION": "us east 1"}, ErrBadConfig, "AWS_REGION"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolateAWSConfig(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := Open(t.Context(), tc.loc, WithCredentials("k", "s"), WithCache(t.TempDir(), 1<<20), WithMaxAttempts(1))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Open = %v, want %v saying %q", err, tc.want, tc.says)
			}
			if strings.Contains(err.Error(), "topsecret") {
				t.Errorf("error %q prints the endpoint's secret", err)
			}
		})
	}
}

// TestEndpointNameHidesUserinfo checks that errors name an endpoint
// without its user and password.
func TestEndpointNameHidesUserinfo(t *testing.T) {
	be := &Backend{endpoint: "http://AKIA:topsecret@127.0.0.1:9000/base"}
	if got, want := be.endpointName(), "http://127.0.0.1:9000/base"; got != want {
		t.Errorf("endpointName = %q, want %q", got, want)
	}
}

// TestCredentialFailureSaysWhat uses a profile whose credential process
// fails: the error says that getting credentials failed and why, not that
// none were found.
func TestCredentialFailureSaysWhat(t *testing.T) {
	isolateAWSConfig(t)
	cfg := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(cfg, []byte("[profile broken]\ncredential_process = /bin/false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", cfg)
	t.Setenv("AWS_PROFILE", "broken")
	_, err := Open(t.Context(), Location{Bucket: "bkt1", Endpoint: "http://127.0.0.1:1"}, WithCache(t.TempDir(), 1<<20))
	if !errors.Is(err, ErrCredentials) {
		t.Fatalf("Open with a failing credential process = %v, want ErrCredentials", err)
	}
	if strings.Contains(err.Error(), "none found") || !strings.Contains(err.Error(), "could not get") {
		t.Errorf("error %q: want it to say getting the credentials failed, not that none were found", err)
	}
}

// TestCreateBucketNamesRegion runs casctl init's Open against a server
// that records the create-bucket request: outside us-east-1 it names the
// region as the bucket's location, as AWS requires; in us-east-1 it names
// none, as AWS requires too.
func TestCreateBucketNamesRegion(t *testing.T) {
	for _, tc := range []struct{ region, want string }{
		{"eu-west-3", "<LocationConstraint>eu-west-3</LocationConstraint>"},
		{"us-east-1", ""},
	} {
		t.Run(tc.region, func(t *testing.T) {
			isolateAWSConfig(t)
			var mu sync.Mutex
			var created []string
			made := false
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case r.Method == http.MethodGet && !made:
					w.Header().Set("Content-Type", "application/xml")
					w.WriteHeader(http.StatusNotFound)
					io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchBucket</Code><Message>no</Message></Error>`)
				case r.Method == http.MethodPut && r.URL.Path == "/bkt1":
					created = append(created, string(body))
					made = true
				case r.Method == http.MethodPut:
					w.Header().Set("ETag", `"x"`)
				default:
					w.WriteHeader(http.StatusNotImplemented)
				}
			}))
			defer srv.Close()
			_, err := Open(t.Context(), Location{Bucket: "bkt1", Endpoint: srv.URL, Region: tc.region},
				WithCreate(), WithCredentials("k", "s"), WithCache(t.TempDir(), 1<<20), WithMaxAttempts(1))
			if err != nil {
				t.Fatal(err)
			}
			if len(created) != 1 {
				t.Fatalf("%d create-bucket requests, want 1", len(created))
			}
			if tc.want == "" && strings.Contains(created[0], "LocationConstraint") || !strings.Contains(created[0], tc.want) {
				t.Errorf("create-bucket body = %q, want %q", created[0], tc.want)
			}
		})
	}
}

// TestCloseClosesIdleConnections opens a store on a server that counts its
// connections: after Close, the connection Open left idle is closed.
func TestCloseClosesIdleConnections(t *testing.T) {
	isolateAWSConfig(t)
	closed := make(chan struct{}, 16)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"format":1,"hash":"blake3","shard_width":2}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	defer srv.Close()
	be, err := Open(t.Context(), Location{Bucket: "bkt1", Endpoint: srv.URL}, WithCredentials("k", "s"), WithCache(t.TempDir(), 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
		t.Fatal("the connection closed before Close")
	default:
	}
	be.Close()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("no connection closed within 10 s of Close")
	}
}

// A request on a kept connection that the server closed (it was killed
// between two requests) fails with net/http's own error, which is the
// object store being unreachable.
func TestServerClosedIdleIsUnreachable(t *testing.T) {
	err := &url.Error{Op: "Head", URL: "http://127.0.0.1:1/bkt1/blobs/ab/x.txt", Err: errors.New("http: server closed idle connection")}
	if !isUnreachable(err) {
		t.Errorf("isUnreachable(%v) = false", err)
	}
	if isUnreachable(errors.New("http: request body too large")) {
		t.Error("isUnreachable says an unrelated error is one")
	}
}

// A request whose body was being sent when the server went away fails on
// the connection net/http closed meanwhile: the object store is
// unreachable, and classify says so, naming the endpoint.
func TestClosedMidBodyIsUnreachable(t *testing.T) {
	write := &net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed}
	err := &url.Error{Op: "Put", URL: "http://127.0.0.1:1/bkt1/blobs/ab/x.bin?partNumber=2",
		Err: &net.OpError{Op: "readfrom", Net: "tcp", Err: write}}
	if !isUnreachable(err) {
		t.Errorf("isUnreachable(%v) = false", err)
	}
	be := &Backend{}
	if got := be.classify("put x", err); !errors.Is(got, ErrUnreachable) {
		t.Errorf("classify(%v) = %v, want ErrUnreachable", err, got)
	}
}
