package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/hook"
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
// The caller holds the shared lock, so gc cannot sweep meanwhile.
func (s *Store) writeOne(ctx context.Context, np index.NewPart, ci cas.Item, nameLater bool) ([]hook.Stored, error) {
	// Counted in the group first, so that writes begun together share
	// its barriers (see blobGroup).
	var gw *groupWrite
	if nameLater && s.groupable(len(ci.Data)) {
		gw = s.group.enter()
		defer gw.leave()
	}
	// Hashed once: the statements name the blob, the put writes it.
	hashed := cas.Hash(ci.Data, ci.Ext)
	np.Blob = hashed.Blob()
	// The blob's temp file is made again once the step's syncs are done.
	defer s.blobs.RefillTempPool()
	var (
		put     cas.PutResult
		putErr  error
		putDone = make(chan struct{})
		// grouped is set when the blob was renamed into place unsynced:
		// its bytes and name wait for the group's barrier after the
		// commit.
		grouped *cas.Pending
		// naming is set, and named closed, by the directory's sync.
		naming  bool
		nameErr error
		named   = make(chan struct{})
		recs    []index.Recorded
		// barrierErr is the error of the barrier after the commit.
		barrierErr error
		// recorded is closed once the statements' goroutine has recorded
		// the part, or failed to.
		recorded chan struct{}
	)

	// ready is called by the index before its commit, perhaps more than
	// once: it waits for the blob to be in place.
	ready := func() (bool, error) {
		// A test's way to stop a writer whose statements have run.
		s.fault("write:ready")
		<-putDone
		return grouped != nil, putErr
	}

	// A test's stand-in for a row commit that failed (on a full disk, say):
	// the transaction is rolled back, nothing of it committed.
	err := s.fault("write:record")
	early := err == nil && s.statementsEarly(len(ci.Data))
	startStatements := func() bool {
		if !early || recorded != nil {
			return recorded != nil
		}
		s.writersSeen.early.Add(1)
		recorded = make(chan struct{})
		var queued func()
		if gw != nil {
			queued = gw.handedOver
		}
		go func() {
			defer close(recorded)
			recs, barrierErr, err = s.recordWhenReady(ctx, []index.NewPart{np}, ready, putDone, queued)
		}()
		return true
	}
	// In the group, once the bytes are written (see putInGroup): the
	// statements' goroutine would keep a thread from writes that the
	// group's barrier waits for.
	if gw == nil {
		startStatements()
	}

	// The blob. Its directory's sync starts as soon as it is renamed into
	// place, beside the commit: the marker covers a row committed before
	// the sync ends.
	func() {
		defer close(putDone)
		if gw != nil {
			// However the put ends, it has nothing more for the
			// group's transaction.
			defer gw.handedOver()
		}
		// A test's stand-in for a blob write that failed (in the group,
		// once its bytes are written: see putInGroup).
		if gw == nil {
			if putErr = s.fault("write:blob"); putErr != nil {
				return
			}
		}
		if !nameLater {
			put, putErr = s.blobs.PutHashed(ctx, hashed)
			return
		}
		var syncName func() error
		if gw != nil {
			put, syncName, grouped, putErr = s.putInGroup(ctx, gw, hashed, startStatements)
		} else {
			put, syncName, putErr = s.blobs.PutHashedNameUnsynced(ctx, hashed)
		}
		if putErr != nil || syncName == nil {
			return
		}
		naming = true
		go func() {
			defer close(named)
			// A test's stand-in for a sync that failed, once it ran.
			if nameErr = syncName(); nameErr == nil {
				nameErr = s.fault("write:name")
			}
		}()
	}()

	if recorded != nil {
		<-recorded
	} else if putErr == nil && err == nil {
		recs, barrierErr, err = s.recordWhenReady(ctx, []index.NewPart{np}, ready, putDone, nil)
	}

	if err == nil && putErr == nil {
		// A test's way to stop a writer with its row committed.
		s.fault("write:committed")
	}
	if naming {
		<-named
	}
	if nameErr == nil {
		nameErr = barrierErr
	}
	if putErr != nil {
		// Nothing to roll back: the statements, if they ran, were.
		return nil, fmt.Errorf("store: %w", putErr)
	}
	puts := []cas.PutResult{put}
	if err != nil {
		s.expire(puts)
		return nil, fmt.Errorf("store: %w", err)
	}
	if nameErr != nil {
		// The row is committed, but the blob's name, or its bytes, may
		// not be durable: the row goes again, and the blob is gc's. The
		// marker stays for the next Open, which re-hashes the blob and
		// removes it if it is damaged, and drops the row if it could not
		// go here.
		if derr := s.index.DeleteParts(context.WithoutCancel(ctx), []int64{recs[0].ID}); derr != nil {
			nameErr = errors.Join(nameErr, derr)
		}
		s.marker.mu.Lock()
		s.marker.keep = true
		s.marker.mu.Unlock()
		s.expire(puts)
		return nil, fmt.Errorf("store: %w", nameErr)
	}
	if grouped != nil {
		grouped.NameSynced()
	}
	return []hook.Stored{{
		Key: recs[0].Key, Path: s.blobs.Path(put.Blob), Digest: put.Blob.Digest,
		Version: recs[0].Version, SameAs: recs[0].SameAs, Dedup: put.Existed,
	}}, nil
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
func (s *Store) groupable(size int) bool {
	return size <= groupMax && !s.index.IsPostgres() && s.blobs.CanBarrier() && s.barrierCheap()
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
func (s *Store) putInGroup(ctx context.Context, gw *groupWrite, h cas.Hashed, written func() bool) (res cas.PutResult,
	syncName func() error, grouped *cas.Pending, err error) {
	p, err := s.blobs.WriteHashed(ctx, h)
	if err != nil {
		return cas.PutResult{}, nil, nil, err
	}
	if p.Result().Existed {
		return p.Result(), nil, nil, nil
	}
	started := written()
	if err := s.fault("write:blob"); err != nil {
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
func (s *Store) statementsEarly(size int) bool {
	if s.index.IsPostgres() {
		return false
	}
	if s.blobs.Durability() == cas.SyncNone {
		// Without a sync, a small blob's write holds the lock about as
		// long as the statements take (a store writing without syncs
		// makes no marker, so writers in other processes cannot be seen).
		return size <= earlyWithoutSyncMax
	}
	w := &s.writersSeen
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.at.IsZero() && time.Since(w.at) < writersSeenFor {
		return w.alone
	}
	s.marker.mu.Lock()
	own := ""
	if s.marker.f != nil {
		own = filepath.Base(s.marker.path)
	}
	s.marker.mu.Unlock()
	des, err := os.ReadDir(filepath.Join(s.dir, UnsyncedDir))
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

// writersSeen is what statementsEarly last saw, and when (by the wall
// clock: a test's clock may stand still).
type writersSeen struct {
	mu    sync.Mutex
	at    time.Time
	alone bool
	// early counts the writes that ran their statements early, for tests.
	early atomic.Int64
}

// writersSeenFor is how long statementsEarly trusts what it saw: for that
// long, a writer that has just started may wait on this store's blob syncs.
var writersSeenFor = 100 * time.Millisecond
