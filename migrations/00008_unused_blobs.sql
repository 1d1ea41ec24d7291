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
--
-- Each counts row also keeps when its group's oldest and newest parts were
-- recorded (first_at, last_at; NULL while it has none), so that stats reads
-- the groups' dates from their rows instead of reading parts by tool, which
-- no index serves. A part recorded widens its group's bounds in the upsert
-- the step runs anyway. A part removed at a bound has that bound looked up
-- again, through parts_run (run_id, created_at) walked in order from that
-- end; any other part removed leaves them as they are.

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

ALTER TABLE counts ADD COLUMN first_at INTEGER;
ALTER TABLE counts ADD COLUMN last_at INTEGER;

UPDATE counts SET first_at = g.f, last_at = g.l
    FROM (SELECT run_id, tool, min(created_at) AS f, max(created_at) AS l FROM parts GROUP BY run_id, tool) AS g
    WHERE g.run_id = counts.run_id AND g.tool = counts.tool;

DROP TRIGGER parts_count_insert;
DROP TRIGGER parts_count_delete;
DROP TRIGGER parts_count_update;

-- +goose StatementBegin
CREATE TRIGGER parts_count_insert AFTER INSERT ON parts BEGIN
    INSERT INTO counts (run_id, tool, parts, logical, first_at, last_at)
        VALUES (NEW.run_id, NEW.tool, 1, NEW.bytes, NEW.created_at, NEW.created_at)
        ON CONFLICT (run_id, tool) DO UPDATE SET parts = parts + 1, logical = logical + excluded.logical,
            first_at = min(coalesce(first_at, excluded.first_at), excluded.first_at),
            last_at = max(coalesce(last_at, excluded.last_at), excluded.last_at);
    UPDATE blobs SET counted_in = (SELECT id FROM counts WHERE run_id = NEW.run_id AND tool = NEW.tool)
        WHERE id = NEW.blob_id AND counted_in IS NULL;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER parts_count_delete AFTER DELETE ON parts BEGIN
    UPDATE counts SET parts = parts - 1, logical = logical - OLD.bytes,
        first_at = CASE WHEN parts = 1 THEN NULL WHEN first_at = OLD.created_at THEN
            (SELECT created_at FROM parts WHERE run_id = OLD.run_id AND tool = OLD.tool ORDER BY created_at LIMIT 1)
            ELSE first_at END,
        last_at = CASE WHEN parts = 1 THEN NULL WHEN last_at = OLD.created_at THEN
            (SELECT created_at FROM parts WHERE run_id = OLD.run_id AND tool = OLD.tool ORDER BY created_at DESC LIMIT 1)
            ELSE last_at END
        WHERE run_id = OLD.run_id AND tool = OLD.tool;
    UPDATE blobs SET counted_in = (SELECT c.id FROM parts p JOIN counts c ON c.run_id = p.run_id AND c.tool = p.tool
            WHERE p.blob_id = OLD.blob_id LIMIT 1)
        WHERE id = OLD.blob_id AND counted_in = (SELECT id FROM counts WHERE run_id = OLD.run_id AND tool = OLD.tool)
        AND NOT EXISTS (SELECT 1 FROM parts WHERE blob_id = OLD.blob_id AND run_id = OLD.run_id AND tool = OLD.tool);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER parts_count_update AFTER UPDATE OF run_id, tool, bytes, blob_id, created_at ON parts BEGIN
    UPDATE counts SET parts = parts - 1, logical = logical - OLD.bytes,
        first_at = CASE WHEN parts = 1 THEN NULL WHEN first_at = OLD.created_at THEN
            (SELECT created_at FROM parts WHERE run_id = OLD.run_id AND tool = OLD.tool ORDER BY created_at LIMIT 1)
            ELSE first_at END,
        last_at = CASE WHEN parts = 1 THEN NULL WHEN last_at = OLD.created_at THEN
            (SELECT created_at FROM parts WHERE run_id = OLD.run_id AND tool = OLD.tool ORDER BY created_at DESC LIMIT 1)
            ELSE last_at END
        WHERE run_id = OLD.run_id AND tool = OLD.tool;
    INSERT INTO counts (run_id, tool, parts, logical, first_at, last_at)
        VALUES (NEW.run_id, NEW.tool, 1, NEW.bytes, NEW.created_at, NEW.created_at)
        ON CONFLICT (run_id, tool) DO UPDATE SET parts = parts + 1, logical = logical + excluded.logical,
            first_at = min(coalesce(first_at, excluded.first_at), excluded.first_at),
            last_at = max(coalesce(last_at, excluded.last_at), excluded.last_at);
    UPDATE blobs SET counted_in = (SELECT c.id FROM parts p JOIN counts c ON c.run_id = p.run_id AND c.tool = p.tool
            WHERE p.blob_id = OLD.blob_id LIMIT 1)
        WHERE id = OLD.blob_id AND counted_in = (SELECT id FROM counts WHERE run_id = OLD.run_id AND tool = OLD.tool)
        AND NOT EXISTS (SELECT 1 FROM parts WHERE blob_id = OLD.blob_id AND run_id = OLD.run_id AND tool = OLD.tool);
    UPDATE blobs SET counted_in = (SELECT id FROM counts WHERE run_id = NEW.run_id AND tool = NEW.tool)
        WHERE id = NEW.blob_id AND counted_in IS NULL;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER parts_count_update;
DROP TRIGGER parts_count_delete;
DROP TRIGGER parts_count_insert;

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

ALTER TABLE counts DROP COLUMN last_at;
ALTER TABLE counts DROP COLUMN first_at;

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
