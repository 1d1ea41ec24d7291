package main

import (
	"fmt"
	"os"
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
	p.once.Do(func() { p.srv = versitygw.Start(p.t) })
	ts.Setenv(args[0], fmt.Sprintf("s3://script-%d-%d/team/tools?endpoint=%s", os.Getpid()%100000, p.seq.Add(1), p.srv.Endpoint()))
	ts.Setenv("AWS_ACCESS_KEY_ID", p.srv.AccessKey)
	ts.Setenv("AWS_SECRET_ACCESS_KEY", p.srv.SecretKey)
	ts.Setenv("AWS_REGION", "us-east-1")
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
