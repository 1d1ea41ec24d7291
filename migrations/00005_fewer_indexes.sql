-- Every index a write changes costs a page in the write-ahead log, synced
-- on every durable step. Two indexes of parts served only listings a person
-- asks for now and then (by tool; everything newest first and pruning by
-- age), which read the table instead; the write path pays for them no more.

-- +goose Up
DROP INDEX parts_tool;
DROP INDEX parts_created;

-- +goose Down
CREATE INDEX parts_created ON parts (created_at);
CREATE INDEX parts_tool ON parts (tool, created_at);
