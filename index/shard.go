package index

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// shardIDsSQL is BlobIDsInShard's query: shardSQL's, of fewer columns.
func shardIDsSQL(bounded bool) string {
	q := `SELECT b.id, b.digest, b.ext FROM blobs b WHERE substr(b.digest, 1, 8) >= ?`
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
		return nil, fmt.Errorf("blobs of shard %02x: %w", shard, err)
	}
	return out, nil
}

// BlobIDsInShard returns the ids and blobs of the rows whose digest starts
// with the byte shard, in the order of their file names, as BlobsInShard
// does, but only those columns. UnusualBlobRows gives what the marks need
// of the few rows that are not used and loose.
func (x *Index) BlobIDsInShard(ctx context.Context, shard byte) ([]BlobID, error) {
	q, args := shardIDsSQL(shard < 0xff), []any{[]byte{shard}}
	if shard < 0xff {
		args = append(args, []byte{shard + 1})
	}
	var out []BlobID
	err := x.read(ctx, func() error {
		out = out[:0]
		rows, err := x.db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		// The columns are read in place, and the rows share a few
		// extensions, one string each: a mark reads every row of the
		// index a shard at a time, and copies of each were most of its
		// garbage.
		var digest, ext sql.RawBytes
		exts := map[string]string{}
		for rows.Next() {
			var r BlobID
			if err := rows.Scan(&r.ID, &digest, &ext); err != nil {
				return err
			}
			if len(digest) != cas.DigestSize {
				return fmt.Errorf("blob row with a %d-byte digest", len(digest))
			}
			r.Blob.Digest = cas.Digest(digest)
			e, ok := exts[string(ext)]
			if !ok {
				e = string(ext)
				if len(exts) < 1000 {
					exts[e] = e
				}
			}
			r.Blob.Ext = e
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("blob ids of shard %02x: %w", shard, err)
	}
	return out, nil
}

// shardKeysSQL is BlobKeysInShard's query: blobs_digest alone, which
// holds each row's digest start and id, in that order.
func shardKeysSQL(bounded bool) string {
	q := `SELECT substr(digest, 1, 8), id FROM blobs WHERE substr(digest, 1, 8) >= ?`
	if bounded {
		q += ` AND substr(digest, 1, 8) < ?`
	}
	return q + ` ORDER BY substr(digest, 1, 8), id`
}

// BlobKey is a blob row as blobs_digest holds it: its id and the start of
// its digest, neither the whole digest nor the extension.
type BlobKey struct {
	ID  int64
	Key DigestKey
}

// BlobKeysInShard returns the ids and digest starts of the rows whose
// digest starts with the byte shard, in the order of their digest starts,
// then ids. They are read from blobs_digest alone, without a row of the
// table: a mark of a million rows reads them five times as fast as their
// blobs (BlobIDsInShard), which a lookup of each row in the table costs.
// Rows whose digests start alike are told apart by BlobsByID, when a mark
// needs to.
func (x *Index) BlobKeysInShard(ctx context.Context, shard byte) ([]BlobKey, error) {
	q, args := shardKeysSQL(shard < 0xff), []any{[]byte{shard}}
	if shard < 0xff {
		args = append(args, []byte{shard + 1})
	}
	var out []BlobKey
	err := x.read(ctx, func() error {
		out = out[:0]
		rows, err := x.db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var key sql.RawBytes
		for rows.Next() {
			var r BlobKey
			if err := rows.Scan(&key, &r.ID); err != nil {
				return err
			}
			if len(key) != digestKeyLen {
				return fmt.Errorf("blob row with a %d-byte digest start", len(key))
			}
			r.Key = DigestKey(key)
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("blob keys of shard %02x: %w", shard, err)
	}
	return out, nil
}

// BlobsByID returns the blobs of the rows with these ids, by id; an id
// with no row is left out.
func (x *Index) BlobsByID(ctx context.Context, ids []int64) (map[int64]cas.Blob, error) {
	out := make(map[int64]cas.Blob, len(ids))
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), rowsChunk)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		q := `SELECT id, digest, ext FROM blobs WHERE id IN (?` + strings.Repeat(`, ?`, len(chunk)-1) + `)`
		err := x.read(ctx, func() error {
			rows, err := x.db.QueryContext(ctx, q, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var (
					id     int64
					digest []byte
					ext    string
				)
				if err := rows.Scan(&id, &digest, &ext); err != nil {
					return err
				}
				if len(digest) != cas.DigestSize {
					return fmt.Errorf("blob row with a %d-byte digest", len(digest))
				}
				out[id] = cas.Blob{Digest: cas.Digest(digest), Ext: ext}
			}
			return rows.Err()
		})
		if err != nil {
			return nil, fmt.Errorf("blobs by id: %w", err)
		}
	}
	return out, nil
}

// UnusualRows are the blob rows that no part uses or that name a pack, as
// UnusualBlobRows read them, in the order of their ids.
type UnusualRows struct {
	rows []unusualRow
	// order holds the rows' indexes by shard, digest start and id, and
	// shards where each shard's begin in it, once InShard is called.
	once   sync.Once
	order  []int32
	shards [257]int
}

// unusualRow is one of UnusualRows, in less memory than a ShardBlob: a
// tenth of a million blobs may be garbage.
type unusualRow struct {
	id     int64
	digest cas.Digest
	ext    string
	used   bool
	packed bool
}

// Len returns how many rows there are.
func (u *UnusualRows) Len() int { return len(u.rows) }

// Row returns the row with r's id and blob, with its Used and Packed
// flags, or r used and loose when there is none: every row not read as
// unusual is used and loose, and a row stored since the read, or whose id
// another blob's row has taken since, counts as used too, which keeps gc
// from collecting it and verify from calling its file an orphan.
func (u *UnusualRows) Row(r BlobID) ShardBlob {
	i, ok := slices.BinarySearchFunc(u.rows, r.ID, func(a unusualRow, id int64) int { return cmp.Compare(a.id, id) })
	if ok && u.rows[i].digest == r.Blob.Digest && u.rows[i].ext == r.Blob.Ext {
		return ShardBlob{ID: r.ID, Blob: r.Blob, Used: u.rows[i].used, Packed: u.rows[i].packed}
	}
	return ShardBlob{ID: r.ID, Blob: r.Blob, Used: true}
}

// InShard returns the rows whose digest starts with the byte shard, with
// their blobs and their Used and Packed flags, in the order in which
// BlobKeysInShard gives a shard's rows (by digest start, then id), so that
// a mark takes the two lists together; every row of a shard not among
// them is used and loose (or was stored since the read, or took the id of
// a row deleted since, when its digest start is not the one here). The
// order is made once, at the first call.
func (u *UnusualRows) InShard(shard byte) []ShardBlob {
	u.once.Do(u.orderByShard)
	order := u.order[u.shards[shard]:u.shards[int(shard)+1]]
	out := make([]ShardBlob, len(order))
	for i, j := range order {
		r := u.rows[j]
		out[i] = ShardBlob{ID: r.id, Blob: cas.Blob{Digest: r.digest, Ext: r.ext}, Used: r.used, Packed: r.packed}
	}
	return out
}

// orderByShard orders the rows for InShard: their indexes by digest start,
// then id, and where each shard's begin.
func (u *UnusualRows) orderByShard() {
	u.order = make([]int32, len(u.rows))
	for i := range u.order {
		u.order[i] = int32(i)
	}
	slices.SortFunc(u.order, func(a, b int32) int {
		ra, rb := &u.rows[a], &u.rows[b]
		if c := CompareKeys(KeyOf(ra.digest), KeyOf(rb.digest)); c != 0 {
			return c
		}
		return cmp.Compare(ra.id, rb.id)
	})
	for _, j := range u.order {
		u.shards[int(u.rows[j].digest[0])+1]++
	}
	for sh := 1; sh <= 256; sh++ {
		u.shards[sh] += u.shards[sh-1]
	}
}

// UnusualBlobRows reads the blob rows that no part uses or that name a
// pack: one pass over the table in the order it is stored, holding only
// these rows, which follow the garbage and the packed blobs rather than
// the store. Every other row is used and loose, so that with
// BlobIDsInShard a mark knows every row's flags without reading each row.
// Rows change after the read: UnusualRows.Row matches a row by its id and
// its blob.
func (x *Index) UnusualBlobRows(ctx context.Context) (*UnusualRows, error) {
	u := &UnusualRows{}
	err := x.read(ctx, func() error {
		// The counters say about how many there are (the unused blobs'
		// counter, and the packed rows counted from their index), so that
		// the list is made once at its size rather than grown: a hint only.
		var unused, packed int64
		if err := x.db.QueryRowContext(ctx, `SELECT coalesce((SELECT blobs FROM unused_blobs WHERE id = 1), 0),
			(SELECT count(*) FROM blobs WHERE pack_id IS NOT NULL)`).Scan(&unused, &packed); err != nil {
			return err
		}
		u.rows = make([]unusualRow, 0, min(max(unused+packed, 0)+16, 1<<24))
		rows, err := x.db.QueryContext(ctx, `SELECT id, digest, ext, counted_in IS NOT NULL, pack_id IS NOT NULL
			FROM blobs WHERE counted_in IS NULL OR pack_id IS NOT NULL ORDER BY id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		var (
			digest []byte
			ext    string
		)
		exts := map[string]string{}
		for rows.Next() {
			var r unusualRow
			if err := rows.Scan(&r.id, &digest, &ext, &r.used, &r.packed); err != nil {
				return err
			}
			if len(digest) != cas.DigestSize {
				return fmt.Errorf("blob row with a %d-byte digest", len(digest))
			}
			// Blobs share a few extensions: one string each.
			if r.ext = exts[ext]; r.ext != ext {
				r.ext = strings.Clone(ext)
				if len(exts) < 1000 {
					exts[r.ext] = r.ext
				}
			}
			r.digest = cas.Digest(digest)
			u.rows = append(u.rows, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("unused and packed blob rows: %w", err)
	}
	return u, nil
}
