-- The index of a toolcas store: every blob file, and every logical key
-- (run, step, tool, call, part, version) that points at one.
-- Times are Unix nanoseconds.

-- +goose Up
CREATE TABLE blobs (
    id              INTEGER PRIMARY KEY,
    digest          BLOB    NOT NULL CHECK (length(digest) = 32),
    ext             TEXT    NOT NULL,
    size            INTEGER NOT NULL CHECK (size >= 0),
    first_stored    INTEGER NOT NULL,
    last_referenced INTEGER NOT NULL,
    UNIQUE (digest, ext)
);

CREATE TABLE parts (
    id         INTEGER PRIMARY KEY,
    key        TEXT    NOT NULL,
    run        TEXT    NOT NULL,
    step       INTEGER NOT NULL,
    tool       TEXT    NOT NULL,
    call_id    TEXT    NOT NULL,
    part       INTEGER NOT NULL,  -- position in the result; -1 when it has one part
    version    INTEGER NOT NULL CHECK (version >= 1),
    kind       TEXT    NOT NULL CHECK (kind IN ('text', 'image', 'file')),
    mime       TEXT    NOT NULL,
    filename   TEXT    NOT NULL,
    chars      INTEGER NOT NULL,  -- Unicode code points of a text part, else 0
    bytes      INTEGER NOT NULL,
    blob_id    INTEGER NOT NULL REFERENCES blobs (id),
    created_at INTEGER NOT NULL,
    UNIQUE (key, version)
);

-- Which parts use a blob (gc's anti-join, "same content as" within a run).
CREATE INDEX parts_blob ON parts (blob_id, run);
-- A run's parts, newest first; the runs and their ages.
CREATE INDEX parts_run ON parts (run, created_at);
-- Everything newest first, and pruning by age.
CREATE INDEX parts_created ON parts (created_at);
-- Listing by tool.
CREATE INDEX parts_tool ON parts (tool, created_at);

-- +goose Down
DROP TABLE parts;
DROP TABLE blobs;
