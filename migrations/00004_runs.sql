-- Runs stored once: each part names its run by a small id instead of
-- repeating the run's name in its row and in two indexes, and its key
-- without the first element (the run, as keys render it), which the runs
-- row holds. A run whose keys were rendered two ways (an older build's
-- escaping) has a row for each way.

-- +goose Up
CREATE TABLE runs (
    id     INTEGER PRIMARY KEY,
    name   TEXT NOT NULL,
    prefix TEXT NOT NULL,  -- the keys' first element and its '/'; '' for a key without one
    UNIQUE (name, prefix)
);

INSERT INTO runs (name, prefix)
    SELECT DISTINCT run, substr(key, 1, instr(key, '/')) FROM parts ORDER BY 1, 2;

CREATE TABLE parts_by_run (
    id         INTEGER PRIMARY KEY,
    run_id     INTEGER NOT NULL REFERENCES runs (id),
    key        TEXT    NOT NULL,  -- the key after its run's prefix
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
    UNIQUE (key, run_id, version)
);

INSERT INTO parts_by_run (id, run_id, key, step, tool, call_id, part, version, kind, mime, filename, chars, bytes, blob_id, created_at)
    SELECT p.id, r.id, substr(p.key, length(r.prefix) + 1), p.step, p.tool, p.call_id, p.part, p.version, p.kind,
        p.mime, p.filename, p.chars, p.bytes, p.blob_id, p.created_at
    FROM parts p JOIN runs r ON r.name = p.run AND r.prefix = substr(p.key, 1, instr(p.key, '/'));

DROP TABLE parts;
ALTER TABLE parts_by_run RENAME TO parts;

-- Which parts use a blob (gc's anti-join, "same content as" within a run).
CREATE INDEX parts_blob ON parts (blob_id, run_id);
-- A run's parts, newest first; the runs and their ages.
CREATE INDEX parts_run ON parts (run_id, created_at);
-- Everything newest first, and pruning by age.
CREATE INDEX parts_created ON parts (created_at);
-- Listing by tool.
CREATE INDEX parts_tool ON parts (tool, created_at);

-- +goose Down
CREATE TABLE parts_by_name (
    id         INTEGER PRIMARY KEY,
    key        TEXT    NOT NULL,
    run        TEXT    NOT NULL,
    step       INTEGER NOT NULL,
    tool       TEXT    NOT NULL,
    call_id    TEXT    NOT NULL,
    part       INTEGER NOT NULL,
    version    INTEGER NOT NULL CHECK (version >= 1),
    kind       TEXT    NOT NULL CHECK (kind IN ('text', 'image', 'file')),
    mime       TEXT    NOT NULL,
    filename   TEXT    NOT NULL,
    chars      INTEGER NOT NULL,
    bytes      INTEGER NOT NULL,
    blob_id    INTEGER NOT NULL REFERENCES blobs (id),
    created_at INTEGER NOT NULL,
    UNIQUE (key, version)
);
INSERT INTO parts_by_name (id, key, run, step, tool, call_id, part, version, kind, mime, filename, chars, bytes, blob_id, created_at)
    SELECT p.id, r.prefix || p.key, r.name, p.step, p.tool, p.call_id, p.part, p.version, p.kind,
        p.mime, p.filename, p.chars, p.bytes, p.blob_id, p.created_at
    FROM parts p JOIN runs r ON r.id = p.run_id;
DROP TABLE parts;
ALTER TABLE parts_by_name RENAME TO parts;
DROP TABLE runs;
CREATE INDEX parts_blob ON parts (blob_id, run);
CREATE INDEX parts_run ON parts (run, created_at);
CREATE INDEX parts_created ON parts (created_at);
CREATE INDEX parts_tool ON parts (tool, created_at);
