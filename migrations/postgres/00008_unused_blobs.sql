-- The unused blobs' counter instead of every blob's: the PostgreSQL form
-- of migrations/00008_unused_blobs.sql (same table, columns and meaning),
-- with each group's dates in its counts row. A trigger of a statement runs
-- once the statement has changed every row, so a bound looked up again sees
-- the statement's result, and a later trigger of the same statement finds
-- the bound already moved past its part and looks nothing up.

-- +goose Up
CREATE TABLE unused_blobs (
    id    BIGINT PRIMARY KEY CHECK (id = 1),
    blobs BIGINT NOT NULL,
    bytes BIGINT NOT NULL
);

INSERT INTO unused_blobs (id, blobs, bytes)
    SELECT 1, count(*), coalesce(sum(size), 0) FROM blobs WHERE counted_in IS NULL;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION blobs_count() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.counted_in IS NULL THEN
            UPDATE unused_blobs SET blobs = blobs + 1, bytes = bytes + NEW.size WHERE id = 1;
        END IF;
        PERFORM counts_blob_moved(NEW.counted_in, 1, NEW.size, NEW.pack_id IS NOT NULL);
        RETURN NEW;
    ELSIF TG_OP = 'DELETE' THEN
        IF OLD.counted_in IS NULL THEN
            UPDATE unused_blobs SET blobs = blobs - 1, bytes = bytes - OLD.size WHERE id = 1;
        END IF;
        PERFORM counts_blob_moved(OLD.counted_in, -1, OLD.size, OLD.pack_id IS NOT NULL);
        RETURN OLD;
    END IF;
    IF OLD.counted_in IS NULL THEN
        UPDATE unused_blobs SET blobs = blobs - 1, bytes = bytes - OLD.size WHERE id = 1;
    END IF;
    IF NEW.counted_in IS NULL THEN
        UPDATE unused_blobs SET blobs = blobs + 1, bytes = bytes + NEW.size WHERE id = 1;
    END IF;
    PERFORM counts_blob_moved(OLD.counted_in, -1, OLD.size, OLD.pack_id IS NOT NULL);
    PERFORM counts_blob_moved(NEW.counted_in, 1, NEW.size, NEW.pack_id IS NOT NULL);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

DROP TABLE blob_totals;

ALTER TABLE counts ADD COLUMN first_at BIGINT;
ALTER TABLE counts ADD COLUMN last_at BIGINT;

UPDATE counts SET first_at = g.f, last_at = g.l
    FROM (SELECT run_id, tool, min(created_at) AS f, max(created_at) AS l FROM parts GROUP BY run_id, tool) AS g
    WHERE g.run_id = counts.run_id AND g.tool = counts.tool;

-- +goose StatementBegin
CREATE FUNCTION counts_part_added(r BIGINT, t TEXT, n BIGINT, b BIGINT, ts BIGINT) RETURNS void AS $$
BEGIN
    INSERT INTO counts (run_id, tool, parts, logical, first_at, last_at) VALUES (r, t, 1, n, ts, ts)
        ON CONFLICT (run_id, tool) DO UPDATE SET parts = counts.parts + 1, logical = counts.logical + excluded.logical,
            first_at = LEAST(counts.first_at, excluded.first_at), last_at = GREATEST(counts.last_at, excluded.last_at);
    UPDATE blobs SET counted_in = (SELECT id FROM counts WHERE run_id = r AND tool = t)
        WHERE id = b AND counted_in IS NULL;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION counts_part_removed(r BIGINT, t TEXT, n BIGINT, b BIGINT, ts BIGINT) RETURNS void AS $$
BEGIN
    UPDATE counts SET parts = parts - 1, logical = logical - n,
        first_at = CASE WHEN parts = 1 THEN NULL WHEN first_at = ts THEN
            (SELECT p.created_at FROM parts p WHERE p.run_id = r AND p.tool = t ORDER BY p.created_at LIMIT 1)
            ELSE first_at END,
        last_at = CASE WHEN parts = 1 THEN NULL WHEN last_at = ts THEN
            (SELECT p.created_at FROM parts p WHERE p.run_id = r AND p.tool = t ORDER BY p.created_at DESC LIMIT 1)
            ELSE last_at END
        WHERE run_id = r AND tool = t;
    UPDATE blobs SET counted_in = (SELECT c.id FROM parts p JOIN counts c ON c.run_id = p.run_id AND c.tool = p.tool
            WHERE p.blob_id = b LIMIT 1)
        WHERE id = b AND counted_in = (SELECT id FROM counts WHERE run_id = r AND tool = t)
        AND NOT EXISTS (SELECT 1 FROM parts WHERE blob_id = b AND run_id = r AND tool = t);
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION parts_count() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM counts_part_added(NEW.run_id, NEW.tool, NEW.bytes, NEW.blob_id, NEW.created_at);
        RETURN NEW;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM counts_part_removed(OLD.run_id, OLD.tool, OLD.bytes, OLD.blob_id, OLD.created_at);
        RETURN OLD;
    END IF;
    PERFORM counts_part_removed(OLD.run_id, OLD.tool, OLD.bytes, OLD.blob_id, OLD.created_at);
    PERFORM counts_part_added(NEW.run_id, NEW.tool, NEW.bytes, NEW.blob_id, NEW.created_at);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

DROP FUNCTION counts_part_removed(BIGINT, TEXT, BIGINT, BIGINT);
DROP FUNCTION counts_part_added(BIGINT, TEXT, BIGINT, BIGINT);

DROP TRIGGER parts_count_update ON parts;
CREATE TRIGGER parts_count_update AFTER UPDATE OF run_id, tool, bytes, blob_id, created_at ON parts
    FOR EACH ROW EXECUTE FUNCTION parts_count();

-- +goose Down
DROP TRIGGER parts_count_update ON parts;
CREATE TRIGGER parts_count_update AFTER UPDATE OF run_id, tool, bytes, blob_id ON parts
    FOR EACH ROW EXECUTE FUNCTION parts_count();

-- +goose StatementBegin
CREATE FUNCTION counts_part_added(r BIGINT, t TEXT, n BIGINT, b BIGINT) RETURNS void AS $$
BEGIN
    INSERT INTO counts (run_id, tool, parts, logical) VALUES (r, t, 1, n)
        ON CONFLICT (run_id, tool) DO UPDATE SET parts = counts.parts + 1, logical = counts.logical + excluded.logical;
    UPDATE blobs SET counted_in = (SELECT id FROM counts WHERE run_id = r AND tool = t)
        WHERE id = b AND counted_in IS NULL;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION counts_part_removed(r BIGINT, t TEXT, n BIGINT, b BIGINT) RETURNS void AS $$
BEGIN
    UPDATE counts SET parts = parts - 1, logical = logical - n WHERE run_id = r AND tool = t;
    UPDATE blobs SET counted_in = (SELECT c.id FROM parts p JOIN counts c ON c.run_id = p.run_id AND c.tool = p.tool
            WHERE p.blob_id = b LIMIT 1)
        WHERE id = b AND counted_in = (SELECT id FROM counts WHERE run_id = r AND tool = t)
        AND NOT EXISTS (SELECT 1 FROM parts WHERE blob_id = b AND run_id = r AND tool = t);
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION parts_count() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM counts_part_added(NEW.run_id, NEW.tool, NEW.bytes, NEW.blob_id);
        RETURN NEW;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM counts_part_removed(OLD.run_id, OLD.tool, OLD.bytes, OLD.blob_id);
        RETURN OLD;
    END IF;
    PERFORM counts_part_removed(OLD.run_id, OLD.tool, OLD.bytes, OLD.blob_id);
    PERFORM counts_part_added(NEW.run_id, NEW.tool, NEW.bytes, NEW.blob_id);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

DROP FUNCTION counts_part_removed(BIGINT, TEXT, BIGINT, BIGINT, BIGINT);
DROP FUNCTION counts_part_added(BIGINT, TEXT, BIGINT, BIGINT, BIGINT);
ALTER TABLE counts DROP COLUMN last_at;
ALTER TABLE counts DROP COLUMN first_at;

CREATE TABLE blob_totals (
    id    BIGINT PRIMARY KEY CHECK (id = 1),
    blobs BIGINT NOT NULL,
    bytes BIGINT NOT NULL
);
INSERT INTO blob_totals (id, blobs, bytes) SELECT 1, count(*), coalesce(sum(size), 0) FROM blobs;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION blobs_count() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE blob_totals SET blobs = blobs + 1, bytes = bytes + NEW.size WHERE id = 1;
        PERFORM counts_blob_moved(NEW.counted_in, 1, NEW.size, NEW.pack_id IS NOT NULL);
        RETURN NEW;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE blob_totals SET blobs = blobs - 1, bytes = bytes - OLD.size WHERE id = 1;
        PERFORM counts_blob_moved(OLD.counted_in, -1, OLD.size, OLD.pack_id IS NOT NULL);
        RETURN OLD;
    END IF;
    IF OLD.size <> NEW.size THEN
        UPDATE blob_totals SET bytes = bytes - OLD.size + NEW.size WHERE id = 1;
    END IF;
    PERFORM counts_blob_moved(OLD.counted_in, -1, OLD.size, OLD.pack_id IS NOT NULL);
    PERFORM counts_blob_moved(NEW.counted_in, 1, NEW.size, NEW.pack_id IS NOT NULL);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

DROP TABLE unused_blobs;
