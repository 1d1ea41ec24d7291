package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// UnsyncedDir, at the store root, holds a marker for each open store that
// writes with one barrier for blob and row: such a write syncs its blob's
// shard directory while its row commits, so that until it returns, a
// power cut may keep the row and lose the blob's name; a write of at most
// groupMax bytes renames its blob before any sync (see writeOne and
// blobGroup), so that it may keep the name and lose the bytes. The marker
// says which blobs such rows can use; a marker whose owner is gone (its
// lock is free) makes the next store opened for writing check those blobs,
// re-hashing those of at most groupMax bytes, and drop the rows of any that
// did not survive whole (and remove the files of those that survived
// damaged). No caller was told of such a row: a write returns only once
// its syncs are done.
const UnsyncedDir = "unsynced"

// markerMargin widens the check after an unclean shutdown to blobs used
// this long before the marker was made, against a clock stepped back.
const markerMargin = 10 * time.Minute

// marker is an open store's marker in UnsyncedDir, made on its first write
// and removed by Close. Its file holds the largest blob id when it was
// made and the time, and stays locked (flock) while the store is open.
// Once no write it covers is in flight, it is moved up to the present now
// and then (see refreshMarker), so that the check after an unclean
// shutdown covers the last minutes of writes, not all since Open.
type marker struct {
	mu   sync.Mutex
	f    *os.File
	path string
	// at is the time the file holds.
	at time.Time
	// keep leaves the marker for the next Open to recover: a sync failed
	// after a blob was named, and the blob, or a row that could not be
	// taken back, is left for that Open to check.
	keep bool
	// writes is held shared by each write the marker covers, from before
	// its row commits until its syncs are done.
	writes sync.RWMutex
}

// markerRefresh is how old a marker gets before a write that finds no
// other in flight moves it up.
const markerRefresh = time.Minute

// markerLine is a marker's content: the largest blob id and the time,
// each of a fixed width, so that a marker written again in place leaves
// nothing of what it held.
func markerLine(maxID int64, at time.Time) []byte {
	return fmt.Appendf(nil, "%020d %020d\n", maxID, at.UnixNano())
}

// ensureMarker makes the store's marker durable before its first write
// with one barrier.
func (e *localEngine) ensureMarker(ctx context.Context) error {
	m := &e.marker
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.f != nil {
		return nil
	}
	maxID, err := e.ix.MaxBlobID(ctx)
	if err != nil {
		return err
	}
	dir := filepath.Join(e.dir, UnsyncedDir)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("make %s: %w", dir, err)
		}
		if err := syncDir(e.dir); err != nil {
			return fmt.Errorf("sync %s: %w", e.dir, err)
		}
	}
	var err2 error
	for range 10 {
		var f *os.File
		var path string
		at := e.now()
		f, path, err2 = makeMarker(dir, maxID, at)
		if err2 == nil {
			m.f, m.path, m.at = f, path, at
			return nil
		}
		if !errors.Is(err2, fs.ErrNotExist) && !errors.Is(err2, errWouldBlock) {
			break
		}
	}
	return err2
}

// markerRace, when a test sets it, runs between a marker's creation and
// its lock, where a recovering store may take it.
var markerRace func(tmp string)

// makeMarker makes a marker in dir under a temp name, locked, written and
// synced, then renames it: a marker under its name is always locked while
// its owner lives. A store recovering meanwhile may take the temp file,
// before it is locked, for one a crash left, and remove it: the lock then
// fails with EWOULDBLOCK (the recovering store holds it), or the rename
// with fs.ErrNotExist, and the caller tries again.
func makeMarker(dir string, maxID int64, now time.Time) (*os.File, string, error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	name := strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(rnd[:])
	tmp := filepath.Join(dir, ".tmp-"+name)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("make a marker in %s: %w", dir, err)
	}
	fail := func(err error) (*os.File, string, error) {
		f.Close()
		os.Remove(tmp)
		return nil, "", fmt.Errorf("make a marker in %s: %w", dir, err)
	}
	if markerRace != nil {
		markerRace(tmp)
	}
	if err := flockNB(f, lockEX); err != nil {
		return fail(err)
	}
	if _, err := f.Write(markerLine(maxID, now)); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	path := filepath.Join(dir, name)
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := syncDir(dir); err != nil {
		os.Remove(path)
		f.Close()
		return nil, "", fmt.Errorf("sync %s: %w", dir, err)
	}
	return f, path, nil
}

// holdMarker makes the store's marker durable, if it is not yet, and holds
// it for a write it covers; release ends the hold, and moves the marker up
// when it is old and no other write holds it.
func (e *localEngine) holdMarker(ctx context.Context) (release func(), err error) {
	if err := e.ensureMarker(ctx); err != nil {
		return nil, err
	}
	m := &e.marker
	m.writes.RLock()
	return func() {
		m.writes.RUnlock()
		e.refreshMarker(ctx)
	}, nil
}

// refreshMarker moves the marker up to the largest blob id and the time
// now, once it is older than markerRefresh and no write it covers is in
// flight: every blob such a write used is then durable. Whatever the file
// holds after a crash while it is written (what it held, what it is given,
// or a line that does not read whole, which covers every blob) covers
// every write still to come; so it needs no sync of its own.
func (e *localEngine) refreshMarker(ctx context.Context) {
	m := &e.marker
	m.mu.Lock()
	due := m.f != nil && !m.keep && e.now().Sub(m.at) >= markerRefresh
	m.mu.Unlock()
	if !due || !m.writes.TryLock() {
		return
	}
	defer m.writes.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.f == nil || m.keep {
		return
	}
	maxID, err := e.ix.MaxBlobID(context.WithoutCancel(ctx))
	if err != nil {
		return // moved up by a later write
	}
	at := e.now()
	if _, err := m.f.WriteAt(markerLine(maxID, at), 0); err == nil {
		m.at = at
	}
}

// closeMarker removes the store's marker: every write has returned, so
// every blob it named is durable.
func (e *localEngine) closeMarker() {
	m := &e.marker
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.f == nil {
		return
	}
	if !m.keep {
		os.Remove(m.path)
	}
	m.f.Close()
	m.f = nil
}

// recoverUnsynced checks, for every marker whose owner is gone, the blobs
// it covers, and drops the rows of those whose file did not survive (and
// that no pack holds, and that repair did not quarantine), or survived
// with other bytes than its name says, when it is small enough to have
// been named before its bytes were synced. It returns the parts dropped.
func (e *localEngine) recoverUnsynced(ctx context.Context) ([]index.Part, error) {
	dir := filepath.Join(e.dir, UnsyncedDir)
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	var dropped []index.Part
	for _, de := range des {
		path := filepath.Join(dir, de.Name())
		f, err := os.OpenFile(path, os.O_RDONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return dropped, fmt.Errorf("recover: %w", err)
		}
		if flockNB(f, lockEX) != nil {
			f.Close() // its store is open
			continue
		}
		if strings.HasPrefix(de.Name(), ".tmp-") {
			// A marker its maker did not finish: no write relied on it.
			os.Remove(path)
			f.Close()
			continue
		}
		gone, err := e.recoverMarker(ctx, f)
		dropped = append(dropped, gone...)
		if err != nil {
			f.Close()
			return dropped, fmt.Errorf("recover after an unclean shutdown (%s): %w", path, err)
		}
		os.Remove(path)
		f.Close()
	}
	return dropped, nil
}

// recoverMarker checks the blobs one marker covers.
func (e *localEngine) recoverMarker(ctx context.Context, f *os.File) ([]index.Part, error) {
	var maxID, at int64
	buf := make([]byte, 64)
	n, _ := f.Read(buf)
	fields := strings.Fields(string(buf[:n]))
	if len(fields) == 2 {
		maxID, _ = strconv.ParseInt(fields[0], 10, 64)
		at, _ = strconv.ParseInt(fields[1], 10, 64)
	}
	// A marker that does not read whole (0, 0) covers every blob.
	since := time.Unix(0, at).Add(-markerMargin)
	if at == 0 {
		since = time.Unix(0, 0)
	}
	blobs, err := e.ix.BlobsSince(ctx, maxID, since)
	if err != nil {
		return nil, err
	}
	var lost, damaged []cas.Blob
	for _, b := range blobs {
		info, err := e.blobs.Stat(ctx, b)
		if err == nil && info.Size <= groupMax {
			// A write of a blob this small renames it before the sync
			// that makes its bytes durable: its name may have survived
			// without them.
			if err = e.blobs.Verify(ctx, b); errors.Is(err, cas.ErrCorrupt) {
				damaged = append(damaged, b)
				continue
			}
		}
		if err == nil || errors.Is(err, cas.ErrCorrupt) {
			continue // there; whether it is whole is verify's to say
		}
		if !errors.Is(err, cas.ErrNotFound) {
			return nil, err
		}
		if _, err := os.Lstat(filepath.Join(e.dir, QuarantineDir, b.FileName())); err == nil {
			continue // known damage, whose rows repair keeps
		}
		lost = append(lost, b)
	}
	if len(lost) == 0 && len(damaged) == 0 {
		return nil, nil
	}
	gone, err := e.ix.DeletePartsOf(ctx, append(lost, damaged...))
	if err != nil || len(damaged) == 0 {
		return gone, err
	}
	// The damaged files go too, or verify would report them until gc took
	// them: with gc's lock, so that no writer is between a blob it wrote
	// anew at that name and its row, and only those still damaged.
	unlock, err := e.locks.exclusive(ctx, DefaultGCLockTimeout)
	if err != nil {
		return gone, err
	}
	defer unlock()
	for _, b := range damaged {
		if err := e.blobs.Verify(ctx, b); errors.Is(err, cas.ErrCorrupt) {
			if err := e.blobs.Remove(ctx, b); err != nil && !errors.Is(err, cas.ErrNotFound) {
				return gone, err
			}
		}
	}
	return gone, nil
}

// Recovered returns the parts that Open dropped because their blob did
// not survive an unclean shutdown whole (a power cut between a write's row
// commit and its last sync; no caller was told of them).
func (e *localEngine) Recovered() []index.Part { return e.recovered }
