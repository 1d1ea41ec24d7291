-- Kept counters, so that stats reads a few rows instead of every part.
--
-- counts has a row per (run, tool): its parts and their logical bytes, and
-- the blobs in use that the group is charged with (blobs, stored, and the
-- packed share of them). Each blob row names the counts row it is charged
-- to (counted_in): a group one of whose parts uses it, the first to use it
-- until that group stops, then another; NULL while no part uses it. So
-- the groups' blobs add up to the distinct blobs in use. blob_totals counts
-- every blob row, used or not. Triggers keep all of it in the transaction
-- that changes the rows, whichever statement changes them, so the
-- counters are exactly as durable as the rows; writers of different runs
-- touch different counts rows.

-- +goose Up
CREATE TABLE counts (
    id           INTEGER PRIMARY KEY,
    run_id       INTEGER NOT NULL,
    tool         TEXT    NOT NULL,
    parts        INTEGER NOT NULL DEFAULT 0,
    logical      INTEGER NOT NULL DEFAULT 0,
    blobs        INTEGER NOT NULL DEFAULT 0,
    stored       INTEGER NOT NULL DEFAULT 0,
    packed_blobs INTEGER NOT NULL DEFAULT 0,
    packed       INTEGER NOT NULL DEFAULT 0,
    UNIQUE (run_id, tool)
);

CREATE TABLE blob_totals (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    blobs INTEGER NOT NULL,
    bytes INTEGER NOT NULL
);

ALTER TABLE blobs ADD COLUMN counted_in INTEGER;  -- a counts row id

INSERT INTO counts (run_id, tool, parts, logical)
    SELECT run_id, tool, count(*), sum(bytes) FROM parts GROUP BY run_id, tool ORDER BY run_id, tool;

UPDATE blobs SET counted_in = (SELECT c.id FROM parts p JOIN counts c ON c.run_id = p.run_id AND c.tool = p.tool
    WHERE p.blob_id = blobs.id ORDER BY p.id LIMIT 1);

UPDATE counts SET blobs = a.n, stored = a.bytes, packed_blobs = a.pn, packed = a.pbytes
    FROM (SELECT counted_in, count(*) AS n, sum(size) AS bytes,
            sum(CASE WHEN pack_id IS NULL THEN 0 ELSE 1 END) AS pn,
            sum(CASE WHEN pack_id IS NULL THEN 0 ELSE size END) AS pbytes
          FROM blobs WHERE counted_in IS NOT NULL GROUP BY counted_in) AS a
    WHERE a.counted_in = counts.id;

INSERT INTO blob_totals (id, blobs, bytes) SELECT 1, count(*), coalesce(sum(size), 0) FROM blobs;

-- +goose StatementBegin
CREATE TRIGGER parts_count_insert AFTER INSERT ON parts BEGIN
    INSERT INTO counts (run_id, tool, parts, logical) VALUES (NEW.run_id, NEW.tool, 1, NEW.bytes)
        ON CONFLICT (run_id, tool) DO UPDATE SET parts = parts + 1, logical = logical + excluded.logical;
    UPDATE blobs SET counted_in = (SELECT id FROM counts WHERE run_id = NEW.run_id AND tool = NEW.tool)
        WHERE id = NEW.blob_id AND counted_in IS NULL;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER parts_count_delete AFTER DELETE ON parts BEGIN
    UPDATE counts SET parts = parts - 1, logical = logical - OLD.bytes WHERE run_id = OLD.run_id AND tool = OLD.tool;
    UPDATE blobs SET counted_in = (SELECT c.id FROM parts p JOIN counts c ON c.run_id = p.run_id AND c.tool = p.tool
            WHERE p.blob_id = OLD.blob_id LIMIT 1)
        WHERE id = OLD.blob_id AND counted_in = (SELECT id FROM counts WHERE run_id = OLD.run_id AND tool = OLD.tool)
        AND NOT EXISTS (SELECT 1 FROM parts WHERE blob_id = OLD.blob_id AND run_id = OLD.run_id AND tool = OLD.tool);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER parts_count_update AFTER UPDATE OF run_id, tool, bytes, blob_id ON parts BEGIN
    UPDATE counts SET parts = parts - 1, logical = logical - OLD.bytes WHERE run_id = OLD.run_id AND tool = OLD.tool;
    INSERT INTO counts (run_id, tool, parts, logical) VALUES (NEW.run_id, NEW.tool, 1, NEW.bytes)
        ON CONFLICT (run_id, tool) DO UPDATE SET parts = parts + 1, logical = logical + excluded.logical;
    UPDATE blobs SET counted_in = (SELECT c.id FROM parts p JOIN counts c ON c.run_id = p.run_id AND c.tool = p.tool
            WHERE p.blob_id = OLD.blob_id LIMIT 1)
        WHERE id = OLD.blob_id AND counted_in = (SELECT id FROM counts WHERE run_id = OLD.run_id AND tool = OLD.tool)
        AND NOT EXISTS (SELECT 1 FROM parts WHERE blob_id = OLD.blob_id AND run_id = OLD.run_id AND tool = OLD.tool);
    UPDATE blobs SET counted_in = (SELECT id FROM counts WHERE run_id = NEW.run_id AND tool = NEW.tool)
        WHERE id = NEW.blob_id AND counted_in IS NULL;
END;
-- +goose StatementEnd

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

-- +goose Down
DROP TRIGGER blobs_count_update;
DROP TRIGGER blobs_count_delete;
DROP TRIGGER blobs_count_insert;
DROP TRIGGER parts_count_update;
DROP TRIGGER parts_count_delete;
DROP TRIGGER parts_count_insert;
ALTER TABLE blobs DROP COLUMN counted_in;
DROP TABLE blob_totals;
DROP TABLE counts;
