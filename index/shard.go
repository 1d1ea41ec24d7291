package index

import (
	"context"
	"fmt"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// ShardBlob is a blob row as gc's and verify's marks see it, a shard at a
// time.
type ShardBlob struct {
	// ID is the row's id, for DeleteUnusedRows.
	ID             int64
	Blob           cas.Blob
	Size           int64
	LastReferenced time.Time
	// Used says some part uses the blob.
	Used bool
	// Packed says the row names a pack that holds the blob.
	Packed bool
}

// shardSQL is BlobsInShard's query of the blobs whose digests' starts are
// at or above a bound and, when bounded, below another.
func shardSQL(bounded bool) string {
	q := `SELECT b.id, b.digest, b.ext, b.size, b.last_referenced, b.counted_in IS NOT NULL,
		b.pack_id IS NOT NULL FROM blobs b WHERE substr(b.digest, 1, 8) >= ?`
	if bounded {
		q += ` AND substr(b.digest, 1, 8) < ?`
	}
	return q + ` ORDER BY b.digest, b.ext`
}

// BlobsInShard returns the rows of the blobs whose digest starts with the
// byte shard, in the order of their file names (digest, then extension):
// a 256th of the blobs at a time, so that a mark of every blob never holds
// them all. blobs_digest finds them by the digests' first bytes; they are
// sorted, a 256th at a time.
func (x *Index) BlobsInShard(ctx context.Context, shard byte) ([]ShardBlob, error) {
	q, args := shardSQL(shard < 0xff), []any{[]byte{shard}}
	if shard < 0xff {
		args = append(args, []byte{shard + 1})
	}
	var out []ShardBlob
	err := x.read(ctx, func() error {
		out = out[:0]
		rows, err := x.db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				digest    []byte
				r         ShardBlob
				last      int64
				used, pkd bool
			)
			if err := rows.Scan(&r.ID, &digest, &r.Blob.Ext, &r.Size, &last, &used, &pkd); err != nil {
				return err
			}
			if len(digest) != cas.DigestSize {
				return fmt.Errorf("blob row with a %d-byte digest", len(digest))
			}
			r.Blob.Digest = cas.Digest(digest)
			r.LastReferenced, r.Used, r.Packed = time.Unix(0, last), used, pkd
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("index: blobs of shard %02x: %w", shard, err)
	}
	return out, nil
}
