-- Kept counters, so that stats reads a few rows instead of every part: the
-- PostgreSQL form of migrations/00006_counts.sql (same tables, columns and
-- meaning; the triggers call PL/pgSQL functions). An AFTER ROW trigger
-- runs once the statement has changed every row, so the NOT EXISTS checks
-- see the statement's result, and each update is written to run more than
-- once without counting twice.

-- +goose Up
CREATE TABLE counts (
    id           BIGSERIAL PRIMARY KEY,
    run_id       BIGINT NOT NULL,
    tool         TEXT   NOT NULL,
    parts        BIGINT NOT NULL DEFAULT 0,
    logical      BIGINT NOT NULL DEFAULT 0,
    blobs        BIGINT NOT NULL DEFAULT 0,
    stored       BIGINT NOT NULL DEFAULT 0,
    packed_blobs BIGINT NOT NULL DEFAULT 0,
    packed       BIGINT NOT NULL DEFAULT 0,
    UNIQUE (run_id, tool)
);

CREATE TABLE blob_totals (
    id    BIGINT PRIMARY KEY CHECK (id = 1),
    blobs BIGINT NOT NULL,
    bytes BIGINT NOT NULL
);

ALTER TABLE blobs ADD COLUMN counted_in BIGINT;  -- a counts row id

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
CREATE FUNCTION counts_blob_moved(in_counts BIGINT, in_sign BIGINT, in_size BIGINT, in_pack BOOLEAN) RETURNS void AS $$
BEGIN
    IF in_counts IS NULL THEN
        RETURN;
    END IF;
    UPDATE counts SET blobs = blobs + in_sign, stored = stored + in_sign * in_size,
        packed_blobs = packed_blobs + (CASE WHEN in_pack THEN in_sign ELSE 0 END),
        packed = packed + (CASE WHEN in_pack THEN in_sign * in_size ELSE 0 END)
        WHERE id = in_counts;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION parts_count() RETURNS trigger AS $$
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

-- +goose StatementBegin
CREATE FUNCTION blobs_count() RETURNS trigger AS $$
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

CREATE TRIGGER parts_count_insert AFTER INSERT ON parts FOR EACH ROW EXECUTE FUNCTION parts_count();
CREATE TRIGGER parts_count_delete AFTER DELETE ON parts FOR EACH ROW EXECUTE FUNCTION parts_count();
CREATE TRIGGER parts_count_update AFTER UPDATE OF run_id, tool, bytes, blob_id ON parts FOR EACH ROW EXECUTE FUNCTION parts_count();
CREATE TRIGGER blobs_count_insert AFTER INSERT ON blobs FOR EACH ROW EXECUTE FUNCTION blobs_count();
CREATE TRIGGER blobs_count_delete AFTER DELETE ON blobs FOR EACH ROW EXECUTE FUNCTION blobs_count();
CREATE TRIGGER blobs_count_update AFTER UPDATE OF size, pack_id, counted_in ON blobs FOR EACH ROW EXECUTE FUNCTION blobs_count();

-- +goose Down
DROP TRIGGER blobs_count_update ON blobs;
DROP TRIGGER blobs_count_delete ON blobs;
DROP TRIGGER blobs_count_insert ON blobs;
DROP TRIGGER parts_count_update ON parts;
DROP TRIGGER parts_count_delete ON parts;
DROP TRIGGER parts_count_insert ON parts;
DROP FUNCTION blobs_count();
DROP FUNCTION parts_count();
DROP FUNCTION counts_blob_moved(BIGINT, BIGINT, BIGINT, BOOLEAN);
DROP FUNCTION counts_part_removed(BIGINT, TEXT, BIGINT, BIGINT);
DROP FUNCTION counts_part_added(BIGINT, TEXT, BIGINT, BIGINT);
ALTER TABLE blobs DROP COLUMN counted_in;
DROP TABLE blob_totals;
DROP TABLE counts;
