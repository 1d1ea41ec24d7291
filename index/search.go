package index

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolcas/toolcas/cas"
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
	// Blobs are the ids of the blobs indexed, in the order of their
	// positions in the posting lists.
	Blobs []int64
	// Bytes counts the text bytes indexed.
	Bytes int64
	// Empty are blobs with nothing to index (no text part uses them, or
	// their bytes are not text), marked so that no search reads them.
	Empty []int64
	// Postings calls add with each trigram and its encoded posting list.
	Postings func(add func(trigram uint32, list []byte) error) error
	// Through is the largest blob id the segment's reader looked at: every
	// blob up to it that is not covered afterwards could not be read.
	Through int64
}

// AddSearchSegment records a segment and marks its blobs as covered, in
// one transaction, and returns the segment's id. A blob that another
// segment covered meanwhile, or whose row is gone, is left as it is: the
// new segment's postings do not count for it.
func (x *Index) AddSearchSegment(ctx context.Context, r SearchSegmentRecord) (int64, error) {
	var ids []byte
	prev := int64(0)
	for _, id := range r.Blobs {
		if id <= prev {
			return 0, fmt.Errorf("add search segment: blob ids not increasing at %d", id)
		}
		ids = binary.AppendUvarint(ids, uint64(id-prev))
		prev = id
	}
	var seg int64
	err := x.write(ctx, func(tx *sql.Tx) error {
		if len(r.Blobs) > 0 {
			err := tx.QueryRowContext(ctx, `INSERT INTO search_segments (blob_ids, blobs, bytes, created_at)
				VALUES (?, ?, ?, ?) RETURNING id`, ids, len(r.Blobs), r.Bytes, x.now().UnixNano()).Scan(&seg)
			if err != nil {
				return err
			}
			post, err := tx.PrepareContext(ctx, `INSERT INTO search_postings (trigram, segment, list) VALUES (?, ?, ?)`)
			if err != nil {
				return err
			}
			defer post.Close()
			if err := r.Postings(func(t uint32, list []byte) error {
				_, err := post.ExecContext(ctx, int64(t), seg, list)
				return err
			}); err != nil {
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
	// Blobs are its blobs' ids, in the order of their positions.
	Blobs []int64
	// Live counts the blobs whose rows still name the segment.
	Live      int64
	Bytes     int64
	CreatedAt time.Time
}

// SearchSegments returns every segment of the search index, oldest first.
func (x *Index) SearchSegments(ctx context.Context) ([]SearchSegment, error) {
	type row struct {
		ID        int64  `db:"id"`
		IDs       []byte `db:"blob_ids"`
		Blobs     int64  `db:"blobs"`
		Bytes     int64  `db:"bytes"`
		CreatedAt int64  `db:"created_at"`
	}
	rows, err := selectRows[row](ctx, x, `SELECT id, blob_ids, blobs, bytes, created_at FROM search_segments ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("search segments: %w", err)
	}
	return convertRows(rows, func(r row) (SearchSegment, error) {
		s := SearchSegment{ID: r.ID, Bytes: r.Bytes, CreatedAt: time.Unix(0, r.CreatedAt), Blobs: make([]int64, 0, r.Blobs)}
		prev := int64(0)
		for rest := r.IDs; len(rest) > 0; {
			gap, k := binary.Uvarint(rest)
			if k <= 0 || gap == 0 {
				return s, fmt.Errorf("search segment %d: damaged blob ids", r.ID)
			}
			rest, prev = rest[k:], prev+int64(gap)
			s.Blobs = append(s.Blobs, prev)
		}
		if int64(len(s.Blobs)) != r.Blobs {
			return s, fmt.Errorf("search segment %d: %d blob ids, the row says %d", r.ID, len(s.Blobs), r.Blobs)
		}
		return s, nil
	})
}

// SearchSegmentLive counts, for each segment, the blobs whose rows still
// name it.
func (x *Index) SearchSegmentLive(ctx context.Context) (map[int64]int64, error) {
	type row struct {
		Seg  int64 `db:"search_segment"`
		Live int64 `db:"live"`
	}
	rows, err := selectRows[row](ctx, x, `SELECT search_segment, count(*) AS live FROM blobs
		WHERE search_segment > 0 GROUP BY search_segment`)
	if err != nil {
		return nil, fmt.Errorf("search segments: %w", err)
	}
	out := make(map[int64]int64, len(rows))
	for _, r := range rows {
		out[r.Seg] = r.Live
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
			`DELETE FROM search_postings WHERE segment IN ` + in,
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

// SearchPostings calls fn with the posting list of each of trigrams in
// each segment that has one, in increasing order of segment.
func (x *Index) SearchPostings(ctx context.Context, trigrams []uint32, fn func(trigram uint32, segment int64, list []byte) error) error {
	if len(trigrams) == 0 {
		return nil
	}
	args := make([]any, len(trigrams))
	for i, t := range trigrams {
		args[i] = int64(t)
	}
	q := `SELECT trigram, segment, list FROM search_postings WHERE trigram IN ` + placeholders(len(trigrams)) +
		` ORDER BY segment`
	delivered := false
	err := x.read(ctx, func() error {
		err := queryRows(ctx, x.db, q, args, func(rows *sql.Rows) error {
			var t, seg int64
			var list []byte
			if err := rows.Scan(&t, &seg, &list); err != nil {
				return err
			}
			delivered = true
			return fn(uint32(t), seg, list)
		})
		if err != nil && delivered {
			return noRetry{err}
		}
		return err
	})
	if nr, ok := errors.AsType[noRetry](err); ok {
		err = nr.err
	}
	if err != nil {
		return fmt.Errorf("search postings: %w", err)
	}
	return nil
}

// SearchCandidate is a blob that may hold a match: Segment is the segment
// whose postings say so, 0 for a blob no segment covers yet, or AnySegment
// for a blob to read whatever covers it.
type SearchCandidate struct {
	Blob    int64
	Segment int64
}

// AnySegment is the Segment of a SearchCandidate to read whatever covers
// it.
const AnySegment = -1

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
	// Packed says the blob is in a pack.
	Packed bool
}

// SearchParts calls fn with the text parts matching o whose blob is one of
// cands and still covered as the candidate says (by its segment, or by
// none), blob by blob in the order of cands, the parts of one blob
// together, in the order they were written.
func (x *Index) SearchParts(ctx context.Context, o SearchPartsOptions, cands []SearchCandidate, fn func(SearchPart) error) error {
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
	// A blob may be a candidate twice: by an old segment that listed its
	// id before gc removed the blob and a new one took the id, and by the
	// lag. Each blob is read once, under whichever it is covered by now.
	want := make(map[int64][]int64, len(cands))
	var blobs []int64
	for _, c := range cands {
		if _, ok := want[c.Blob]; !ok {
			blobs = append(blobs, c.Blob)
		}
		want[c.Blob] = append(want[c.Blob], c.Segment)
	}
	const batch = 400
	for len(blobs) > 0 {
		n := min(batch, len(blobs))
		ids := blobs[:n]
		blobs = blobs[n:]
		q := `SELECT ` + partColumns + `, b.id AS blob_id, coalesce(b.search_segment, 0), b.pack_id IS NOT NULL
			FROM blobs b JOIN parts p ON p.blob_id = b.id
			WHERE b.id IN ` + placeholders(n) + ` AND ` + strings.Join(where, " AND ") + ` ORDER BY p.id`
		byBlob := make(map[int64][]SearchPart)
		err := x.read(ctx, func() error {
			clear(byBlob)
			return queryRows(ctx, x.db, q, append(idArgs(ids), args...), func(rows *sql.Rows) error {
				var r partRow
				var sp SearchPart
				var seg int64
				if err := rows.Scan(&r.ID, &r.Key, &r.Run, &r.Step, &r.Tool, &r.CallID, &r.Part, &r.Version, &r.Kind,
					&r.MIME, &r.Filename, &r.Chars, &r.Bytes, &r.Digest, &r.Ext, &r.CreatedAt, &sp.BlobID, &seg,
					&sp.Packed); err != nil {
					return err
				}
				if w := want[sp.BlobID]; !slices.Contains(w, seg) && !slices.Contains(w, AnySegment) {
					return nil // covered since by another segment, or no longer
				}
				p, err := r.part()
				if err != nil {
					return err
				}
				sp.Part = p
				byBlob[sp.BlobID] = append(byBlob[sp.BlobID], sp)
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("search parts: %w", err)
		}
		for _, id := range ids {
			for _, sp := range byBlob[id] {
				if err := fn(sp); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// scalar names SQLite's two-argument max or min in the index's dialect.
func (x *Index) scalar(f string) string {
	if !x.pg {
		return f
	}
	return map[string]string{"max": "GREATEST", "min": "LEAST"}[f]
}
