-- When verify last re-hashed each blob and found it whole. NULL: never
-- verified. The twin of ../00002_verified_at.sql.

-- +goose Up
ALTER TABLE blobs ADD COLUMN verified_at BIGINT;

-- +goose Down
ALTER TABLE blobs DROP COLUMN verified_at;
