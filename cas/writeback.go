package cas

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"
)

// A barrier (syncfs(2)) reports a write-back error only through the file
// system's superblock, and to each descriptor it is called on only the
// errors since that descriptor was opened (from Linux 5.8; before, none at
// all). Its descriptor is opened for the call, so an error that the
// kernel's flusher met on a blob's bytes before it, and that another
// opener of the file system (another process's syncfs) has been told of,
// is not reported: the blob's bytes are lost while its put says durable.
// A file's own descriptor, opened before its bytes were written, is told
// of every error on its data, whoever else was. So after a barrier, each
// file it was to make durable is checked through its own descriptor
// (writebackErr). The check is sync_file_range(2), not an fdatasync: on
// ext4 an fdatasync of a file whose journal transaction has committed still
// flushes the device's cache, once per file, where sync_file_range on data
// the barrier wrote makes no I/O at all. For 1,000 new 4 KiB files on ext4
// (BenchmarkCheckAfterBarrier), the barrier took 140 to 230 ms, the checks
// 5.5 to 8 ms, and an fdatasync of each 75 to 150 ms; a step of four runs
// writing at once (store's BenchmarkWriteConcurrent16KiB) showed no
// difference beyond the noise. A file whose check fails may be
// damaged on disk: its write fails, and the file is removed if its name
// still holds it (dropDamaged), so that the next put of the same bytes
// writes them afresh instead of finding them stored.

// awaited is a blob named without a sync (Pending.CommitUnsynced), waiting
// for a barrier to make it durable and to check its write-back.
type awaited struct {
	blob Blob
	// f is the blob's file, open since before its bytes were written; fi
	// tells that file at the blob's name.
	f  file
	fi fs.FileInfo
	// taken is set, under awaitedSet.mu, by whoever checks f or drops the
	// entry unchecked; that one closes f, sets err, and closes done.
	taken bool
	done  chan struct{}
	err   error
	// failed is when a barrier first reported err.
	failed time.Time
}

// awaitedSet holds the blobs named without a sync that no barrier has
// checked yet, and those whose check failed, until their writer has
// learnt so: a writer waits for the first barrier that begins after it
// asks, which may not be the first to begin after its blob was named, so
// a failed check fails every barrier until the writer's Expire (or, for a
// writer that never says, settleTime).
type awaitedSet struct {
	mu    sync.Mutex
	files map[*awaited]struct{}
}

// add records a blob named without a sync, its file f still open.
func (a *awaitedSet) add(b Blob, f file) *awaited {
	fi, _ := f.Stat()
	w := &awaited{blob: b, f: f, fi: fi, done: make(chan struct{})}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.files == nil {
		a.files = map[*awaited]struct{}{}
	}
	a.files[w] = struct{}{}
	return w
}

// begin returns every entry, as a barrier begins, and those of them that
// this barrier is to check.
func (a *awaitedSet) begin() (all, check []*awaited) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for w := range a.files {
		all = append(all, w)
		if !w.taken {
			w.taken = true
			check = append(check, w)
		}
	}
	return all, check
}

// drop forgets the entries keep says no to, closing the files of those
// not yet checked; their writer has what it needs.
func (a *awaitedSet) drop(keep func(*awaited) bool) {
	var closing []*awaited
	a.mu.Lock()
	for w := range a.files {
		if keep(w) {
			continue
		}
		delete(a.files, w)
		if !w.taken {
			w.taken = true
			closing = append(closing, w)
		}
	}
	a.mu.Unlock()
	for _, w := range closing {
		w.f.Close()
		close(w.done)
	}
}

// checkAwaited checks, once a barrier has ended, the files named before it
// began: those in check itself, beside the ones other barriers check, and
// returns the errors of every file of all that failed. Files found whole
// are forgotten, the barrier having made them durable.
func (s *Store) checkAwaited(all, check []*awaited) error {
	syncEach(len(check), func(i int) error {
		w := check[i]
		w.err = writebackErr(w.f)
		if w.err != nil {
			s.dropDamaged(w.blob, w.fi)
		}
		w.f.Close()
		close(w.done)
		return nil
	})
	var errs []error
	failed := map[*awaited]bool{}
	for _, w := range all {
		<-w.done
		if w.err != nil {
			failed[w] = true
		}
	}
	now := s.now()
	s.awaiting.mu.Lock()
	for _, w := range all {
		if _, ok := s.awaiting.files[w]; !ok || !failed[w] {
			delete(s.awaiting.files, w)
			continue
		}
		if w.failed.IsZero() {
			w.failed = now
		} else if now.Sub(w.failed) > settleTime {
			// Its writer has long returned and never said so.
			delete(s.awaiting.files, w)
			continue
		}
		errs = append(errs, s.writeError(w.blob, fmt.Errorf("its write-back failed (the file-system barrier did not report it): %w", w.err)))
	}
	s.awaiting.mu.Unlock()
	return errors.Join(errs...)
}

// dropDamaged removes a blob's file after a sync (or a check of its
// write-back) of it failed, when the blob's name still holds that file, fi:
// its bytes may be lost on disk while the page cache still serves them
// whole, so a put of the same bytes would take it for stored, and a
// re-hash would find nothing wrong until the cache dropped it. A file
// renamed over it since (a put of the same bytes) is another, and stays.
func (s *Store) dropDamaged(b Blob, fi fs.FileInfo) {
	if fi == nil {
		return
	}
	cur, err := s.fs.Lstat(b.RelPath())
	if err != nil || !os.SameFile(fi, cur) {
		return
	}
	s.fs.Remove(b.RelPath())
}
