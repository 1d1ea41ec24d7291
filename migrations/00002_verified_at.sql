-- When verify last re-hashed each blob and found it whole, so that casctl show
-- can say so. NULL: never verified.

-- +goose Up
ALTER TABLE blobs ADD COLUMN verified_at INTEGER;

-- +goose Down
ALTER TABLE blobs DROP COLUMN verified_at;
