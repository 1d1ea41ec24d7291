-- Every page a write changes is appended to the write-ahead log and synced
-- on every durable step, and a new blob's entry lands at a random place in
-- an index by digest: the unique index of (digest, ext), 32-byte digests
-- and an extension in each entry, changed two and a half pages a step as
-- its full pages split. blobs_digest indexes only the first 8 bytes of the
-- digest, an expression of the row: its entries are a third as wide and
-- split less. Every lookup by digest names that expression beside the
-- digest and extension it compares (see index/digest.go). Two blobs whose
-- digests start alike share an entry's key and are told apart by the rows;
-- that a (digest, ext) has one row is kept by the writers, which look for
-- the row and insert it in one statement of a transaction that holds the
-- write lock.
--
-- SQLite cannot drop a table's UNIQUE constraint: the table is made again,
-- in a transaction of its own with foreign keys off on the migration's
-- connection (they cannot be turned off inside one), as SQLite's steps for
-- changing a table's schema go: with them on, dropping blobs, which parts
-- refers to, deleted its rows one by one and checked each against parts,
-- twice as long. The rows are copied aside, the table dropped, made
-- again under its name and the rows put back; the triggers and indexes of
-- blobs go with it and are made again as 00008 and 00003 made them. Should
-- the process stop between the commit and goose's record of the version,
-- the migration runs again and makes the same table again.

-- +goose NO TRANSACTION
-- +goose Up
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;

CREATE TEMP TABLE blobs_copy AS SELECT id, digest, ext, size, first_stored, last_referenced, verified_at, pack_id,
    counted_in, part_count FROM blobs;
DROP TABLE blobs;
CREATE TABLE blobs (
    id              INTEGER PRIMARY KEY,
    digest          BLOB    NOT NULL CHECK (length(digest) = 32),
    ext             TEXT    NOT NULL,
    size            INTEGER NOT NULL CHECK (size >= 0),
    first_stored    INTEGER NOT NULL,
    last_referenced INTEGER NOT NULL,
    verified_at     INTEGER,
    pack_id         INTEGER REFERENCES packs (id),
    counted_in      INTEGER,  -- a counts row id
    part_count      INTEGER NOT NULL DEFAULT 0
);
INSERT INTO blobs (id, digest, ext, size, first_stored, last_referenced, verified_at, pack_id, counted_in, part_count)
    SELECT id, digest, ext, size, first_stored, last_referenced, verified_at, pack_id, counted_in, part_count
    FROM blobs_copy ORDER BY id;
DROP TABLE blobs_copy;

CREATE INDEX blobs_digest ON blobs (substr(digest, 1, 8));
CREATE INDEX blobs_pack ON blobs (pack_id) WHERE pack_id IS NOT NULL;

-- +goose StatementBegin
CREATE TRIGGER blobs_count_insert AFTER INSERT ON blobs WHEN NEW.counted_in IS NOT NULL BEGIN
    UPDATE counts SET blobs = blobs + 1, stored = stored + NEW.size,
        packed_blobs = packed_blobs + (CASE WHEN NEW.pack_id IS NULL THEN 0 ELSE 1 END),
        packed = packed + (CASE WHEN NEW.pack_id IS NULL THEN 0 ELSE NEW.size END)
        WHERE id = NEW.counted_in;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER blobs_unused_insert AFTER INSERT ON blobs WHEN NEW.counted_in IS NULL BEGIN
    UPDATE unused_blobs SET blobs = blobs + 1, bytes = bytes + NEW.size WHERE id = 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER blobs_count_delete AFTER DELETE ON blobs BEGIN
    UPDATE unused_blobs SET blobs = blobs - 1, bytes = bytes - OLD.size WHERE id = 1 AND OLD.counted_in IS NULL;
    UPDATE counts SET blobs = blobs - 1, stored = stored - OLD.size,
        packed_blobs = packed_blobs - (CASE WHEN OLD.pack_id IS NULL THEN 0 ELSE 1 END),
        packed = packed - (CASE WHEN OLD.pack_id IS NULL THEN 0 ELSE OLD.size END)
        WHERE id = OLD.counted_in;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER blobs_count_update AFTER UPDATE OF size, pack_id, counted_in ON blobs BEGIN
    UPDATE unused_blobs SET blobs = blobs - 1, bytes = bytes - OLD.size WHERE id = 1 AND OLD.counted_in IS NULL;
    UPDATE unused_blobs SET blobs = blobs + 1, bytes = bytes + NEW.size WHERE id = 1 AND NEW.counted_in IS NULL;
    UPDATE counts SET blobs = blobs - 1, stored = stored - OLD.size,
        packed_blobs = packed_blobs - (CASE WHEN OLD.pack_id IS NULL THEN 0 ELSE 1 END),
        packed = packed - (CASE WHEN OLD.pack_id IS NULL THEN 0 ELSE OLD.size END)
        WHERE id = OLD.counted_in;
    UPDATE counts SET blobs = blobs + 1, stored = stored + NEW.size,
        packed_blobs = packed_blobs + (CASE WHEN NEW.pack_id IS NULL THEN 0 ELSE 1 END),
        packed = packed + (CASE WHEN NEW.pack_id IS NULL THEN 0 ELSE NEW.size END)
        WHERE id = NEW.counted_in;
END;
-- +goose StatementEnd

COMMIT;
PRAGMA foreign_keys = ON;

-- +goose Down
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;

CREATE TEMP TABLE blobs_copy AS SELECT id, digest, ext, size, first_stored, last_referenced, verified_at, pack_id,
    counted_in, part_count FROM blobs;
DROP TABLE blobs;
CREATE TABLE blobs (
    id              INTEGER PRIMARY KEY,
    digest          BLOB    NOT NULL CHECK (length(digest) = 32),
    ext             TEXT    NOT NULL,
    size            INTEGER NOT NULL CHECK (size >= 0),
    first_stored    INTEGER NOT NULL,
    last_referenced INTEGER NOT NULL,
    verified_at     INTEGER,
    pack_id         INTEGER REFERENCES packs (id),
    counted_in      INTEGER,
    part_count      INTEGER NOT NULL DEFAULT 0,
    UNIQUE (digest, ext)
);
INSERT INTO blobs (id, digest, ext, size, first_stored, last_referenced, verified_at, pack_id, counted_in, part_count)
    SELECT id, digest, ext, size, first_stored, last_referenced, verified_at, pack_id, counted_in, part_count
    FROM blobs_copy ORDER BY id;
DROP TABLE blobs_copy;

CREATE INDEX blobs_pack ON blobs (pack_id) WHERE pack_id IS NOT NULL;

-- +goose StatementBegin
CREATE TRIGGER blobs_count_insert AFTER INSERT ON blobs WHEN NEW.counted_in IS NOT NULL BEGIN
    UPDATE counts SET blobs = blobs + 1, stored = stored + NEW.size,
        packed_blobs = packed_blobs + (CASE WHEN NEW.pack_id IS NULL THEN 0 ELSE 1 END),
        packed = packed + (CASE WHEN NEW.pack_id IS NULL THEN 0 ELSE NEW.size END)
        WHERE id = NEW.counted_in;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER blobs_unused_insert AFTER INSERT ON blobs WHEN NEW.counted_in IS NULL BEGIN
    UPDATE unused_blobs SET blobs = blobs + 1, bytes = bytes + NEW.size WHERE id = 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER blobs_count_delete AFTER DELETE ON blobs BEGIN
    UPDATE unused_blobs SET blobs = blobs - 1, bytes = bytes - OLD.size WHERE id = 1 AND OLD.counted_in IS NULL;
    UPDATE counts SET blobs = blobs - 1, stored = stored - OLD.size,
        packed_blobs = packed_blobs - (CASE WHEN OLD.pack_id IS NULL THEN 0 ELSE 1 END),
        packed = packed - (CASE WHEN OLD.pack_id IS NULL THEN 0 ELSE OLD.size END)
        WHERE id = OLD.counted_in;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER blobs_count_update AFTER UPDATE OF size, pack_id, counted_in ON blobs BEGIN
    UPDATE unused_blobs SET blobs = blobs - 1, bytes = bytes - OLD.size WHERE id = 1 AND OLD.counted_in IS NULL;
    UPDATE unused_blobs SET blobs = blobs + 1, bytes = bytes + NEW.size WHERE id = 1 AND NEW.counted_in IS NULL;
    UPDATE counts SET blobs = blobs - 1, stored = stored - OLD.size,
        packed_blobs = packed_blobs - (CASE WHEN OLD.pack_id IS NULL THEN 0 ELSE 1 END),
        packed = packed - (CASE WHEN OLD.pack_id IS NULL THEN 0 ELSE OLD.size END)
        WHERE id = OLD.counted_in;
    UPDATE counts SET blobs = blobs + 1, stored = stored + NEW.size,
        packed_blobs = packed_blobs + (CASE WHEN NEW.pack_id IS NULL THEN 0 ELSE 1 END),
        packed = packed + (CASE WHEN NEW.pack_id IS NULL THEN 0 ELSE NEW.size END)
        WHERE id = NEW.counted_in;
END;
-- +goose StatementEnd

COMMIT;
PRAGMA foreign_keys = ON;
