-- Every page a write changes is appended to the write-ahead log and synced
-- on every durable step. blob_totals counted every blob row, so each new
-- blob changed its page besides the counts row of the part's group, which
-- the step changes anyway. unused_blobs counts instead only the blob rows
-- that no group is charged with (counted_in NULL): the blobs no part uses,
-- and for a moment the blob a part of a new group is about to use. A blob
-- recorded with its part is charged to the part's group as it is inserted
-- (Record names the group's counts row in the insert), so a step of a
-- group that has parts changes no counter but its counts row. The totals
-- are the groups' blobs plus the unused ones.

-- +goose Up
CREATE TABLE unused_blobs (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    blobs INTEGER NOT NULL,
    bytes INTEGER NOT NULL
);

INSERT INTO unused_blobs (id, blobs, bytes)
    SELECT 1, count(*), coalesce(sum(size), 0) FROM blobs WHERE counted_in IS NULL;

DROP TRIGGER blobs_count_insert;
DROP TRIGGER blobs_count_delete;
DROP TRIGGER blobs_count_update;
DROP TABLE blob_totals;

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

-- +goose Down
DROP TRIGGER blobs_count_update;
DROP TRIGGER blobs_count_delete;
DROP TRIGGER blobs_unused_insert;
DROP TRIGGER blobs_count_insert;
DROP TABLE unused_blobs;

CREATE TABLE blob_totals (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    blobs INTEGER NOT NULL,
    bytes INTEGER NOT NULL
);
INSERT INTO blob_totals (id, blobs, bytes) SELECT 1, count(*), coalesce(sum(size), 0) FROM blobs;

-- +goose StatementBegin
CREATE TRIGGER blobs_count_insert AFTER INSERT ON blobs BEGIN
    UPDATE blob_totals SET blobs = blobs + 1, bytes = bytes + NEW.size WHERE id = 1;
    UPDATE counts SET blobs = blobs + 1, stored = stored + NEW.size,
        packed_blobs = packed_blobs + (CASE WHEN NEW.pack_id IS NULL THEN 0 ELSE 1 END),
        packed = packed + (CASE WHEN NEW.pack_id IS NULL THEN 0 ELSE NEW.size END)
        WHERE id = NEW.counted_in;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER blobs_count_delete AFTER DELETE ON blobs BEGIN
    UPDATE blob_totals SET blobs = blobs - 1, bytes = bytes - OLD.size WHERE id = 1;
    UPDATE counts SET blobs = blobs - 1, stored = stored - OLD.size,
        packed_blobs = packed_blobs - (CASE WHEN OLD.pack_id IS NULL THEN 0 ELSE 1 END),
        packed = packed - (CASE WHEN OLD.pack_id IS NULL THEN 0 ELSE OLD.size END)
        WHERE id = OLD.counted_in;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER blobs_count_update AFTER UPDATE OF size, pack_id, counted_in ON blobs BEGIN
    UPDATE blob_totals SET bytes = bytes - OLD.size + NEW.size WHERE id = 1 AND OLD.size <> NEW.size;
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
