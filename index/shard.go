package index

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
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

// shardQuery returns the query of cols (a select list and its FROM) of the
// rows whose digest start, the expression key, is at or above a bound and,
// when bounded, below another, in order: the queries of a shard's rows.
func shardQuery(cols, key, order string, bounded bool) string {
	q := `SELECT ` + cols + ` WHERE ` + key + ` >= ?`
	if bounded {
		q += ` AND ` + key + ` < ?`
	}
	return q + ` ORDER BY ` + order
}

// shardSQL is BlobsInShard's query of the blobs whose digests' starts are
// at or above a bound and, when bounded, below another.
func shardSQL(bounded bool) string {
	return shardQuery(`b.id, b.digest, b.ext, b.size, b.last_referenced, b.counted_in IS NOT NULL,
		b.pack_id IS NOT NULL FROM blobs b`, `substr(b.digest, 1, 8)`, `b.digest, b.ext`, bounded)
}

// shardIDsSQL is BlobIDsInShard's query: shardSQL's, of fewer columns.
func shardIDsSQL(bounded bool) string {
	return shardQuery(`b.id, b.digest, b.ext FROM blobs b`, `substr(b.digest, 1, 8)`, `b.digest, b.ext`, bounded)
}

// readShard reads, in one read retried while busy, the rows that query
// (shardSQL or its kin) gives of the blobs whose digest starts with the
// byte shard, each made a T by scan. A shard is bounded by its byte and
// the next; the last has no upper bound.
func readShard[T any](ctx context.Context, x *Index, shard byte, query func(bounded bool) string,
	scan func(*sql.Rows) (T, error)) ([]T, error) {
	q, args := query(shard < 0xff), []any{[]byte{shard}}
	if shard < 0xff {
		args = append(args, []byte{shard + 1})
	}
	var out []T
	err := x.read(ctx, func() error {
		out = out[:0]
		return queryRows(ctx, x.db, q, args, func(rows *sql.Rows) error {
			r, err := scan(rows)
			if err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// BlobsInShard returns the rows of the blobs whose digest starts with the
// byte shard, in the order of their file names (digest, then extension):
// a 256th of the blobs at a time, so that a mark of every blob never holds
// them all. blobs_digest finds them by the digests' first bytes; they are
// sorted, a 256th at a time.
func (x *Index) BlobsInShard(ctx context.Context, shard byte) ([]ShardBlob, error) {
	out, err := readShard(ctx, x, shard, shardSQL, func(rows *sql.Rows) (ShardBlob, error) {
		var (
			r      ShardBlob
			digest []byte
			last   int64
		)
		if err := rows.Scan(&r.ID, &digest, &r.Blob.Ext, &r.Size, &last, &r.Used, &r.Packed); err != nil {
			return r, err
		}
		d, err := digestOf(digest)
		r.Blob.Digest, r.LastReferenced = d, time.Unix(0, last)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("blobs of shard %02x: %w", shard, err)
	}
	return out, nil
}

// extNames holds one string of each blob extension read: the rows of a
// read share a few extensions, and a copy of each row's was most of the
// garbage of a mark, which reads every row of the index. It holds at most
// a thousand; any other is a string of its own.
type extNames map[string]string

// of returns the extension ext, whose bytes may be the driver's, to be
// overwritten by the next row, as a string of its own.
func (m extNames) of(ext []byte) string {
	if e, ok := m[string(ext)]; ok {
		return e
	}
	e := string(ext)
	if len(m) < 1000 {
		m[e] = e
	}
	return e
}

// BlobIDsInShard returns the ids and blobs of the rows whose digest starts
// with the byte shard, in the order of their file names, as BlobsInShard
// does, but only those columns. UnusualBlobRows gives what the marks need
// of the few rows that are not used and loose.
func (x *Index) BlobIDsInShard(ctx context.Context, shard byte) ([]BlobID, error) {
	// The columns are read in place, and the rows share their extensions'
	// strings (see extNames).
	var digest, ext sql.RawBytes
	exts := extNames{}
	out, err := readShard(ctx, x, shard, shardIDsSQL, func(rows *sql.Rows) (BlobID, error) {
		var r BlobID
		if err := rows.Scan(&r.ID, &digest, &ext); err != nil {
			return r, err
		}
		d, err := digestOf(digest)
		r.Blob = cas.Blob{Digest: d, Ext: exts.of(ext)}
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("blob ids of shard %02x: %w", shard, err)
	}
	return out, nil
}

// shardKeysSQL is BlobKeysInShard's query: blobs_digest alone, which
// holds each row's digest start and id, in that order.
func shardKeysSQL(bounded bool) string {
	return shardQuery(`substr(digest, 1, 8), id FROM blobs`, `substr(digest, 1, 8)`, `substr(digest, 1, 8), id`, bounded)
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
	var key sql.RawBytes
	out, err := readShard(ctx, x, shard, shardKeysSQL, func(rows *sql.Rows) (BlobKey, error) {
		var r BlobKey
		if err := rows.Scan(&key, &r.ID); err != nil {
			return r, err
		}
		if len(key) != digestKeyLen {
			return r, fmt.Errorf("blob row with a %d-byte digest start", len(key))
		}
		r.Key = DigestKey(key)
		return r, nil
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
	for chunk := range slices.Chunk(ids, rowsChunk) {
		q, args := blobsByIDSQL(len(chunk)), idArgs(chunk)
		err := x.read(ctx, func() error {
			return queryBlobRows(ctx, x.db, q, args, func(id int64, digest []byte, ext string) error {
				d, err := digestOf(digest)
				if err != nil {
					return err
				}
				out[id] = cas.Blob{Digest: d, Ext: ext}
				return nil
			})
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
	// lastRef is the row's last_referenced, in Unix nanoseconds, for a row
	// no part uses (0 for a used one).
	lastRef int64
	used    bool
	packed  bool
}

// shardBlob returns the row as InShard and Row give it.
func (r *unusualRow) shardBlob() ShardBlob {
	sb := ShardBlob{ID: r.id, Blob: cas.Blob{Digest: r.digest, Ext: r.ext}, Used: r.used, Packed: r.packed}
	if !r.used {
		sb.LastReferenced = time.Unix(0, r.lastRef)
	}
	return sb
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
		return u.rows[i].shardBlob()
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
		out[i] = u.rows[j].shardBlob()
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
		var digest, ext sql.RawBytes
		exts := extNames{}
		return queryRows(ctx, x.db, `SELECT id, digest, ext, CASE WHEN counted_in IS NULL THEN last_referenced ELSE 0 END,
			counted_in IS NOT NULL, pack_id IS NOT NULL
			FROM blobs WHERE counted_in IS NULL OR pack_id IS NOT NULL ORDER BY id`, nil, func(rows *sql.Rows) error {
			var r unusualRow
			if err := rows.Scan(&r.id, &digest, &ext, &r.lastRef, &r.used, &r.packed); err != nil {
				return err
			}
			var err error
			if r.digest, err = digestOf(digest); err != nil {
				return err
			}
			r.ext = exts.of(ext)
			u.rows = append(u.rows, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("unused and packed blob rows: %w", err)
	}
	return u, nil
}
