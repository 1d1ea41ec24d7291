package index

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/toolcas/toolcas/cas"
)

// PackRecord describes a pack file to record.
type PackRecord struct {
	Name  string
	Size  int64
	Raw   int64
	Blobs []cas.Blob
	// Entries is how many blobs the pack file holds, when RecordPack is
	// given only the first of them and MarkPacked the rest; zero means
	// len(Blobs).
	Entries int
}

// PackRow is a row of the packs table, with what its blobs' rows say.
type PackRow struct {
	Name      string
	Size      int64
	Raw       int64
	Blobs     int64
	CreatedAt time.Time
	// LiveBlobs and LiveBytes count the blob rows that name the pack: the
	// blobs some part may still use. The rest of Raw is dead weight that a
	// rewrite would drop.
	LiveBlobs int64
	LiveBytes int64
}

// PackCandidate is a loose blob that packing may take.
type PackCandidate struct {
	Blob cas.Blob
	Size int64
	// Tool, Run and Key are those of the first part that used the blob, to
	// put similar blobs next to each other.
	Tool, Run, Key string
}

// PackCandidates returns the blobs that some part uses, that no pack holds
// and that were last referenced before cutoff; with activeSince set, not
// those that a part of a run written to since then uses.
func (x *Index) PackCandidates(ctx context.Context, cutoff, activeSince time.Time) ([]PackCandidate, error) {
	type row struct {
		Digest []byte `db:"digest"`
		Ext    string `db:"ext"`
		Size   int64  `db:"size"`
		Tool   string `db:"tool"`
		Run    string `db:"run"`
		Key    string `db:"key"`
	}
	active, args := "", []any{cutoff.UnixNano()}
	if !activeSince.IsZero() {
		active = ` AND NOT EXISTS (SELECT 1 FROM parts q WHERE q.blob_id = b.id
			AND q.run_id IN (SELECT run_id FROM counts WHERE last_at >= ?))`
		args = append(args, activeSince.UnixNano())
	}
	rows, err := selectRows[row](ctx, x, `SELECT b.digest, b.ext, b.size, p.tool, r.name AS run, r.prefix || p.key AS key
		FROM blobs b JOIN parts p ON p.id = (SELECT min(q.id) FROM parts q WHERE q.blob_id = b.id) JOIN runs r ON r.id = p.run_id
		WHERE b.pack_id IS NULL AND b.last_referenced < ?`+active, args...)
	if err != nil {
		return nil, fmt.Errorf("pack candidates: %w", err)
	}
	return convertRows(rows, func(r row) (PackCandidate, error) {
		d, err := digestOf(r.Digest)
		return PackCandidate{Blob: cas.Blob{Digest: d, Ext: r.Ext}, Size: r.Size, Tool: r.Tool, Run: r.Run, Key: r.Key}, err
	})
}

// RecordPack records a new pack and marks its blobs as held by it, in one
// transaction. Blobs without a row are skipped: no part uses them.
func (x *Index) RecordPack(ctx context.Context, p PackRecord) error {
	err := x.write(ctx, func(tx *sql.Tx) error {
		_, err := x.insertPack(ctx, tx, p)
		return err
	})
	if err != nil {
		return fmt.Errorf("record pack %s: %w", p.Name, err)
	}
	return nil
}

func (x *Index) insertPack(ctx context.Context, tx *sql.Tx, p PackRecord) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO packs (name, size, raw, blobs, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id`,
		p.Name, p.Size, p.Raw, max(p.Entries, len(p.Blobs)), x.now().UnixNano()).Scan(&id)
	if err != nil {
		return 0, err
	}
	return id, markPacked(ctx, tx, id, p.Blobs)
}

// MarkPacked marks more blobs as held by the recorded pack name, in one
// transaction: a large pack is recorded a slice at a time (RecordPack with
// the first slice and Entries set, then MarkPacked with each next), so
// that no one transaction holds other writers back for long. Until its
// last slice is marked, the rest of its blobs read as loose, which they
// still are. Blobs without a row are skipped.
func (x *Index) MarkPacked(ctx context.Context, name string, blobs []cas.Blob) error {
	err := x.write(ctx, func(tx *sql.Tx) error {
		var id int64
		if err := tx.QueryRowContext(ctx, `SELECT id FROM packs WHERE name = ?`, name).Scan(&id); err != nil {
			return err
		}
		return markPacked(ctx, tx, id, blobs)
	})
	if err != nil {
		return fmt.Errorf("record pack %s: %w", name, err)
	}
	return nil
}

func markPacked(ctx context.Context, tx *sql.Tx, id int64, blobs []cas.Blob) error {
	stmt, err := tx.PrepareContext(ctx, `UPDATE blobs SET pack_id = ? WHERE `+digestIs+` AND ext = ?`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, b := range blobs {
		if _, err := stmt.ExecContext(ctx, id, digestKey(b.Digest), b.Digest[:], b.Ext); err != nil {
			return err
		}
	}
	return nil
}

// ReplacePack records a pack that takes over the live blobs of an old one,
// in one transaction: the new row, its blobs moved to it, any blob row still
// naming the old pack cleared (it is no longer held anywhere but as a loose
// file, if at all), and the old pack's row deleted. With an empty
// replacement (no live blobs) only the old row goes.
func (x *Index) ReplacePack(ctx context.Context, old string, p PackRecord) error {
	err := x.write(ctx, func(tx *sql.Tx) error {
		var oldID int64
		if err := tx.QueryRowContext(ctx, `SELECT id FROM packs WHERE name = ?`, old).Scan(&oldID); err != nil {
			return err
		}
		if len(p.Blobs) > 0 {
			if _, err := x.insertPack(ctx, tx, p); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE blobs SET pack_id = NULL WHERE pack_id = ?`, oldID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM packs WHERE id = ?`, oldID)
		return err
	})
	if err != nil {
		return fmt.Errorf("replace pack %s: %w", old, err)
	}
	return nil
}

// Packs lists the recorded packs with their live blobs and bytes.
func (x *Index) Packs(ctx context.Context) ([]PackRow, error) {
	type row struct {
		Name      string `db:"name"`
		Size      int64  `db:"size"`
		Raw       int64  `db:"raw"`
		Blobs     int64  `db:"blobs"`
		CreatedAt int64  `db:"created_at"`
		LiveBlobs int64  `db:"live_blobs"`
		LiveBytes int64  `db:"live_bytes"`
	}
	rows, err := selectRows[row](ctx, x, `SELECT p.name, p.size, p.raw, p.blobs, p.created_at,
		count(b.id) AS live_blobs, coalesce(sum(b.size), 0) AS live_bytes
		FROM packs p LEFT JOIN blobs b ON b.pack_id = p.id GROUP BY p.id ORDER BY p.name`)
	if err != nil {
		return nil, fmt.Errorf("packs: %w", err)
	}
	out := make([]PackRow, len(rows))
	for i, r := range rows {
		out[i] = PackRow{Name: r.Name, Size: r.Size, Raw: r.Raw, Blobs: r.Blobs, CreatedAt: time.Unix(0, r.CreatedAt),
			LiveBlobs: r.LiveBlobs, LiveBytes: r.LiveBytes}
	}
	return out, nil
}

// PackedBlobs returns the blobs whose rows name a pack, with the pack's name.
func (x *Index) PackedBlobs(ctx context.Context, pack string) ([]cas.Blob, error) {
	rows, err := selectRows[digestExt](ctx, x, `SELECT b.digest, b.ext FROM blobs b JOIN packs p ON b.pack_id = p.id
		WHERE p.name = ? ORDER BY b.id`, pack)
	if err != nil {
		return nil, fmt.Errorf("blobs of pack %s: %w", pack, err)
	}
	return convertRows(rows, digestExt.blob)
}

// PackOf returns the name of the pack the index records as holding b, or
// "" when it records none (b is loose, or has no row).
func (x *Index) PackOf(ctx context.Context, b cas.Blob) (string, error) {
	var name string
	err := x.read(ctx, func() error {
		name = ""
		return queryRows(ctx, x.db, `SELECT p.name FROM blobs b JOIN packs p ON p.id = b.pack_id WHERE `+blobDigestIs+` AND b.ext = ?`,
			[]any{digestKey(b.Digest), b.Digest[:], b.Ext}, func(rows *sql.Rows) error { return rows.Scan(&name) })
	})
	if err != nil {
		return "", fmt.Errorf("pack of %s: %w", b, err)
	}
	return name, nil
}
