-- The PostgreSQL form of migrations/00010_narrow_digest_index.sql: the
-- unique constraint on (digest, ext) gives way to an index of the first 8
-- bytes of the digest, which every lookup by digest names. Writers keep a
-- (digest, ext) to one row: they look for it and insert it in one
-- statement, holding the writers' advisory lock.

-- +goose Up
ALTER TABLE blobs DROP CONSTRAINT blobs_digest_ext;
CREATE INDEX blobs_digest ON blobs (substr(digest, 1, 8));

-- +goose Down
DROP INDEX blobs_digest;
ALTER TABLE blobs ADD CONSTRAINT blobs_digest_ext UNIQUE (digest, ext);
