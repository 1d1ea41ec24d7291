-- Retention: the store's own policy of what it keeps, and the log of what
-- that policy (or a prune) removed.
--
-- settings holds named values that every process of the store must see
-- alike; "retention" is the policy, as JSON (see store.Retention). It lives
-- in the index, not in the marker file, so that a store whose index is
-- shared has one policy for every machine.
--
-- removals has a row per run and prune that removed parts of it: when, the
-- rule that removed them ("max_age", "keep_runs", "max_bytes", or "prune"
-- for a prune asked for by name), how many parts and the span of their
-- creation times. Nothing reads it but people: ls --removed and stats.

-- +goose Up
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE removals (
    id         INTEGER PRIMARY KEY,
    at         INTEGER NOT NULL,
    run        TEXT    NOT NULL,
    rule       TEXT    NOT NULL,
    parts      INTEGER NOT NULL,
    first_at   INTEGER,
    last_at    INTEGER
);

-- +goose Down
DROP TABLE removals;
DROP TABLE settings;
