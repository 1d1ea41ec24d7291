package main

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/internal/pgtest"
)

// startCluster starts a private PostgreSQL cluster for one test, stopped
// when it ends; the test is skipped when PostgreSQL is not installed, unless
// $TOOLCAS_REQUIRE_SERVERS is 1.
func startCluster(t *testing.T) *pgtest.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgtest.Start(ctx)
	if err != nil {
		if _, missing := pgtest.FindBin(); missing != nil && os.Getenv(pgtest.RequireEnv) != "1" {
			t.Skipf("skipping PostgreSQL test: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

// TestVerifyRecentOrphansPostgres: on a store whose index is in PostgreSQL,
// verify warns of recent orphans without asking about index.db-wal, which
// such a store does not have.
func TestVerifyRecentOrphansPostgres(t *testing.T) {
	ctx := context.Background()
	c := startCluster(t)
	db, err := c.NewDatabase(ctx, "orphans")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"--store", dir, "--index", db, "init"}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("init: exit %d: %s", code, stderr.String())
	}
	blobs, err := cas.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := blobs.PutBytes(ctx, []byte(strconv.Itoa(i)+" without a row"), ".txt"); err != nil {
			t.Fatal(err)
		}
	}
	blobs.Close()
	stdout.Reset()
	stderr.Reset()
	code := run(ctx, []string{"--store", dir, "verify"}, strings.NewReader(""), &stdout, &stderr)
	if code != exitOK || !strings.Contains(stderr.String(), "warning: 2 orphans are younger than gc's grace period") || strings.Contains(stderr.String(), "index.db-wal") {
		t.Errorf("verify: exit %d, stdout %q, stderr %q; want ok with a warning about recent orphans, not about index.db-wal", code, stdout.String(), stderr.String())
	}
}
