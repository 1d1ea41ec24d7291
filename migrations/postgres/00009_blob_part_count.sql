-- Each blob row keeps how many parts use it: the PostgreSQL form of
-- migrations/00009_blob_part_count.sql (same column and meaning), kept by
-- a trigger function on parts.

-- +goose Up
ALTER TABLE blobs ADD COLUMN part_count BIGINT NOT NULL DEFAULT 0;

UPDATE blobs SET part_count = g.n
    FROM (SELECT blob_id, count(*) AS n FROM parts GROUP BY blob_id) AS g
    WHERE g.blob_id = blobs.id;

-- +goose StatementBegin
CREATE FUNCTION parts_blob_count() RETURNS trigger AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE blobs SET part_count = part_count - 1 WHERE id = OLD.blob_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        UPDATE blobs SET part_count = part_count + 1 WHERE id = NEW.blob_id;
        RETURN NEW;
    END IF;
    RETURN OLD;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

CREATE TRIGGER parts_blob_count_insert AFTER INSERT ON parts FOR EACH ROW EXECUTE FUNCTION parts_blob_count();
CREATE TRIGGER parts_blob_count_delete AFTER DELETE ON parts FOR EACH ROW EXECUTE FUNCTION parts_blob_count();
CREATE TRIGGER parts_blob_count_update AFTER UPDATE OF blob_id ON parts FOR EACH ROW
    WHEN (OLD.blob_id IS DISTINCT FROM NEW.blob_id) EXECUTE FUNCTION parts_blob_count();

-- +goose Down
DROP TRIGGER parts_blob_count_update ON parts;
DROP TRIGGER parts_blob_count_delete ON parts;
DROP TRIGGER parts_blob_count_insert ON parts;
DROP FUNCTION parts_blob_count();
ALTER TABLE blobs DROP COLUMN part_count;
