-- Each blob row keeps how many parts use it (part_count), so that show
-- reads a blob's count from its row instead of counting its entries in
-- parts_blob: a blob that fifty thousand parts share is shown as fast as
-- any. Triggers on parts keep it in the transaction that changes the
-- rows, like the counters of 00006. Every part recorded already writes its
-- blob's row (inserted, or its last_referenced refreshed), so the count
-- changes a page the step changes anyway.

-- +goose Up
ALTER TABLE blobs ADD COLUMN part_count INTEGER NOT NULL DEFAULT 0;

UPDATE blobs SET part_count = g.n
    FROM (SELECT blob_id, count(*) AS n FROM parts GROUP BY blob_id) AS g
    WHERE g.blob_id = blobs.id;

-- +goose StatementBegin
CREATE TRIGGER parts_blob_count_insert AFTER INSERT ON parts BEGIN
    UPDATE blobs SET part_count = part_count + 1 WHERE id = NEW.blob_id;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER parts_blob_count_delete AFTER DELETE ON parts BEGIN
    UPDATE blobs SET part_count = part_count - 1 WHERE id = OLD.blob_id;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER parts_blob_count_update AFTER UPDATE OF blob_id ON parts WHEN OLD.blob_id <> NEW.blob_id BEGIN
    UPDATE blobs SET part_count = part_count - 1 WHERE id = OLD.blob_id;
    UPDATE blobs SET part_count = part_count + 1 WHERE id = NEW.blob_id;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER parts_blob_count_update;
DROP TRIGGER parts_blob_count_delete;
DROP TRIGGER parts_blob_count_insert;
ALTER TABLE blobs DROP COLUMN part_count;
