-- The PostgreSQL form of migrations/00014_run_ttl.sql: the same column and
-- meaning.

-- +goose Up
ALTER TABLE runs ADD COLUMN ttl BIGINT;
-- The runs that have one, which a write's look at the policy reads each second.
CREATE INDEX runs_ttl ON runs (name) WHERE ttl IS NOT NULL;

-- +goose Down
DROP INDEX runs_ttl;
ALTER TABLE runs DROP COLUMN ttl;
