-- Pack files: blobs moved out of their own files into zstd packs once cold.
-- A blob whose pack_id is set is held by that pack; its loose file may
-- still exist for a while, or be written again by a later identical write.

-- +goose Up
CREATE TABLE packs (
    id         INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL UNIQUE,  -- pack-<digest>.zst
    size       INTEGER NOT NULL,         -- bytes on disk
    raw        INTEGER NOT NULL,         -- bytes of the blobs it holds
    blobs      INTEGER NOT NULL,         -- blobs it holds
    created_at INTEGER NOT NULL
);
ALTER TABLE blobs ADD COLUMN pack_id INTEGER REFERENCES packs (id);
-- The blobs of one pack, for gc's rewrite; only packed blobs are indexed.
CREATE INDEX blobs_pack ON blobs (pack_id) WHERE pack_id IS NOT NULL;

-- +goose Down
DROP INDEX blobs_pack;
ALTER TABLE blobs DROP COLUMN pack_id;
DROP TABLE packs;
