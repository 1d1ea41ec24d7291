package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/toolcas/toolcas/internal/versitygw"
)

// scriptS3 is the versitygw server the scripts' stores on S3 live in,
// started by the first s3store and stopped when TestScripts ends.
type scriptS3 struct {
	t    *testing.T
	once sync.Once
	srv  *versitygw.Server
	err  error // why srv did not start
	seq  atomic.Int64
}

// s3Available reports whether the s3 condition holds: a versitygw binary
// is installed, or $TOOLCAS_REQUIRE_SERVERS is 1, so that a missing one
// then fails the script rather than skipping it.
func s3Available() bool {
	_, err := versitygw.Binary()
	return err == nil || versitygw.Required()
}

// s3store VAR: start the scripts' S3 server if it is not running, set VAR
// to the URL of a store in a new bucket on it, and set the standard AWS
// variables to its credentials.
func (p *scriptS3) cmdS3Store(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: s3store VAR")
	}
	if _, err := versitygw.Binary(); err != nil {
		ts.Fatalf("versitygw: %v: %s", err, versitygw.Install)
	}
	srv, err := p.server()
	if err != nil {
		ts.Fatalf("start the scripts' S3 server: %v", err)
	}
	bucket := fmt.Sprintf("script-%d-%d", os.Getpid()%100000, p.seq.Add(1))
	ts.Setenv(args[0], fmt.Sprintf("s3://%s/team/tools?endpoint=%s", bucket, srv.Endpoint()))
	// Where the server keeps the store's objects, for s3object.
	ts.Setenv("S3_OBJECTS", filepath.Join(srv.Dir, bucket, "team", "tools"))
	ts.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	ts.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	ts.Setenv("AWS_REGION", "us-east-1")
}

// server starts the scripts' server the first time it is called, and
// returns it or why it did not start, to every caller. It runs in a
// script's goroutine, so it must not fail the parent test.
func (p *scriptS3) server() (*versitygw.Server, error) {
	p.once.Do(func() {
		dir, err := os.MkdirTemp("", "casctl-s3-")
		if err != nil {
			p.err = err
			return
		}
		p.t.Cleanup(func() { os.RemoveAll(dir) })
		if p.srv, p.err = versitygw.StartIn(dir); p.err == nil {
			p.t.Cleanup(p.srv.Stop)
		}
	})
	return p.srv, p.err
}

// s3object VAR CACHEPATH: set VAR to the file in which the server keeps
// the object of the blob whose cached file is CACHEPATH, for a script to
// damage it.
func cmdS3Object(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: s3object VAR CACHEPATH")
	}
	_, rel, ok := strings.Cut(filepath.ToSlash(args[1]), "/blobs/")
	if !ok {
		ts.Fatalf("%s is not a cached blob's path", args[1])
	}
	ts.Setenv(args[0], filepath.Join(ts.Getenv("S3_OBJECTS"), "blobs", filepath.FromSlash(rel)))
}

// jsonset VAR FILE PATH: set VAR to the value at PATH in the JSON FILE.
func cmdJSONSet(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: jsonset VAR FILE PATH")
	}
	v, err := jsonValue(ts, args[1], args[2])
	ts.Check(err)
	ts.Setenv(args[0], fmt.Sprint(v))
}

// A server that cannot start is an error for every script that asks for
// it, from the scripts' goroutines, not a failure of the parent test nor a
// nil server for the scripts after the first.
func TestScriptS3StartFails(t *testing.T) {
	t.Setenv("TOOLCAS_VERSITYGW", "/bin/false")
	p := &scriptS3{t: t}
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			srv, err := p.server()
			if srv != nil {
				err = fmt.Errorf("a server %v beside the error %w", srv, err)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "exited at start") {
			t.Errorf("server() with a binary that is no server = %v, want its start's error", err)
		}
	}
}
