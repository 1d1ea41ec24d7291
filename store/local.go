package store

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// localEngine keeps a store's blobs in a sharded directory on this
// machine (package cas), beside its index (IndexFile, or a PostgreSQL
// database the store records). Writers and gc order themselves with file
// locks (see lock.go): a write holds gc.lock shared from its first blob to
// its row's commit, gc holds it exclusively while it sweeps. A durable
// one-part write shares its barriers with the writes concurrent with it
// (writeone.go, group.go, commit.go), covered by the store's marker
// (unsynced.go). Cold blobs go into packs (pack.go).
type localEngine struct {
	dir   string
	blobs *cas.Store
	ix    *index.Index
	now   func() time.Time
	// locks orders writers and gc.
	locks fileLocks
	// reserve is the reserve file's size (see reserve.go).
	reserve int64
	// recentKeysMayBeLost is RecentKeysMayBeLostOnPowerCut's setting.
	recentKeysMayBeLost bool
	// commits gathers the rows of concurrent writes into one transaction.
	commits committer
	// group shares the barriers of concurrent one-part writes.
	group blobGroup
	// commitSyncs counts the index transactions that synced the log.
	commitSyncs atomic.Int64
	// marker is the store's marker in UnsyncedDir; recovered the parts
	// Open dropped after an unclean shutdown.
	marker    marker
	recovered []index.Part
	// writersSeen caches what unsynced/ says of other writers (alone).
	writersSeen writersSeen
}

var (
	_ engine       = (*localEngine)(nil)
	_ packer       = (*localEngine)(nil)
	_ repairer     = (*localEngine)(nil)
	_ quarantiner  = (*localEngine)(nil)
	_ packVerifier = (*localEngine)(nil)
)

// tempPoolSize is how many temp files a store opened for writing keeps
// made ahead (see cas.WithTempPool): enough for the runs of one process
// writing at once, taking the making of a file off the writes' path.
const tempPoolSize = 4

// openLocal opens the store in the directory dir.
func openLocal(ctx context.Context, dir string, c *config) (*localEngine, error) {
	casOpts := []cas.Option{cas.WithDurability(c.durability), cas.WithClock(c.now)}
	if c.durability == cas.SyncFull {
		// Without syncs, a new blob is written in place (see
		// cas.Store.putInPlace): no temp file to make ahead.
		casOpts = append(casOpts, cas.WithTempPool(tempPoolSize))
	}
	ixOpts := []index.Option{index.WithDurability(c.durability), index.WithClock(c.now)}
	if c.create {
		casOpts = append(casOpts, cas.WithCreate())
	}
	if c.recentKeysMayBeLost {
		ixOpts = append(ixOpts, index.RecentKeysMayBeLostOnPowerCut())
	}
	if c.durability == cas.SyncNone {
		// Nothing is promised across a crash: rows wait for a commit
		// they share (see writeDeferred).
		ixOpts = append(ixOpts, index.WithDeferredCommit())
	}
	if c.readOnly {
		casOpts = append(casOpts, cas.ReadOnly())
		ixOpts = append(ixOpts, index.ReadOnly())
	}
	if c.mappedIndex > 0 {
		ixOpts = append(ixOpts, index.WithMappedReads(c.mappedIndex))
		casOpts = append(casOpts, cas.WithMappedTables())
	}
	blobs, err := cas.Open(ctx, dir, casOpts...)
	if err != nil {
		return nil, err
	}
	ix, err := openLocalIndex(ctx, blobs, c, ixOpts)
	if err != nil {
		blobs.Close()
		return nil, err
	}
	// A read of a packed blob asks the index for its pack: a process that
	// reads one reads that pack's table of contents, not every pack's.
	blobs.SetPackHint(func(ctx context.Context, b cas.Blob) string {
		name, _ := ix.PackOf(ctx, b)
		return name
	})
	e := &localEngine{dir: blobs.Dir(), blobs: blobs, ix: ix, now: c.now, locks: newFileLocks(blobs.Dir(), c.lockWait, c.readOnly),
		reserve: c.reserve, recentKeysMayBeLost: c.recentKeysMayBeLost && c.durability == cas.SyncFull}
	if c.readOnly {
		return e, nil
	}
	if e.recovered, err = e.recoverUnsynced(ctx); err != nil {
		e.close()
		return nil, err
	}
	if !c.maintenance {
		makeReserve(e.dir, e.reserve)
	}
	return e, nil
}

// openLocalIndex opens the index of the store at dir: IndexFile, or the
// database the store records, and records the one WithIndexURL names on
// a store being made.
func openLocalIndex(ctx context.Context, blobs *cas.Store, c *config, opts []index.Option) (*index.Index, error) {
	dir := blobs.Dir()
	where, record, err := indexLocation(dir, c)
	if err != nil {
		return nil, err
	}
	if !newIndexAllowed(ctx, c, blobs.WalkNames, func(ctx context.Context) (bool, error) {
		packs, temps, bad, err := blobs.Packs(ctx)
		return len(packs)+len(temps)+len(bad) > 0, err
	}) {
		opts = append(opts, index.MustExist())
	}
	ix, err := index.Open(ctx, where, opts...)
	if err != nil && c.maintenance && !c.readOnly && !index.IsPostgresURL(where) && releaseReserve(dir) {
		// A full disk: the reserve's space lets the index open. (An index
		// on PostgreSQL does not live on this disk.)
		ix, err = index.Open(ctx, where, opts...)
	}
	if err != nil {
		return nil, indexError(dir, where, err)
	}
	if record != "" {
		// Recorded once the database is reachable and migrated, so that a
		// mistyped URL leaves no record behind.
		if err := writeIndexRecord(dir, record); err != nil {
			ix.Close()
			return nil, err
		}
	}
	return ix, nil
}

func (e *localEngine) backend() cas.Backend { return e.blobs }
func (e *localEngine) location() string     { return e.dir }

func (e *localEngine) name(rel string) string { return filepath.Join(e.dir, filepath.FromSlash(rel)) }

func (e *localEngine) durability() string {
	if e.recentKeysMayBeLost {
		return DurabilityRecentKeysMayBeLost
	}
	return e.blobs.Durability().String()
}

func (e *localEngine) close() error {
	// Before the lock files close: the rows waiting for their commit hold
	// gc.lock's share until it is done.
	deferredErr := e.ix.CommitDeferred()
	e.closeMarker()
	e.locks.close()
	return errors.Join(deferredErr, e.ix.Close(), e.blobs.Close())
}

// write stores a step's parts: one part with the index's work done while
// its blob goes to disk (see writeOne), several with every blob durable
// (one barrier for the batch), then every row in one transaction.
func (e *localEngine) write(ctx context.Context, parts []index.NewPart, data [][]byte) ([]cas.PutResult, []index.Recorded, error) {
	if e.blobs.Durability() == cas.SyncNone && !e.ix.IsPostgres() {
		return e.writeDeferred(ctx, parts, data)
	}
	if len(parts) == 1 {
		return e.writeOne(ctx, parts[0], cas.Item{Data: data[0], Ext: parts[0].Blob.Ext})
	}
	items := make([]cas.Item, len(parts))
	for i := range parts {
		items[i] = cas.Item{Data: data[i], Ext: parts[i].Blob.Ext}
	}
	var (
		puts []cas.PutResult
		recs []index.Recorded
	)
	err := e.guard(ctx, func(ctx context.Context) (_ []cas.PutResult, err error) {
		puts, err = e.blobs.PutBatch(ctx, items)
		return puts, err
	}, func(ctx context.Context) (err error) {
		for i := range parts {
			parts[i].Blob = puts[i].Blob
		}
		recs, err = e.record(ctx, parts)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return puts, recs, nil
}

// writeDeferred is write without syncs on SQLite, where nothing is owed
// to a crash: the blobs are written in place (cas.Store.putInPlace), then
// the rows queued for the index's committer, which records them in its
// open transaction and commits them with the rows of the writes after
// them, within index.DeferredCommitAfter (see index.RecordQueued). The
// write returns once its rows are queued when the index can tell what
// they are recorded as (a run it knows), else once they are recorded:
// this process reads them at once, others once they commit. It holds its
// share of gc.lock until then, so that gc sweeps none of its blobs before
// their rows are there to see; a crash before the commit leaves the
// blobs to gc.
func (e *localEngine) writeDeferred(ctx context.Context, parts []index.NewPart, data [][]byte) ([]cas.PutResult, []index.Recorded, error) {
	unlock, err := e.locks.shared(ctx)
	if err != nil {
		return nil, nil, err
	}
	puts := make([]cas.PutResult, len(parts))
	committed := func(lost error) {
		if lost != nil {
			e.expire(puts)
		} else {
			rowsCommitted(e, parts)
		}
		unlock()
	}
	var recs []index.Recorded
	err = e.putDeferred(ctx, parts, data, puts)
	if err == nil {
		// A test's stand-in for a record that failed (on a full disk, say).
		if err = fault(e, "write:record"); err == nil {
			recs, err = e.ix.RecordQueued(ctx, parts, committed)
		}
	}
	if err != nil {
		unlock()
		e.expire(puts)
		return nil, nil, err
	}
	// A test's way to stop a writer with its rows recorded.
	fault(e, "write:committed")
	return puts, recs, nil
}

// putDeferred writes the blobs of a step in place.
func (e *localEngine) putDeferred(ctx context.Context, parts []index.NewPart, data [][]byte, puts []cas.PutResult) error {
	if err := fault(e, "write:blob"); err != nil {
		return err
	}
	if len(parts) == 1 {
		var err error
		puts[0], err = e.blobs.PutHashed(ctx, cas.Hash(data[0], parts[0].Blob.Ext))
		parts[0].Blob = puts[0].Blob
		return err
	}
	items := make([]cas.Item, len(parts))
	for i := range parts {
		items[i] = cas.Item{Data: data[i], Ext: parts[i].Blob.Ext}
	}
	res, err := e.blobs.PutBatch(ctx, items)
	if err != nil {
		return err
	}
	copy(puts, res)
	for i := range parts {
		parts[i].Blob = puts[i].Blob
	}
	return nil
}

// guard holds the writers' side of gc.lock from put's first blob to
// commit's row. A write whose commit failed leaves the blobs it created to
// the next gc, whatever its grace period (see expire).
func (e *localEngine) guard(ctx context.Context, put func(context.Context) ([]cas.PutResult, error), commit func(context.Context) error) error {
	unlock, err := e.locks.shared(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	puts, err := put(ctx)
	if err != nil {
		return err
	}
	// A test's stand-in for a row commit that failed (on a full disk, say):
	// the transaction is rolled back, nothing of it committed.
	err = fault(e, "write:record")
	if err == nil {
		err = commit(ctx)
	}
	if err != nil {
		e.expire(puts)
		return err
	}
	// A test's way to stop a writer with its row committed.
	fault(e, "write:committed")
	return nil
}

// expire marks the blobs a failed write created, whose rows were never
// committed, as old enough for the next gc whatever its grace period. A
// blob another writer found at the same time is safe: that writer holds
// the shared lock until its row is committed, and gc removes no blob a row
// uses.
func (e *localEngine) expire(puts []cas.PutResult) {
	for _, p := range puts {
		if !p.Existed {
			e.blobs.Expire(p.Blob)
		}
	}
}

// stage reads the content into a temp file in the store that it keeps
// locked, so that gc leaves it alone however long the producer takes.
func (e *localEngine) stage(ctx context.Context, r io.Reader, ext func() (string, error)) (staged, error) {
	st, err := e.blobs.Stage(ctx, r, ext)
	if err != nil {
		return nil, err
	}
	return localStaged{st}, nil
}

// localStaged is a temp file cas.Store.Stage filled.
type localStaged struct{ st *cas.Staged }

func (l localStaged) put(ctx context.Context) (cas.PutResult, error) { return l.st.Commit(ctx) }
func (l localStaged) discard()                                       { l.st.Discard() }

// present reports whether a blob's file or packed copy is there, damaged
// or not; a blob that cannot be looked at where it should be (its shard a
// file, or a link out of the store) is not.
func (e *localEngine) present(ctx context.Context, b cas.Blob) (bool, error) {
	_, err := e.blobs.Stat(ctx, b)
	return err == nil || errors.Is(err, cas.ErrCorrupt), nil
}

// openChecked re-hashes the blob before it opens it again to be read: a
// large blob is read twice rather than held in memory.
func (e *localEngine) openChecked(ctx context.Context, b cas.Blob) (*cas.Reader, error) {
	if err := e.blobs.Verify(ctx, b); err != nil {
		return nil, err
	}
	return e.blobs.Open(ctx, b)
}

// freeSpace deletes the reserve file when the disk is nearly full, so that
// gc and prune have room to work, and makes it again when they are done.
func (e *localEngine) freeSpace() (func(), bool) {
	short := false
	if free, ok := freeBytes(e.dir); !ok || free < 2*max(e.reserve, DefaultReserve) {
		short = true
		releaseReserve(e.dir)
		// The log's blocks go back to the file system, and the next
		// transaction logs from its start, so that a prune and the gc
		// after it each need room for their own pages only, not for all of
		// them together. Best effort: with a reader in the log, SQLite
		// checkpoints what it can.
		e.ix.Checkpoint(context.Background())
	}
	return func() { makeReserve(e.dir, e.reserve) }, short
}

func (e *localEngine) walk(ctx context.Context, fn func(cas.Entry) error) error {
	return e.blobs.WalkNames(ctx, fn)
}

func (e *localEngine) strayTemp(rel string) bool { return e.blobs.TempStray(rel) }

func (e *localEngine) beingWritten(b cas.Blob) bool { return e.blobs.BeingWritten(b) }

// rehash re-hashes a blob file; the walk lists names only, and re-hashing
// reads the file's size and time too.
func (e *localEngine) rehash(ctx context.Context, en cas.Entry) (cas.Entry, error) {
	if !en.Lazy {
		return en, e.blobs.Verify(ctx, en.Blob)
	}
	fi, err := e.blobs.VerifyInfo(ctx, en.Blob)
	if fi != nil {
		en.Size, en.ModTime, en.Lazy = fi.Size(), fi.ModTime(), false
	}
	return en, err
}

// lockForRecheck takes gc.lock shared, unless the caller holds it
// exclusively. A store this process cannot lock (read-only, say) is
// looked at again without the lock.
func (e *localEngine) lockForRecheck(ctx context.Context, held bool) (func(), error) {
	if held {
		return func() {}, nil
	}
	unlock, err := e.locks.shared(ctx)
	switch {
	case errors.Is(err, ErrLocked):
		return nil, err
	case err != nil:
		return func() {}, nil
	}
	return unlock, nil
}

// barriers counts the blob files and shard directories synced (see
// cas.Store.Syncs), and one for each index transaction that synced its
// log.
func (e *localEngine) barriers() int64 {
	return e.blobs.Syncs() + e.commitSyncs.Load()
}
