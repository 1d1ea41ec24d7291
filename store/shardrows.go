package store

import (
	"context"
	"sync"

	"github.com/toolcas/toolcas/index"
)

// shardReader reads the index's blob rows a shard at a time for gc's and
// verify's marks, ahead of their use: from the index on digest, in order,
// their ids and blobs (verify's, T an index.BlobID) or their ids and
// digest starts alone (gc's, T an index.BlobKey), and their flags from
// the unusual rows (those no part uses or that name a pack) read once
// before, so that a shard costs no search of the table for each row; once
// the rows of shard n are taken, the rows of shard n+1 are read in another
// goroutine while the walk lists that shard's files (the walk goes through
// the shards in order), and the walk may ask for the shard it enters to be
// read at once. At most two reads are under way or waiting, so it holds
// the rows of three shards at most; row adds each row's flags when it is
// used. A shard not read ahead is read when asked for. Its methods may be
// called from different goroutines. (Reading two shards ahead at once
// saved a second of gc's mark on an idle machine, none with a writer busy
// beside it, and cost a connection's cache more: a few MiB.)
type shardReader[T any] struct {
	// readShard reads one shard's rows.
	readShard func(ctx context.Context, sh byte) ([]T, error)
	// unusual are the rows no part uses or that name a pack.
	unusual *index.UnusualRows
	// fault, when set, is called before each read of a shard's rows, where
	// the read runs: a test's injected failure of the read.
	fault   func(sh byte) error
	mu      sync.Mutex
	pending map[int]chan shardResult[T]
}

// shardRows is verify's shardReader: the rows' ids and blobs.
type shardRows = shardReader[index.BlobID]

type shardResult[T any] struct {
	rows []T
	err  error
}

// newShardRows reads the unusual rows, then returns a shardReader that
// reads the shards' rows' ids and blobs.
func newShardRows(ctx context.Context, x *index.Index) (*shardRows, error) {
	return newShardReader(ctx, x, x.BlobIDsInShard)
}

// newShardKeys reads the unusual rows, then returns a shardReader that reads
// the shards' rows' ids and digest starts: blobs_digest alone, without
// the table.
func newShardKeys(ctx context.Context, x *index.Index) (*shardReader[index.BlobKey], error) {
	return newShardReader(ctx, x, x.BlobKeysInShard)
}

// newShardReader reads the unusual rows, then returns a shardReader whose
// shards read gives.
func newShardReader[T any](ctx context.Context, x *index.Index, read func(context.Context, byte) ([]T, error)) (*shardReader[T], error) {
	unusual, err := x.UnusualBlobRows(ctx)
	if err != nil {
		return nil, err
	}
	return &shardReader[T]{readShard: read, unusual: unusual, pending: map[int]chan shardResult[T]{}}, nil
}

// start reads shard sh's rows in another goroutine, unless they are being
// read already or two reads are under way.
func (r *shardReader[T]) start(ctx context.Context, sh int) {
	if sh < 0 || sh > 0xff {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[sh] != nil || len(r.pending) >= 2 {
		return
	}
	c := make(chan shardResult[T], 1)
	r.pending[sh] = c
	go func() {
		rows, err := r.read(ctx, byte(sh))
		c <- shardResult[T]{rows, err}
	}()
}

// read reads shard sh's rows; row or unusual gives each its flags.
func (r *shardReader[T]) read(ctx context.Context, sh byte) ([]T, error) {
	if r.fault != nil {
		if err := r.fault(sh); err != nil {
			return nil, err
		}
	}
	return r.readShard(ctx, sh)
}

// row returns a row read with its Used and Packed flags (see
// index.UnusualRows.Row).
func (r *shardReader[T]) row(id index.BlobID) index.ShardBlob { return r.unusual.Row(id) }

// get returns shard sh's rows, and starts reading the next shard's.
func (r *shardReader[T]) get(ctx context.Context, sh byte) ([]T, error) {
	r.mu.Lock()
	c := r.pending[int(sh)]
	delete(r.pending, int(sh))
	r.mu.Unlock()
	var res shardResult[T]
	if c != nil {
		res = <-c
	} else {
		res.rows, res.err = r.read(ctx, sh)
	}
	if res.err == nil {
		r.start(ctx, int(sh)+1)
	}
	return res.rows, res.err
}
