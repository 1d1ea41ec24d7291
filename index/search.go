package index

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
	"github.com/toolcas/toolcas/search"
)

// UnsearchedBlob is a blob the search index does not cover yet.
type UnsearchedBlob struct {
	ID   int64
	Blob cas.Blob
	Size int64
	// Text says that a text part uses the blob: only those are indexed.
	Text bool
}

// UnsearchedBlobs returns up to limit blobs that no search segment covers,
// with ids above after, in increasing order of id.
func (x *Index) UnsearchedBlobs(ctx context.Context, after int64, limit int) ([]UnsearchedBlob, error) {
	type row struct {
		ID     int64  `db:"id"`
		Digest []byte `db:"digest"`
		Ext    string `db:"ext"`
		Size   int64  `db:"size"`
		Text   bool   `db:"text"`
	}
	rows, err := selectRows[row](ctx, x, `SELECT b.id, b.digest, b.ext, b.size,
		EXISTS (SELECT 1 FROM parts p WHERE p.blob_id = b.id AND p.kind = 'text') AS text
		FROM blobs b WHERE b.id > (SELECT `+x.scalar("max")+`(low, ?) FROM search_state) AND b.search_segment IS NULL
		ORDER BY b.id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("unsearched blobs: %w", err)
	}
	return convertRows(rows, func(r row) (UnsearchedBlob, error) {
		d, err := digestOf(r.Digest)
		return UnsearchedBlob{ID: r.ID, Blob: cas.Blob{Digest: d, Ext: r.Ext}, Size: r.Size, Text: r.Text}, err
	})
}

// SearchLag counts the blobs, and their bytes, that no search segment
// covers yet.
func (x *Index) SearchLag(ctx context.Context) (blobs, bytes int64, err error) {
	err = x.read(ctx, func() error {
		return x.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(size), 0) FROM blobs
			WHERE id > (SELECT low FROM search_state) AND search_segment IS NULL`).Scan(&blobs, &bytes)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("search lag: %w", err)
	}
	return blobs, bytes, nil
}

// SearchSegmentRecord is a segment of the search index to record.
type SearchSegmentRecord struct {
	// Blobs are the ids of the blobs indexed, in increasing order.
	Blobs []int64
	// Blocks gives the block of each blob of Blobs: its position in the
	// posting lists, which count Blocks' largest value plus one. Nil puts
	// each blob in a block of its own, in the order of Blobs.
	Blocks []int
	// Packed says, for each blob of Blobs, that it was read from a pack
	// (nil: none was), so that a pack can tell the segments whose blobs it
	// has moved since.
	Packed []bool
	// Bytes counts the text bytes indexed.
	Bytes int64
	// Empty are blobs with nothing to index (no text part uses them, or
	// their bytes are not text), marked so that no search reads them.
	Empty []int64
	// Postings calls add with each trigram and its encoded posting list,
	// in increasing order of trigram.
	Postings func(add func(trigram uint32, list []byte) error) error
	// Through is the largest blob id the segment's reader looked at: every
	// blob up to it that is not covered afterwards could not be read.
	Through int64
}

// Segment blob lists: the blob ids as unsigned varints, each the gap from
// the one before and followed by the blob's block times two, plus one when
// the blob was read from a pack; stored as search.Compact makes it. (The
// lists before migration 00013 had no blocks and no first byte; it
// dropped them.)
//
// maxSegmentEntry bounds the bytes of one blob's entry: a gap's varint
// and its block's, a block being below 4,096.
const maxSegmentEntry = binary.MaxVarintLen64 + 2

// AddSearchSegment records a segment and marks its blobs as covered, in
// one transaction, and returns the segment's id. A blob that another
// segment covered meanwhile, or whose row is gone, is left as it is: the
// new segment's postings do not count for it.
func (x *Index) AddSearchSegment(ctx context.Context, r SearchSegmentRecord) (int64, error) {
	if r.Blocks != nil && len(r.Blocks) != len(r.Blobs) || r.Packed != nil && len(r.Packed) != len(r.Blobs) {
		return 0, fmt.Errorf("add search segment: %d blobs, %d blocks, %d packed flags", len(r.Blobs), len(r.Blocks), len(r.Packed))
	}
	var ids []byte
	prev := int64(0)
	for i, id := range r.Blobs {
		if id <= prev {
			return 0, fmt.Errorf("add search segment: blob ids not increasing at %d", id)
		}
		block := i
		if r.Blocks != nil {
			block = r.Blocks[i]
		}
		if block < 0 {
			return 0, fmt.Errorf("add search segment: blob %d in block %d", id, block)
		}
		v := uint64(block) << 1
		if r.Packed != nil && r.Packed[i] {
			v |= 1
		}
		ids = binary.AppendUvarint(binary.AppendUvarint(ids, uint64(id-prev)), v)
		prev = id
	}
	var seg int64
	err := x.write(ctx, func(tx *sql.Tx) error {
		if len(r.Blobs) > 0 {
			err := tx.QueryRowContext(ctx, `INSERT INTO search_segments (blob_ids, blobs, bytes, created_at)
				VALUES (?, ?, ?, ?) RETURNING id`, search.Compact(ids), len(r.Blobs), r.Bytes, x.now().UnixNano()).Scan(&seg)
			if err != nil {
				return err
			}
			post, err := tx.PrepareContext(ctx, `INSERT INTO search_posting_groups (grp, segment, data) VALUES (?, ?, ?)`)
			if err != nil {
				return err
			}
			defer post.Close()
			var w search.GroupWriter
			group, last, started := uint32(0), uint32(0), false
			flush := func() error {
				if !started {
					return nil
				}
				_, err := post.ExecContext(ctx, int64(group), seg, w.Bytes())
				return err
			}
			if err := r.Postings(func(t uint32, list []byte) error {
				if started && t <= last || t>>24 != 0 {
					return fmt.Errorf("trigram %#x out of order or out of range", t)
				}
				if g := search.GroupOf(t); !started || g != group {
					if err := flush(); err != nil {
						return err
					}
					group, started = g, true
				}
				w.Add(t, list)
				last = t
				return nil
			}); err != nil {
				return err
			}
			if err := flush(); err != nil {
				return err
			}
		}
		mark, err := tx.PrepareContext(ctx, `UPDATE blobs SET search_segment = ? WHERE id = ? AND search_segment IS NULL`)
		if err != nil {
			return err
		}
		defer mark.Close()
		for _, id := range r.Blobs {
			if _, err := mark.ExecContext(ctx, seg, id); err != nil {
				return err
			}
		}
		for _, id := range r.Empty {
			if _, err := mark.ExecContext(ctx, 0, id); err != nil {
				return err
			}
		}
		if x.pg {
			return nil // see migrations/postgres/00011_search.sql
		}
		// Every blob up to Through covered: the lag starts above it.
		_, err = tx.ExecContext(ctx, `UPDATE search_state SET low = ? WHERE low < ? AND NOT EXISTS
			(SELECT 1 FROM blobs WHERE id > search_state.low AND id <= ? AND search_segment IS NULL)`,
			r.Through, r.Through, r.Through)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("add search segment: %w", err)
	}
	return seg, nil
}

// SearchSegment is a segment of the search index.
type SearchSegment struct {
	ID int64
	// N counts its blobs, and NBlocks their blocks (positions in the
	// posting lists). Blocks are numbered in the order the blobs were read
	// in, which is the order they are stored in.
	N       int
	NBlocks int
	// Packed counts the blobs read from a pack when it was made.
	Packed    int64
	Bytes     int64
	CreatedAt time.Time
	// entries are the blobs' entries as the row lists them (see
	// maxSegmentEntry), checked when read and decoded as a search goes,
	// which keeps only its candidates: decoded into slices, the ids and
	// blocks of a store of 134,000 blobs were 2 MB of new memory for a
	// process that searches once.
	entries []byte
}

// Each calls fn with each blob's id and block, in increasing order of id.
func (sg SearchSegment) Each(fn func(blob int64, block int)) {
	prev, rest := int64(0), sg.entries
	for len(rest) > 0 {
		gap, k := binary.Uvarint(rest)
		rest, prev = rest[k:], prev+int64(gap)
		v, k := binary.Uvarint(rest)
		rest = rest[k:]
		fn(prev, int(v>>1))
	}
}

// Blobs returns the blobs' ids, in increasing order, and the block of
// each.
func (sg SearchSegment) Blobs() (ids []int64, blocks []int) {
	ids, blocks = make([]int64, 0, sg.N), make([]int, 0, sg.N)
	sg.Each(func(id int64, block int) {
		ids, blocks = append(ids, id), append(blocks, block)
	})
	return ids, blocks
}

// InReadingOrder returns the ids of the blobs of the blocks in set (nil:
// of every block), block by block.
func (sg SearchSegment) InReadingOrder(has func(block int) bool) []int64 {
	type entry struct {
		id    int64
		block int
	}
	var in []entry
	sg.Each(func(id int64, block int) {
		if has == nil || has(block) {
			in = append(in, entry{id, block})
		}
	})
	slices.SortStableFunc(in, func(a, b entry) int { return a.block - b.block })
	out := make([]int64, len(in))
	for i, e := range in {
		out[i] = e.id
	}
	return out
}

// SearchSegments returns every segment of the search index, oldest first.
func (x *Index) SearchSegments(ctx context.Context) ([]SearchSegment, error) {
	var segs []SearchSegment
	err := x.read(ctx, func() error {
		var err error
		segs, err = searchSegments(ctx, x.db)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("search segments: %w", err)
	}
	return segs, nil
}

func searchSegments(ctx context.Context, db queryer) ([]SearchSegment, error) {
	var out []SearchSegment
	err := queryRows(ctx, db, `SELECT id, blob_ids, blobs, bytes, created_at FROM search_segments ORDER BY id`, nil,
		func(rows *sql.Rows) error {
			var id, n, bytes, created int64
			var ids []byte
			if err := rows.Scan(&id, &ids, &n, &bytes, &created); err != nil {
				return err
			}
			sg := SearchSegment{ID: id, Bytes: bytes, CreatedAt: time.Unix(0, created)}
			rest, err := search.Expand(ids, int(min(n, 1<<30))*maxSegmentEntry)
			if err != nil {
				return fmt.Errorf("search segment %d: blob ids: %w", id, err)
			}
			sg.entries = rest
			for prev := uint64(0); len(rest) > 0; sg.N++ {
				gap, k := binary.Uvarint(rest)
				if k <= 0 || gap == 0 || prev+gap < prev || prev+gap > math.MaxInt64 {
					return fmt.Errorf("search segment %d: damaged blob ids", id)
				}
				rest, prev = rest[k:], prev+gap
				block, k := binary.Uvarint(rest)
				if k <= 0 || block>>1 >= uint64(n) {
					return fmt.Errorf("search segment %d: damaged blob ids", id)
				}
				rest = rest[k:]
				sg.Packed += int64(block & 1)
				sg.NBlocks = max(sg.NBlocks, int(block>>1)+1)
			}
			if int64(sg.N) != n {
				return fmt.Errorf("search segment %d: %d blob ids, the row says %d", id, sg.N, n)
			}
			out = append(out, sg)
			return nil
		})
	return out, err
}

// SegmentLive counts the blobs whose rows name a search segment: Live of
// them, Packed of those in a pack now.
type SegmentLive struct {
	Live, Packed int64
}

// SearchSegmentLive counts, for each segment, the blobs whose rows still
// name it, and those of them in a pack now.
func (x *Index) SearchSegmentLive(ctx context.Context) (map[int64]SegmentLive, error) {
	type row struct {
		Seg    int64 `db:"search_segment"`
		Live   int64 `db:"live"`
		Packed int64 `db:"packed"`
	}
	rows, err := selectRows[row](ctx, x, `SELECT search_segment, count(*) AS live, count(pack_id) AS packed FROM blobs
		WHERE search_segment > 0 GROUP BY search_segment`)
	if err != nil {
		return nil, fmt.Errorf("search segments: %w", err)
	}
	out := make(map[int64]SegmentLive, len(rows))
	for _, r := range rows {
		out[r.Seg] = SegmentLive{Live: r.Live, Packed: r.Packed}
	}
	return out, nil
}

// DropSearchSegments removes segments and their postings, and marks their
// blobs as not indexed, so that the next catch-up indexes them again.
func (x *Index) DropSearchSegments(ctx context.Context, segs []int64) error {
	if len(segs) == 0 {
		return nil
	}
	in := placeholders(len(segs))
	args := idArgs(segs)
	err := x.write(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{
			`UPDATE search_state SET low = ` + x.scalar("min") + `(low, coalesce((SELECT min(id) - 1 FROM blobs WHERE search_segment IN ` + in + `), low))`,
			`UPDATE blobs SET search_segment = NULL WHERE search_segment IN ` + in,
			`DELETE FROM search_posting_groups WHERE segment IN ` + in,
			`DELETE FROM search_segments WHERE id IN ` + in,
		} {
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("drop search segments: %w", err)
	}
	return nil
}

// SearchView is what a search needs of the index, read in one snapshot:
// the segments, the posting lists of the trigrams it asks for, and the
// blobs no segment covers. Every blob a part used at that moment is in
// exactly one of them.
type SearchView struct {
	Segments []SearchSegment
	// Postings holds, for each segment id, the posting list of each
	// trigram asked for that the segment has.
	Postings map[int64]map[uint32][]byte
	// Lag lists the blobs a text part uses that no segment covers, in
	// increasing order of id, and Bytes their size.
	Lag      []int64
	LagBytes int64
}

// SearchView reads the search index's segments, the posting lists of
// trigrams (none when trigrams is nil), and its lag, in one snapshot.
func (x *Index) SearchView(ctx context.Context, trigrams []uint32) (SearchView, error) {
	var v SearchView
	err := x.read(ctx, func() error {
		v = SearchView{Postings: map[int64]map[uint32][]byte{}}
		opts := &sql.TxOptions{ReadOnly: true}
		if x.pg {
			// One snapshot for every statement, as SQLite's transactions have.
			opts.Isolation = sql.LevelRepeatableRead
		}
		tx, err := x.db.BeginTx(ctx, opts)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if v.Segments, err = searchSegments(ctx, tx); err != nil {
			return err
		}
		if len(trigrams) > 0 {
			want, groups := map[uint32]bool{}, map[uint32]bool{}
			var args []any
			for _, t := range trigrams {
				if g := search.GroupOf(t); !groups[g] {
					groups[g] = true
					args = append(args, int64(g))
				}
				want[t] = true
			}
			err := queryRows(ctx, tx, `SELECT grp, segment, data FROM search_posting_groups WHERE grp IN `+
				placeholders(len(args)), args, func(rows *sql.Rows) error {
				var g, seg int64
				var data []byte
				if err := rows.Scan(&g, &seg, &data); err != nil {
					return err
				}
				if g < 0 || g > 0xff {
					return fmt.Errorf("segment %d: %w: group %d", seg, search.ErrBadPosting, g)
				}
				lists := v.Postings[seg]
				if lists == nil {
					lists = map[uint32][]byte{}
					v.Postings[seg] = lists
				}
				err := search.DecodeGroup(uint32(g), data, func(t uint32, list []byte) {
					if want[t] {
						lists[t] = list
					}
				})
				if err != nil {
					return fmt.Errorf("segment %d: %w", seg, err)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return queryRows(ctx, tx, `SELECT b.id, b.size FROM blobs b
			WHERE b.id > (SELECT low FROM search_state) AND b.search_segment IS NULL
			AND EXISTS (SELECT 1 FROM parts p WHERE p.blob_id = b.id AND p.kind = 'text') ORDER BY b.id`, nil,
			func(rows *sql.Rows) error {
				var id, size int64
				if err := rows.Scan(&id, &size); err != nil {
					return err
				}
				v.Lag = append(v.Lag, id)
				v.LagBytes += size
				return nil
			})
	})
	if err != nil {
		return SearchView{}, fmt.Errorf("search view: %w", err)
	}
	return v, nil
}

// RunTextBlobs returns the blobs of a run's text parts, in increasing
// order of id, and their bytes.
func (x *Index) RunTextBlobs(ctx context.Context, run string) ([]int64, int64, error) {
	if !storableText(run) {
		return nil, 0, nil
	}
	ids, err := x.runIDs(ctx, run)
	if err != nil || len(ids) == 0 {
		return nil, 0, err
	}
	type row struct {
		ID   int64 `db:"id"`
		Size int64 `db:"size"`
	}
	rows, err := selectRows[row](ctx, x, `SELECT b.id, b.size FROM blobs b WHERE b.id IN
		(SELECT p.blob_id FROM parts p WHERE p.run_id IN `+placeholders(len(ids))+` AND p.kind = 'text') ORDER BY b.id`,
		idArgs(ids)...)
	if err != nil {
		return nil, 0, fmt.Errorf("run text blobs: %w", err)
	}
	out := make([]int64, len(rows))
	var n int64
	for i, r := range rows {
		out[i] = r.ID
		n += r.Size
	}
	return out, n, nil
}

// SearchBlob is a blob a search reads.
type SearchBlob struct {
	ID   int64
	Blob cas.Blob
	Size int64
	// Packed says the blob is in a pack, and Pack names it (its file
	// name) as the index knew it.
	Packed bool
	Pack   string
}

// SearchBlobs returns the blobs with the given ids, in the order of ids
// (an id named twice comes once; one with no row is left out).
func (x *Index) SearchBlobs(ctx context.Context, ids []int64) ([]SearchBlob, error) {
	at := make(map[int64]int, len(ids)) // an id's place in ids, the first
	ids = slices.DeleteFunc(slices.Clone(ids), func(id int64) bool {
		if _, ok := at[id]; ok {
			return true
		}
		at[id] = len(at)
		return false
	})
	out := make([]SearchBlob, 0, len(ids))
	packOf := make([]int64, 0, len(ids)) // the pack id of out[i], 0 for none
	const batch = 8192
	for rest := ids; len(rest) > 0; {
		n := min(batch, len(rest))
		from, arg := x.joinIDs(rest[:n])
		// A search reads thousands of these rows: no join but the ids'
		// (the few packs' names are read once), no column it does not use.
		q := `SELECT b.id, b.digest, b.ext, b.size, b.pack_id FROM ` + from + ` blobs b ON b.id = j.value`
		start := len(out)
		err := x.searchRead(ctx, func(db queryer) error {
			out, packOf = out[:start], packOf[:start]
			return queryRows(ctx, db, q, []any{arg}, func(rows *sql.Rows) error {
				var sb SearchBlob
				var digest sql.RawBytes
				var pack sql.NullInt64
				if err := rows.Scan(&sb.ID, &digest, &sb.Blob.Ext, &sb.Size, &pack); err != nil {
					return err
				}
				d, err := digestOf(digest)
				if err != nil {
					return err
				}
				sb.Blob.Digest, sb.Packed = d, pack.Valid
				out, packOf = append(out, sb), append(packOf, pack.Int64)
				return nil
			})
		})
		if err != nil {
			return nil, fmt.Errorf("search blobs: %w", err)
		}
		rest = rest[n:]
	}
	names, err := x.packNames(ctx, packOf)
	if err != nil {
		return nil, fmt.Errorf("search blobs: %w", err)
	}
	for i := range out {
		if out[i].Packed {
			out[i].Pack = names[packOf[i]]
		}
	}
	slices.SortFunc(out, func(a, b SearchBlob) int { return cmp.Compare(at[a.ID], at[b.ID]) })
	return out, nil
}

// packNames returns the names of the packs whose ids packs lists (0 for
// none). A pack deleted since its blobs were read has no name: its blobs
// are looked for where they are now.
func (x *Index) packNames(ctx context.Context, packs []int64) (map[int64]string, error) {
	var ids []int64
	seen := map[int64]bool{0: true}
	for _, p := range packs {
		if !seen[p] {
			seen[p] = true
			ids = append(ids, p)
		}
	}
	names := make(map[int64]string, len(ids))
	for rest := ids; len(rest) > 0; {
		n := min(500, len(rest))
		err := x.read(ctx, func() error {
			return queryRows(ctx, x.db, `SELECT id, name FROM packs WHERE id IN `+placeholders(n), idArgs(rest[:n]),
				func(rows *sql.Rows) error {
					var id int64
					var name string
					if err := rows.Scan(&id, &name); err != nil {
						return err
					}
					names[id] = name
					return nil
				})
		})
		if err != nil {
			return nil, fmt.Errorf("pack names: %w", err)
		}
		rest = rest[n:]
	}
	return names, nil
}

// SearchPartsOptions filters the parts SearchParts returns.
type SearchPartsOptions struct {
	Run   string
	Tool  string
	Since time.Time
	// AllVersions returns every version of a key, not only the newest.
	AllVersions bool
}

// SearchPart is a text part whose blob is a candidate.
type SearchPart struct {
	Part
	BlobID int64
}

// SearchParts calls fn with the text parts matching o whose blob is one of
// blobs, blob by blob in the order of blobs (a blob named twice comes
// once), the parts of one blob together, in the order they were written.
// The rows are read as they are now: a blob whose id a segment lists may
// have lost its parts since, or be gone, its id given to another blob
// (whose parts are left out). A part's Blob is the one given.
func (x *Index) SearchParts(ctx context.Context, o SearchPartsOptions, blobs []SearchBlob, fn func(SearchPart) error) error {
	if !storableText(o.Run) {
		return nil
	}
	var runIDs []int64
	if o.Run != "" {
		var err error
		if runIDs, err = x.runIDs(ctx, o.Run); err != nil || len(runIDs) == 0 {
			return err
		}
	}
	where := []string{"p.kind = 'text'"}
	var args []any
	if len(runIDs) > 0 {
		where, args = append(where, "p.run_id IN "+placeholders(len(runIDs))), append(args, idArgs(runIDs)...)
	}
	if o.Tool != "" {
		where, args = append(where, "p.tool = ?"), append(args, storable(o.Tool))
	}
	if !o.Since.IsZero() {
		where, args = append(where, "p.created_at >= ?"), append(args, o.Since.UnixNano())
	}
	if !o.AllVersions {
		where = append(where, "NOT EXISTS (SELECT 1 FROM parts n WHERE n.key = p.key AND n.run_id = p.run_id AND n.version > p.version)")
	}
	seen := make(map[int64]bool, len(blobs))
	blobs = slices.DeleteFunc(slices.Clone(blobs), func(b SearchBlob) bool {
		if seen[b.ID] {
			return true
		}
		seen[b.ID] = true
		return false
	})
	// A search reads a row for each part it reports: the runs' names come
	// from a query of their own, once a run, and the blob from the caller,
	// which costs a third of reading them with each part.
	runs := map[int64]runName{}
	const batch = 400
	for len(blobs) > 0 {
		n := min(batch, len(blobs))
		bs := blobs[:n]
		blobs = blobs[n:]
		ids := make([]int64, n)
		digests := make(map[int64]cas.Digest, n)
		for i, b := range bs {
			ids[i], digests[b.ID] = b.ID, b.Blob.Digest
		}
		from, arg := x.joinIDs(ids)
		// The blob's digest is read to tell its row from another's that took
		// its id after gc deleted it (SQLite gives the highest id again).
		q := `SELECT p.id, p.run_id, p.key, p.step, p.tool, p.call_id, p.part, p.version, p.mime, p.filename, p.chars,
			p.bytes, p.created_at, p.blob_id, b.digest FROM ` + from + ` parts p ON p.blob_id = j.value
			JOIN blobs b ON b.id = p.blob_id WHERE ` + strings.Join(where, " AND ")
		byBlob := make(map[int64][]SearchPart)
		runOf := make(map[int64]int64) // part id to run id
		err := x.searchReadTx(ctx, func(tx queryer) error {
			clear(byBlob)
			clear(runOf)
			err := queryRows(ctx, tx, q, append([]any{arg}, args...), func(rows *sql.Rows) error {
				var sp SearchPart
				var runID, created int64
				var digest []byte
				if err := rows.Scan(&sp.ID, &runID, &sp.Key, &sp.Step, &sp.Tool, &sp.CallID, &sp.Part.Part, &sp.Version,
					&sp.MIME, &sp.Filename, &sp.Chars, &sp.Bytes, &created, &sp.BlobID, &digest); err != nil {
					return err
				}
				if d, ok := digests[sp.BlobID]; !ok || string(digest) != string(d[:]) {
					return nil
				}
				sp.Kind, sp.CreatedAt = catalog.KindText, time.Unix(0, created)
				byBlob[sp.BlobID] = append(byBlob[sp.BlobID], sp)
				runOf[sp.ID] = runID
				return nil
			})
			if err != nil {
				return err
			}
			return x.readRunNames(ctx, tx, runOf, runs)
		})
		if err != nil {
			return fmt.Errorf("search parts: %w", err)
		}
		for _, b := range bs {
			ps := byBlob[b.ID]
			slices.SortFunc(ps, func(a, b SearchPart) int { return cmp.Compare(a.ID, b.ID) })
			for _, sp := range ps {
				r, ok := runs[runOf[sp.ID]]
				if !ok {
					return fmt.Errorf("search parts: part %d has no run %d", sp.ID, runOf[sp.ID])
				}
				sp.Key, sp.Run, sp.Blob = r.prefix+sp.Key, r.name, b.Blob
				if err := fn(sp); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// runName is a runs row: a run's name and its keys' prefix.
type runName struct{ name, prefix string }

// readRunNames adds to runs the rows of the runs that runOf's values name
// and runs does not hold yet; a run with no row is left out, and runs
// holds nothing but rows read, whether tx is retried or not.
func (x *Index) readRunNames(ctx context.Context, tx queryer, runOf map[int64]int64, runs map[int64]runName) error {
	var need []int64
	asked := map[int64]bool{}
	for _, r := range runOf {
		if _, ok := runs[r]; !ok && !asked[r] {
			asked[r] = true
			need = append(need, r)
		}
	}
	if len(need) == 0 {
		return nil
	}
	from, arg := x.joinIDs(need)
	return queryRows(ctx, tx, `SELECT r.id, r.name, r.prefix FROM `+from+` runs r ON r.id = j.value`, []any{arg},
		func(rows *sql.Rows) error {
			var id int64
			var r runName
			if err := rows.Scan(&id, &r.name, &r.prefix); err != nil {
				return err
			}
			runs[id] = r
			return nil
		})
}

// scalar names SQLite's two-argument max or min in the index's dialect.
func (x *Index) scalar(f string) string {
	if !x.pg {
		return f
	}
	return map[string]string{"max": "GREATEST", "min": "LEAST"}[f]
}
