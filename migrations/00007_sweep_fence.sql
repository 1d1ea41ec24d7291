-- gc's sweep fence, for a store whose blobs are in an object store shared
-- by many machines (see store/lease.go). In the transaction that deletes a
-- batch's rows, gc records until when, by the database server's clock, it
-- may still be deleting those objects; a writer that takes a blob lease
-- while the fence is in force (gc's sweep lock ended before gc did) waits
-- until it has passed. until_us is microseconds since the Unix epoch, 0
-- when no sweep is in progress. On SQLite, whose store locks gc with a
-- file, the table stays empty.

-- +goose Up
CREATE TABLE sweep_fence (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    until_us INTEGER NOT NULL
);

-- +goose Down
DROP TABLE sweep_fence;
