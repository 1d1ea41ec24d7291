-- A run's own retention: how long the store keeps the run after its last
-- write (nanoseconds), as the writer gave it; NULL for a run that gave none,
-- which only the store's policy removes. The retention rule "ttl" removes
-- every part of a run once its newest part is older than its ttl (never
-- while the run is within the policy's active window).

-- +goose Up
ALTER TABLE runs ADD COLUMN ttl INTEGER;
-- The runs that have one, which a write's look at the policy reads each second.
CREATE INDEX runs_ttl ON runs (name) WHERE ttl IS NOT NULL;

-- +goose Down
DROP INDEX runs_ttl;
ALTER TABLE runs DROP COLUMN ttl;
