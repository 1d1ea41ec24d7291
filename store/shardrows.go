package store

import (
	"context"

	"github.com/toolcas/toolcas/index"
)

// shardRows reads the index's blob rows a shard at a time for gc's and
// verify's marks, one shard ahead: once the rows of shard n are taken, the
// rows of shard n+1 are read in another goroutine while the walk lists that
// shard's files, since the walk goes through the shards in order. It holds
// the rows of two shards at most. A shard asked for out of order is read
// then.
type shardRows struct {
	x *index.Index
	// ahead is the shard being read ahead, and where its rows come.
	ahead   int
	pending chan shardResult
}

type shardResult struct {
	rows []index.ShardBlob
	err  error
}

func newShardRows(x *index.Index) *shardRows { return &shardRows{x: x, ahead: -1} }

// start reads shard sh's rows in another goroutine, unless another read
// ahead is under way.
func (r *shardRows) start(ctx context.Context, sh int) {
	if r.pending != nil || sh > 0xff {
		return
	}
	c := make(chan shardResult, 1)
	r.ahead, r.pending = sh, c
	go func() {
		rows, err := r.x.BlobsInShard(ctx, byte(sh))
		c <- shardResult{rows, err}
	}()
}

// get returns shard sh's rows, and starts reading the next shard's.
func (r *shardRows) get(ctx context.Context, sh byte) ([]index.ShardBlob, error) {
	var res shardResult
	if r.pending != nil && r.ahead == int(sh) {
		res = <-r.pending
		r.pending = nil
	} else {
		res.rows, res.err = r.x.BlobsInShard(ctx, sh)
	}
	if res.err == nil {
		r.start(ctx, int(sh)+1)
	}
	return res.rows, res.err
}
