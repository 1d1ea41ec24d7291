package main

// The remote section: the synthetic trace replayed into a local store and
// into stores whose index is in PostgreSQL and whose blobs are in an
// S3-compatible object store, both servers on the loopback interface,
// started privately for the run (internal/pgtest, internal/versitygw) and
// stopped at its end. Then a store of the trace copied to S3 and back
// (store.Copy), timed. Never part of -quick.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/internal/pgtest"
	"github.com/toolcas/toolcas/internal/trace"
	"github.com/toolcas/toolcas/internal/versitygw"
	"github.com/toolcas/toolcas/s3blob"
	"github.com/toolcas/toolcas/store"
)

// The stores of the remote section besides storeCASFull.
const (
	// storeCASPostgres keeps its blobs in a local directory and its index
	// in PostgreSQL.
	storeCASPostgres = "cas-postgres"
	// storeCASS3 keeps its blobs in S3 (with a local cache) and its index
	// in PostgreSQL: the store many machines share.
	storeCASS3 = "cas-s3-postgres"
)

func init() {
	storeNotes[storeCASPostgres] = "toolcas CAS store, durable, blobs in a local directory, index in PostgreSQL (loopback)"
	storeNotes[storeCASS3] = "toolcas CAS store, blobs in S3 (versitygw, loopback) with a local cache, index in PostgreSQL (loopback)"
}

// remoteEnd is where a remote section's store keeps its index and blobs.
type remoteEnd struct {
	IndexURL string `json:"index_url"`
	// Location is the s3:// URL of a store on S3, "" for a directory.
	Location  string `json:"location,omitempty"`
	AccessKey string `json:"access_key,omitempty"`
	SecretKey string `json:"secret_key,omitempty"`
}

// options are the store options that reach the servers.
func (e *remoteEnd) options(opts ...store.Option) []store.Option {
	opts = append(opts, store.WithIndexURL(e.IndexURL))
	if e.Location != "" {
		opts = append(opts, store.WithS3Options(s3blob.WithCredentials(e.AccessKey, e.SecretKey)))
	}
	return opts
}

// openReplayStore opens the store a replay writes to: one of the local
// stores (openStore), or one of the remote section's.
func openReplayStore(ctx context.Context, c replayConfig) (hook.Store, func() error, error) {
	if c.Remote == nil {
		return openStore(ctx, c.Store, c.Dir)
	}
	loc := c.Dir
	opts := c.Remote.options(store.WithCreate())
	if c.Remote.Location != "" {
		loc = c.Remote.Location
		opts = append(opts, store.WithCacheDir(c.Dir))
	}
	s, err := store.Open(ctx, loc, opts...)
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}

// remoteFinish is what a replay into a store on S3 reports besides speed:
// its tools' parts and bytes, and whether verify, which reads every blob
// from the object store, finds it whole.
func remoteFinish(ctx context.Context, s *store.Store, res *replayResult) error {
	st, err := statsByTool(ctx, s, res)
	if err != nil {
		return err
	}
	res.StoredBytes = st.StoredBytes
	return timeVerify(ctx, s, res)
}

// remoteServers are the servers of one remote section.
type remoteServers struct {
	pg  *pgtest.Cluster
	gw  *versitygw.Server
	seq int
}

func (rs *remoteServers) stop() {
	if rs.gw != nil {
		rs.gw.Stop()
	}
	if rs.pg != nil {
		rs.pg.Stop()
	}
}

// end makes a new database, and for a store on S3 names a new bucket, for
// one replay or copy.
func (rs *remoteServers) end(ctx context.Context, s3 bool) (*remoteEnd, error) {
	rs.seq++
	db, err := rs.pg.NewDatabase(ctx, fmt.Sprintf("bench_%d", rs.seq))
	if err != nil {
		return nil, err
	}
	e := &remoteEnd{IndexURL: db}
	if s3 {
		e.Location = fmt.Sprintf("s3://bench-%d-%d/store?endpoint=%s", os.Getpid()%100000, rs.seq, rs.gw.Endpoint())
		e.AccessKey, e.SecretKey = rs.gw.AccessKey, rs.gw.SecretKey
	}
	return e, nil
}

// copyRun is what copying a store of the trace took, one way.
type copyRun struct {
	What       string  `json:"what"`
	Parts      int64   `json:"parts"`
	Blobs      int64   `json:"blobs"`
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
	PartsPerS  float64 `json:"parts_per_second"`
	MBPerS     float64 `json:"mb_per_second"`
	AgainSecs  float64 `json:"again_seconds"`
	AgainParts int64   `json:"again_parts_copied"`
}

// copyConfig is what the copy child is told.
type copyConfig struct {
	Dir   string       `json:"dir"`
	Trace trace.Config `json:"trace"`
	To    *remoteEnd   `json:"to"`
}

// remoteReport is the remote section.
type remoteReport struct {
	reportHead
	Rounds     int            `json:"rounds"`
	LoadBefore string         `json:"load_before"`
	LoadAfter  string         `json:"load_after"`
	Seconds    float64        `json:"seconds"`
	Replays    []replayResult `json:"replays"`
	Median     []replayResult `json:"median"`
	Copies     []copyRun      `json:"copies"`
}

// remoteStores are the stores the remote section replays into, in order.
var remoteStores = []string{storeCASFull, storeCASPostgres, storeCASS3}

func runRemote(ctx context.Context, o options, stdout, stderr io.Writer) (err error) {
	work, removeWork, err := workDir(o.dir, "toolcas-remote-")
	if err != nil {
		return err
	}
	defer removeWork()
	progress := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	start := time.Now()
	rep := remoteReport{reportHead: o.reportHead(start, work), Rounds: o.rounds, LoadBefore: loadAverage()}

	progress("starting PostgreSQL and versitygw on the loopback interface…")
	rs := &remoteServers{}
	defer rs.stop()
	if rs.pg, err = pgtest.Start(ctx); err != nil {
		return fmt.Errorf("remote: PostgreSQL: %w", err)
	}
	if rs.gw, err = versitygw.Launch(filepath.Join(work, "s3")); err != nil {
		return fmt.Errorf("remote: %w", err)
	}
	var cfgErr error
	rep.Replays, err = replayRounds(ctx, remoteStores, o.rounds, progress, "the trace", func(name string) replayConfig {
		c := replayConfig{Store: name, Dir: filepath.Join(work, name), Trace: rep.Trace, Samples: 10, TraceTag: "remote"}
		if name != storeCASFull {
			e, err := rs.end(ctx, name == storeCASS3)
			if err != nil && cfgErr == nil {
				cfgErr = err
			}
			c.Remote = e
		}
		return c
	})
	if cfgErr != nil {
		return fmt.Errorf("remote: %w", cfgErr)
	}
	if err != nil {
		return err
	}
	rep.Median = medianRounds(rep.Replays, remoteStores)

	progress("copying a store of the trace to S3 and back…")
	to, err := rs.end(ctx, true)
	if err != nil {
		return fmt.Errorf("remote: %w", err)
	}
	if err := runChild(ctx, "remotecopy", copyConfig{Dir: filepath.Join(work, "copy"), Trace: rep.Trace, To: to}, &rep.Copies); err != nil {
		return fmt.Errorf("remote: copy: %w", err)
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.LoadAfter = loadAverage()

	if o.out != "" {
		if err := writeSection(o.out, "remote.json", rep, "REMOTE.md", remoteMarkdown(rep)); err != nil {
			return err
		}
		progress("wrote %s", filepath.Join(o.out, "REMOTE.md"))
	}
	fmt.Fprint(stdout, remoteTable(rep))
	return nil
}

// remoteCopy runs in a child: it replays the trace into a local store
// without syncs, then copies it into the store on S3 (timed), again (to
// time a copy with nothing to do), and back into a new directory.
func remoteCopy(ctx context.Context, c copyConfig) ([]copyRun, error) {
	local, err := store.Open(ctx, filepath.Join(c.Dir, "local"), store.WithCreate(), store.WithDurability(cas.SyncNone))
	if err != nil {
		return nil, err
	}
	defer local.Close()
	tr, err := trace.New(c.Trace)
	if err != nil {
		return nil, err
	}
	h, err := hook.New(local, benchStrategies())
	if err != nil {
		return nil, err
	}
	err = eachStep(tr, func(step trace.Step) error {
		_, err := h.Offload(ctx, hook.Step{Run: step.Run, Number: step.Number}, step.Results)
		return err
	})
	if err != nil {
		return nil, err
	}
	remote, err := store.Open(ctx, c.To.Location, c.To.options(store.WithCreate(), store.WithCacheDir(filepath.Join(c.Dir, "cache")))...)
	if err != nil {
		return nil, err
	}
	defer remote.Close()
	back, err := store.Open(ctx, filepath.Join(c.Dir, "back"), store.WithCreate())
	if err != nil {
		return nil, err
	}
	defer back.Close()
	var out []copyRun
	for _, way := range []struct {
		what     string
		dst, src *store.Store
	}{
		{"directory (SQLite) to S3 + PostgreSQL", remote, local},
		{"S3 + PostgreSQL to directory (SQLite), durable", back, remote},
	} {
		t0 := time.Now()
		res, err := store.Copy(ctx, way.dst, way.src, store.CopyOptions{})
		if err != nil {
			return nil, err
		}
		secs := time.Since(t0).Seconds()
		t0 = time.Now()
		again, err := store.Copy(ctx, way.dst, way.src, store.CopyOptions{})
		if err != nil {
			return nil, err
		}
		out = append(out, copyRun{What: way.what, Parts: res.PartsCopied, Blobs: res.BlobsCopied, Bytes: res.BytesCopied,
			Seconds: secs, PartsPerS: float64(res.Parts) / secs, MBPerS: float64(res.BytesCopied) / 1e6 / secs,
			AgainSecs: time.Since(t0).Seconds(), AgainParts: again.PartsCopied})
	}
	return out, nil
}

// remoteTable is the section's table of replays, and its copies.
func remoteTable(rep remoteReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| store | results/s | p50 ms | p99 ms | parts | stored | verify |\n| --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, r := range rep.Median {
		verify := "whole"
		if !r.VerifyOK {
			verify = "FAILED"
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.2f | %d | %s | %s |\n", r.Store, r.PerSecond, r.P50, r.P99, r.Parts, mib(r.StoredBytes), verify)
	}
	for _, name := range remoteStores[1:] {
		mn, med := roundRatios(rep.Replays, name, storeCASFull, func(r replayResult) float64 { return r.PerSecond })
		fmt.Fprintf(&b, "\n%s: throughput %.2f × the local store's (median of %d rounds; lowest %.2f ×)", name, med, rep.Rounds, mn)
	}
	b.WriteString("\n\n| copy | parts | blobs | bytes | seconds | parts/s | MB/s | again, nothing to do |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range rep.Copies {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %.2f | %.0f | %.1f | %.2f s, %d parts copied |\n",
			c.What, c.Parts, c.Blobs, mib(c.Bytes), c.Seconds, c.PartsPerS, c.MBPerS, c.AgainSecs, c.AgainParts)
	}
	return b.String()
}

// remoteMarkdown is the section's report.
func remoteMarkdown(rep remoteReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# toolcas on PostgreSQL and S3: the bench trace\n\n")
	fmt.Fprintf(&b, "`%s`, %s, %.0f s. Machine: %s, %d cores, %s. Load average %s before, %s after.\n\n",
		rep.Command, rep.Date.Format(time.RFC3339), rep.Seconds, rep.Machine.CPU, rep.Machine.Cores, rep.Machine.FileSystem,
		rep.LoadBefore, rep.LoadAfter)
	fmt.Fprintf(&b, "The synthetic trace (%d runs of %d steps, seed %d) replayed through the hook, durable, into each store, "+
		"each replay in a process of its own; the stores take turns over %d rounds and the table shows each store's median round. "+
		"PostgreSQL and versitygw run on this machine, on the loopback interface: the figures show the cost of the protocols "+
		"and the servers' own work, not of a network. The PostgreSQL cluster is the tests' private one, which runs with "+
		"fsync=off: its commits cost no sync, where SQLite's durable commits do; the S3 server writes its objects to "+
		"the same disk.\n\n", rep.Trace.Runs, rep.Trace.Steps, rep.Trace.Seed, rep.Rounds)
	for _, name := range remoteStores {
		fmt.Fprintf(&b, "- `%s`: %s\n", name, storeNotes[name])
	}
	b.WriteString("\n")
	b.WriteString(remoteTable(rep))
	return b.String()
}
