-- PostgreSQL twin of ../00005_fewer_indexes.sql: the write path no longer
-- pays for the indexes by tool and by creation time, which only listings a
-- person asks for used.

-- +goose Up
DROP INDEX IF EXISTS parts_tool;
DROP INDEX IF EXISTS parts_created;

-- +goose Down
CREATE INDEX parts_created ON parts (created_at);
CREATE INDEX parts_tool ON parts (tool, created_at);
