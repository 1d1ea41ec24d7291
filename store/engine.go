package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// An engine is how a store keeps its blobs and keeps gc away from the
// blobs that writes are about to record. Open chooses one, once:
//
//   - localEngine: blobs in a sharded directory on this machine, writers
//     and gc ordered by file locks, packs for cold blobs;
//   - sharedEngine: blobs in an S3-compatible object store that many
//     machines share, behind a local cache, writers and gc ordered by
//     leases in a shared PostgreSQL index.
//
// Everything else (item checks, reads, listing, gc's plan, verify's
// report) Store does the same way for both. What only one engine can do
// is a small interface of its own (packer, repairer, quarantiner,
// packVerifier), which capability asks for.
type engine interface {
	// backend is where the blobs are.
	backend() cas.Backend
	// location is the store's directory or its s3:// URL.
	location() string
	// durability names the store's durability (see Durability).
	durability() string
	// name returns how to name a path under the store in messages and
	// reports: an absolute file path, or the object's URL.
	name(rel string) string

	// write stores the blobs of a step, then records their parts, so that
	// no recorded part names a blob gc may remove. data[i] is parts[i]'s
	// content; parts[i].Blob.Ext its extension.
	write(ctx context.Context, parts []index.NewPart, data [][]byte) ([]cas.PutResult, []index.Recorded, error)
	// stage takes content read from r somewhere gc leaves alone, before the
	// write is guarded: a producer may take its time. ext is asked once r
	// is read.
	stage(ctx context.Context, r io.Reader, ext func() (string, error)) (staged, error)
	// guard runs put, which stores blobs, then commit, which records the
	// parts that name them, so that gc removes none of those blobs in
	// between. Blobs a put created whose commit failed are left to gc.
	guard(ctx context.Context, put func(context.Context) ([]cas.PutResult, error), commit func(context.Context) error) error
	// present reports whether a blob is in the store, whole or not: verify
	// and gc look again with it at a blob that seemed missing.
	present(ctx context.Context, b cas.Blob) (bool, error)
	// openChecked opens a blob whose bytes are known to match its digest
	// before the first one is read.
	openChecked(ctx context.Context, b cas.Blob) (*cas.Reader, error)
	// freeSpace makes room for maintenance that frees space (prune, gc) on
	// a full disk; done undoes it. short says the disk is nearly full.
	freeSpace() (done func(), short bool)

	// markGC fills p with what gc should remove and keep (see GCPlan).
	markGC(ctx context.Context, p *GCPlan, progress func(done, total int)) error
	// sweepGC removes what p says, holding the engine's locks, checking
	// again under them what may have changed since the mark, and counts
	// what it removed in res. held reports whether the index's gc lock is
	// still held.
	sweepGC(ctx context.Context, p *GCPlan, held func() error, timeout time.Duration, res *GCResult) error

	// walk lists the blobs and other names under the store for verify.
	walk(ctx context.Context, fn func(cas.Entry) error) error
	// rehash checks a walked blob against its digest, returning the entry
	// with its size and time when it read them.
	rehash(ctx context.Context, e cas.Entry) (cas.Entry, error)
	// strayTemp reports whether a temp file is a stray: still there, and
	// held by no live writer.
	strayTemp(rel string) bool
	// beingWritten reports whether a blob whose bytes do not match its
	// name is being written in place now, not torn.
	beingWritten(b cas.Blob) bool
	// lockForRecheck keeps gc from sweeping while verify looks again at
	// what seemed missing or unused; held says the caller holds gc's side
	// already.
	lockForRecheck(ctx context.Context, held bool) (unlock func(), err error)

	// barriers counts the file-system barriers the engine's writes took.
	barriers() int64
	close() error
}

// A staged is content an engine holds, out of gc's reach, for a put.
type staged interface {
	// put stores the content as a blob; it runs inside the engine's guard.
	put(ctx context.Context) (cas.PutResult, error)
	// discard drops the content, whatever put did.
	discard()
}

// A packer is an engine with packs (see Store.Pack).
type packer interface {
	pack(ctx context.Context, o PackOptions) (PackResult, error)
}

// A repairer is an engine that mends a damaged store (see Store.Repair);
// verify is the store's check, held saying the caller holds gc's lock.
type repairer interface {
	repair(ctx context.Context, o RepairOptions, verify func(context.Context, bool) (VerifyResult, error)) (RepairResult, error)
}

// A quarantiner is an engine that moves damaged blobs aside, keeping their
// rows until the same content is written again.
type quarantiner interface {
	quarantined(ctx context.Context) (map[cas.Blob]bool, error)
}

// A packVerifier is an engine whose blobs may be in packs, which verify
// checks too.
type packVerifier interface {
	// packedBlobs returns the blobs some pack holds.
	packedBlobs(ctx context.Context) (map[cas.Blob]bool, error)
	// verifyPacks re-hashes every pack: see localEngine.verifyPacks.
	verifyPacks(ctx context.Context, res *VerifyResult, used func(cas.Blob) bool, seen map[cas.Blob]bool, whole *[]cas.Blob) error
}

var (
	// ErrReadOnly is returned by every method that writes, on a store
	// opened with ReadOnly.
	ErrReadOnly = errors.New("store opened read-only")

	// ErrLocalOnly is returned by the operations that exist only for a
	// store in a local directory (pack, repair), on a store in an object
	// store.
	ErrLocalOnly = errors.New("works on a store in a local directory only")
)

// writer returns the store's engine for op, which writes, or ErrReadOnly.
func (s *Store) writer(op string) (engine, error) {
	if s.readOnly {
		return nil, fmt.Errorf("%s: %w at %s: it needs write access", op, ErrReadOnly, s.Location())
	}
	return s.eng, nil
}

// capability returns the store's engine as T, the ability op needs, or the
// error saying why the store has none: ErrReadOnly when op writes and the
// store was opened read-only, ErrLocalOnly when its engine lacks it.
func capability[T any](s *Store, op string, writes bool) (T, error) {
	var none T
	e := s.eng
	if writes {
		var err error
		if e, err = s.writer(op); err != nil {
			return none, err
		}
	}
	c, ok := e.(T)
	if !ok {
		return none, fmt.Errorf("%s: %w; %s keeps its blobs in an object store", op, ErrLocalOnly, s.Location())
	}
	return c, nil
}
