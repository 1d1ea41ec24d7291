// Package versitygw runs a private versitygw S3 server for tests: its posix
// backend on a temp directory, listening on a loopback port, with a root
// access key made up for the test. It is a real S3 server that checks
// signatures and honours conditional writes.
package versitygw

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Version is the versitygw release the tests are written against.
const Version = "v1.8.0"

// Install says how to get the binary, for skip and failure messages.
const Install = "go install github.com/versity/versitygw/cmd/versitygw@" + Version +
	" (or set TOOLCAS_VERSITYGW to its path)"

// Binary finds the versitygw binary: $TOOLCAS_VERSITYGW, else versitygw on
// PATH, else in $(go env GOPATH)/bin.
func Binary() (string, error) {
	if p := os.Getenv("TOOLCAS_VERSITYGW"); p != "" {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			return "", fmt.Errorf("TOOLCAS_VERSITYGW=%s is not a file", p)
		}
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	var dirs []string
	if gp := os.Getenv("GOPATH"); gp != "" {
		dirs = append(dirs, filepath.SplitList(gp)...)
	} else if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		dirs = append(dirs, filepath.SplitList(strings.TrimSpace(string(out)))...)
	}
	for _, d := range dirs {
		p := filepath.Join(d, "bin", "versitygw")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("no versitygw binary found")
}

// Required reports whether tests must fail rather than skip when no server
// can be run: TOOLCAS_REQUIRE_SERVERS=1, as CI sets it.
func Required() bool { return os.Getenv("TOOLCAS_REQUIRE_SERVERS") == "1" }

// Server is a running versitygw process.
type Server struct {
	// Bin is the binary's path.
	Bin string
	// Dir is the posix backend's root: one directory per bucket.
	Dir string
	// Addr is host:port on the loopback interface.
	Addr string
	// AccessKey and SecretKey are the root user's credentials.
	AccessKey, SecretKey string

	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// Start starts a server on a fresh temp directory and stops it when the test
// ends. Without a binary it skips the test, saying how to get one, unless
// Required, when it fails.
func Start(tb testing.TB) *Server {
	tb.Helper()
	if _, err := Binary(); err != nil {
		if Required() {
			tb.Fatalf("versitygw: %v; TOOLCAS_REQUIRE_SERVERS=1 needs it: %s", err, Install)
		}
		tb.Skipf("versitygw: %v; to run the S3 tests: %s", err, Install)
	}
	s, err := StartIn(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// StartIn starts a server whose files go in dir, which must exist, and
// returns it, or an error saying why it could not start. The caller stops
// it. Unlike Start it needs no test goroutine, for a server started lazily
// from elsewhere.
func StartIn(dir string) (*Server, error) { return start(dir, "test") }

// start starts a server on a new directory under dir, with credentials
// that name who runs it.
func start(dir, who string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, fmt.Errorf("versitygw: %w: %s", err, Install)
	}
	s := &Server{
		Bin:       bin,
		Dir:       filepath.Join(dir, "gw"),
		logPath:   filepath.Join(dir, "versitygw.log"),
		AccessKey: "toolcas" + who + "root",
		SecretKey: "toolcas-" + who + "-secret-" + fmt.Sprint(time.Now().UnixNano()),
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("versitygw: %w", err)
	}
	var lastErr error
	for range 3 {
		addr, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("versitygw: %w", err)
		}
		s.Addr = addr
		if lastErr = s.launch(); lastErr == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("versitygw: %v\n%s", lastErr, s.logTail())
}

// Endpoint returns the server's base URL.
func (s *Server) Endpoint() string { return "http://" + s.Addr }

// Pid returns the server process's id, or 0 when it is stopped.
func (s *Server) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// launch starts the process on s.Dir and s.Addr and waits, polling with a
// deadline, until it answers HTTP.
func (s *Server) launch() error {
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.Bin, "--port", s.Addr, "--quiet", "posix", s.Dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	setPdeathsig(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get(s.Endpoint() + "/")
		if err == nil {
			resp.Body.Close()
			// Something answers on the port; another process may have
			// taken it between freePort and the server's listen. It is
			// ours only if our process still runs and it accepts a
			// request signed with our made-up credentials.
			select {
			case <-done:
				s.cmd = nil
				return fmt.Errorf("server on %s exited at start (another process has the port?): %v", s.Addr, cmd.ProcessState)
			default:
			}
			if err := s.checkSigned(client); err != nil {
				s.Stop()
				return fmt.Errorf("the server on %s is not ours: %v", s.Addr, err)
			}
			return nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("server on %s not answering after 60 s: %v", s.Addr, err)
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("server on %s exited at start: %v", s.Addr, cmd.ProcessState)
		case <-tick.C:
		}
	}
}

// checkSigned proves the server on s.Addr is ours: ListBuckets signed with
// its made-up root credentials gets 200 OK, and signed with a wrong secret
// gets 403. No other server knows the secret, and one that answers
// anything with 200 fails the second test.
func (s *Server) checkSigned(client *http.Client) error {
	if code, err := s.signedListBuckets(client, s.SecretKey); err != nil || code != http.StatusOK {
		return fmt.Errorf("ListBuckets signed with our secret: status %d, %v", code, err)
	}
	if code, err := s.signedListBuckets(client, s.SecretKey+"-wrong"); err != nil || code != http.StatusForbidden {
		return fmt.Errorf("ListBuckets signed with a wrong secret: status %d, %v; want 403", code, err)
	}
	return nil
}

func (s *Server) signedListBuckets(client *http.Client, secret string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, s.Endpoint()+"/", nil)
	if err != nil {
		return 0, err
	}
	const emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	req.Header.Set("X-Amz-Content-Sha256", emptyHash)
	creds := aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, emptyHash, "s3", "us-east-1", time.Now()); err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// Kill stops the server at once with SIGKILL, by its pid, as a crash or a
// pulled plug would, and waits for the process to be gone.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Stop stops the server if it runs.
func (s *Server) Stop() { s.Kill() }

// Restart starts the server again on the same directory and port.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Kill()
	if err := s.launch(); err != nil {
		tb.Fatalf("versitygw restart: %v\n%s", err, s.logTail())
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

var shared struct {
	once sync.Once
	dir  string
	srv  *Server
	err  error
}

// Shared returns the test binary's server, started at its first use in a
// temp directory of its own, for the tests that each work in a bucket of
// their own: one server for a package's tests rather than one each. Without
// a binary it skips tb, unless Required, when it fails. A test that stops
// or kills its server starts its own with Start. The test binary's TestMain
// calls StopShared after its tests.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	if _, err := Binary(); err != nil {
		if Required() {
			tb.Fatalf("versitygw: %v; TOOLCAS_REQUIRE_SERVERS=1 needs it: %s", err, Install)
		}
		tb.Skipf("versitygw: %v; to run the S3 tests: %s", err, Install)
	}
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "toolcas-versitygw-")
		if shared.err == nil {
			shared.srv, shared.err = StartIn(shared.dir)
		}
	})
	if shared.err != nil {
		tb.Fatalf("the shared versitygw: %v", shared.err)
	}
	return shared.srv
}

// StopShared stops the server Shared started, if it did, and removes its
// files.
func StopShared() {
	if shared.srv != nil {
		shared.srv.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}
