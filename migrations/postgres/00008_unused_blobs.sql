-- The unused blobs' counter instead of every blob's: the PostgreSQL form
-- of migrations/00008_unused_blobs.sql (same table, columns and meaning).

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

-- +goose Down
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
