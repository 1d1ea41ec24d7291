-- The PostgreSQL form of migrations/00012_retention.sql: the same tables
-- and meaning.

-- +goose Up
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE removals (
    id         BIGSERIAL PRIMARY KEY,
    at         BIGINT NOT NULL,
    run        TEXT   NOT NULL,
    rule       TEXT   NOT NULL,
    parts      BIGINT NOT NULL,
    first_at   BIGINT,
    last_at    BIGINT
);

-- +goose Down
DROP TABLE removals;
DROP TABLE settings;
