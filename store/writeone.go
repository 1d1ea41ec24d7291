package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// writeOne writes one part (the usual step) with the index's work done
// while the blob's bytes go to disk, and, durable, with the time of about
// one barrier, not three:
//
//  1. the blob is written by the caller's goroutine, at once, while
//     another one runs the index transaction's statements (unless another
//     store writes: see statementsEarly);
//  2. the transaction commits only once the blob is in place, so that no
//     row is ever visible before its blob;
//  3. with nameLater (durable, whether the row's commit syncs the log or
//     not: see RecentKeysMayBeLostOnPowerCut), the blob is renamed into
//     place before any sync, and its bytes' and its shard directory's
//     syncs run while the row commits (cas.Pending.CommitThenSync); the
//     write returns once all are done. Writes that overlap share one
//     barrier after one commit instead (see blobGroup). A blob over
//     groupMax, or on PostgreSQL, is synced before its name, whose sync
//     alone runs beside the commit.
//
// The blob, not the statements, is written by the caller's goroutine:
// it is what the step waits for, and a goroutine just started may wait
// for a thread to run it (on a busy machine, longer than the statements
// take), which the statements can afford and the blob cannot.
//
// With nameLater, a power cut between the commit and the syncs may keep
// the row and lose the blob's name or bytes. The store's marker, made
// durable before the first such write, lets the next Open drop such rows
// (see recoverUnsynced); no caller was told of them, since a write returns
// only after its syncs.
//
// It holds the writers' side of gc.lock from the blob to its row, as
// every write does, so gc cannot sweep meanwhile.
func (e *localEngine) writeOne(ctx context.Context, np index.NewPart, ci cas.Item) ([]cas.PutResult, []index.Recorded, error) {
	nameLater := e.blobs.Durability() == cas.SyncFull
	if nameLater {
		release, err := e.holdMarker(ctx)
		if err != nil {
			return nil, nil, err
		}
		defer release()
	}
	unlock, err := e.locks.shared(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	w := e.newOneWrite(ctx, np, ci, nameLater)
	defer w.leave()
	// In the group, the statements start once the bytes are written (see
	// putInGroup): their goroutine would keep a thread from writes that
	// the group's barrier waits for.
	if w.gw == nil {
		w.startStatements()
	}
	w.writeBlob()
	if w.recorded != nil {
		<-w.recorded
	} else if w.putErr == nil && w.recErr == nil {
		w.recs, w.barrierErr, w.recErr = e.recordWhenReady(ctx, []index.NewPart{w.np}, w.ready, w.putDone, nil)
	}
	if w.recErr == nil && w.putErr == nil {
		// A test's way to stop a writer with its row committed.
		fault(e, "write:committed")
	}
	if err := w.finish(); err != nil {
		return nil, nil, err
	}
	return []cas.PutResult{w.put}, w.recs, nil
}

// oneWrite is the state of one writeOne, which its goroutines share: the
// blob's put, the statements', and the sync of the blob's name.
type oneWrite struct {
	e         *localEngine
	ctx       context.Context
	np        index.NewPart
	hashed    cas.Hashed
	nameLater bool
	// gw is the write's place in the group, nil when it writes alone.
	gw *groupWrite
	// early says the statements may run while the blob is written.
	early bool

	put    cas.PutResult
	putErr error
	// putDone is closed once the put ended.
	putDone chan struct{}
	// grouped is set when the blob was renamed into place unsynced: its
	// bytes and name wait for the group's barrier after the commit.
	grouped *cas.Pending
	// naming is set, and named closed, by the directory's sync.
	naming  bool
	nameErr error
	named   chan struct{}
	recs    []index.Recorded
	recErr  error
	// barrierErr is the error of the barrier after the commit.
	barrierErr error
	// recorded is closed once the statements' goroutine has recorded the
	// part, or failed to.
	recorded chan struct{}
}

// newOneWrite starts a write of ci as np: counted in the group first, so
// that writes begun together share its barriers (see blobGroup), and
// hashed once (the statements name the blob, the put writes it).
func (e *localEngine) newOneWrite(ctx context.Context, np index.NewPart, ci cas.Item, nameLater bool) *oneWrite {
	w := &oneWrite{e: e, ctx: ctx, np: np, nameLater: nameLater, putDone: make(chan struct{}), named: make(chan struct{})}
	if nameLater && e.groupable(len(ci.Data)) {
		w.gw = e.group.enter()
	}
	w.hashed = cas.Hash(ci.Data, ci.Ext)
	w.np.Blob = w.hashed.Blob()
	// A test's stand-in for a row commit that failed (on a full disk, say):
	// the transaction is rolled back, nothing of it committed.
	w.recErr = fault(e, "write:record")
	w.early = w.recErr == nil && e.statementsEarly(len(ci.Data))
	return w
}

// leave ends the write's place in the group, and makes its blob's temp
// file again once the step's syncs are done.
func (w *oneWrite) leave() {
	if w.gw != nil {
		w.gw.leave()
	}
	w.e.blobs.RefillTempPool()
}

// ready is called by the index before its commit, perhaps more than once:
// it waits for the blob to be in place.
func (w *oneWrite) ready() (bool, error) {
	// A test's way to stop a writer whose statements have run.
	fault(w.e, "write:ready")
	<-w.putDone
	return w.grouped != nil, w.putErr
}

// startStatements runs the index's statements in a goroutine of their
// own while the blob is written, when they may run early, and reports
// whether they run.
func (w *oneWrite) startStatements() bool {
	if !w.early || w.recorded != nil {
		return w.recorded != nil
	}
	count(w.e, "write:early", 1)
	w.recorded = make(chan struct{})
	var queued func()
	if w.gw != nil {
		queued = w.gw.handedOver
	}
	go func() {
		defer close(w.recorded)
		w.recs, w.barrierErr, w.recErr = w.e.recordWhenReady(w.ctx, []index.NewPart{w.np}, w.ready, w.putDone, queued)
	}()
	return true
}

// writeBlob puts the blob. Its directory's sync starts as soon as it is
// renamed into place, beside the commit: the marker covers a row
// committed before the sync ends.
func (w *oneWrite) writeBlob() {
	defer close(w.putDone)
	e := w.e
	if w.gw != nil {
		// However the put ends, it has nothing more for the group's
		// transaction.
		defer w.gw.handedOver()
	} else if w.putErr = fault(e, "write:blob"); w.putErr != nil {
		// A test's stand-in for a blob write that failed (in the group,
		// once its bytes are written: see putInGroup).
		return
	}
	if !w.nameLater {
		w.put, w.putErr = e.blobs.PutHashed(w.ctx, w.hashed)
		return
	}
	var syncName func() error
	if w.gw != nil {
		w.put, syncName, w.grouped, w.putErr = e.putInGroup(w.ctx, w.gw, w.hashed, w.startStatements)
	} else {
		w.put, syncName, w.putErr = e.blobs.PutHashedNameUnsynced(w.ctx, w.hashed)
	}
	if w.putErr != nil || syncName == nil {
		return
	}
	w.naming = true
	go func() {
		defer close(w.named)
		// A test's stand-in for a sync that failed, once it ran.
		if w.nameErr = syncName(); w.nameErr == nil {
			w.nameErr = fault(e, "write:name")
		}
	}()
}

// finish waits for the name's sync, and undoes what it must of a write
// that failed.
func (w *oneWrite) finish() error {
	e := w.e
	if w.naming {
		<-w.named
	}
	if w.nameErr == nil {
		w.nameErr = w.barrierErr
	}
	if w.putErr != nil {
		// Nothing to roll back: the statements, if they ran, were.
		return w.putErr
	}
	puts := []cas.PutResult{w.put}
	if w.recErr != nil {
		e.expire(puts)
		return w.recErr
	}
	if w.nameErr != nil {
		// The row is committed, but the blob's name, or its bytes, may
		// not be durable: the row goes again, and the blob is gc's. The
		// marker stays for the next Open, which re-hashes the blob and
		// removes it if it is damaged, and drops the row if it could not
		// go here.
		nameErr := w.nameErr
		if derr := e.ix.DeleteParts(context.WithoutCancel(w.ctx), []int64{w.recs[0].ID}); derr != nil {
			nameErr = errors.Join(nameErr, derr)
		}
		e.marker.mu.Lock()
		e.marker.keep = true
		e.marker.mu.Unlock()
		e.expire(puts)
		return nameErr
	}
	if w.grouped != nil {
		w.grouped.NameSynced()
	}
	return nil
}

// groupable reports whether a durable one-part write of size bytes may
// share barriers with the writes concurrent with it (see blobGroup): on
// SQLite (on PostgreSQL, the log is the server's to sync), where one call
// makes the file system durable, while that call is cheap. The call,
// syncfs(2), waits for every byte any process left unwritten on the file
// system: 512 MiB written by another process made it take 325 ms, where a
// step's own syncs take a millisecond. While the machine holds more than
// cas.BarrierUnwrittenMax unwritten, each write syncs its own blob, as a
// write over groupMax does.
func (e *localEngine) groupable(size int) bool {
	return size <= groupMax && !e.ix.IsPostgres() && e.blobs.CanBarrier() && e.barrierCheap()
}

// putInGroup is the put of a write in the group: its bytes written without
// a sync, then, once the writes begun with it have handed their
// statements over (see blobGroup.gather), renamed into place without a
// sync (grouped: bytes and name wait for the barrier after the commit).
// Alone in the group, it renames its blob at once too, and returns the
// sync of its bytes and name together (cas.Pending.CommitThenSync), which
// runs beside the commit. written is called once new bytes are
// written, before any sync: it starts the statements, which hand
// themselves over, and says whether it did.
func (e *localEngine) putInGroup(ctx context.Context, gw *groupWrite, h cas.Hashed, written func() bool) (res cas.PutResult,
	syncName func() error, grouped *cas.Pending, err error) {
	p, err := e.blobs.WriteHashed(ctx, h)
	if err != nil {
		return cas.PutResult{}, nil, nil, err
	}
	if p.Result().Existed {
		return p.Result(), nil, nil, nil
	}
	started := written()
	if err := fault(e, "write:blob"); err != nil {
		p.Discard()
		return cas.PutResult{}, nil, nil, err
	}
	if gw.gather(started) {
		syncName, err = p.CommitThenSync()
		return p.Result(), syncName, nil, err
	}
	if err := p.CommitUnsynced(); err != nil {
		return cas.PutResult{}, nil, nil, err
	}
	return p.Result(), nil, p, nil
}

// earlyWithoutSyncMax bounds the blobs whose write, without a sync, runs
// beside the statements.
const earlyWithoutSyncMax = 1 << 20

// statementsEarly reports whether a write of size bytes may run its
// statements while its blob is written. They hold the index's write lock from the
// first one to the commit, so while the blob syncs, every other writer of
// the index waits: worth it only when there is none. On PostgreSQL there
// may be writers on other machines; on SQLite, every other store writing
// durably has its marker in unsynced/ (see ensureMarker), so this store
// writes alone when no marker but its own is there. (A store in another
// process writing without syncs makes no marker, and may wait on this
// one's syncs.)
func (e *localEngine) statementsEarly(size int) bool {
	if e.ix.IsPostgres() {
		return false
	}
	if e.blobs.Durability() == cas.SyncNone {
		// Without a sync, a small blob's write holds the lock about as
		// long as the statements take (a store writing without syncs
		// makes no marker, so writers in other processes cannot be seen).
		return size <= earlyWithoutSyncMax
	}
	w := &e.writersSeen
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.at.IsZero() && time.Since(w.at) < writersSeenFor {
		return w.alone
	}
	e.marker.mu.Lock()
	own := ""
	if e.marker.f != nil {
		own = filepath.Base(e.marker.path)
	}
	e.marker.mu.Unlock()
	des, err := os.ReadDir(filepath.Join(e.dir, UnsyncedDir))
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	others := 0
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), ".tmp-") && de.Name() != own {
			others++
		}
	}
	w.alone = err == nil && others == 0
	w.at = time.Now()
	return w.alone
}

// barrierCheap reports whether one barrier for the file system costs
// little now (cas.Store.BarrierCheap), unless a test says.
func (e *localEngine) barrierCheap() bool {
	if testHooks != nil {
		if cheap, set := testHooks.barrierCheap(e); set {
			return cheap
		}
	}
	return e.blobs.BarrierCheap()
}

// writersSeen is what statementsEarly last saw, and when (by the wall
// clock: a test's clock may stand still).
type writersSeen struct {
	mu    sync.Mutex
	at    time.Time
	alone bool
}

// writersSeenFor is how long statementsEarly trusts what it saw: for that
// long, a writer that has just started may wait on this store's blob syncs.
var writersSeenFor = 100 * time.Millisecond
