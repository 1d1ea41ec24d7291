-- gc's sweep fence: the PostgreSQL form of migrations/00007_sweep_fence.sql
-- (same table, column and meaning).

-- +goose Up
CREATE TABLE sweep_fence (
    id       BIGINT PRIMARY KEY CHECK (id = 1),
    until_us BIGINT NOT NULL
);

-- +goose Down
DROP TABLE sweep_fence;
