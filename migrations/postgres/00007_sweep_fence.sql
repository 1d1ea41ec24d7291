-- gc's sweep fence: the PostgreSQL form of migrations/00007_sweep_fence.sql
-- (same table, column and meaning), and the function a writer takes its
-- blob lease with.

-- +goose Up
CREATE TABLE sweep_fence (
    id       BIGINT PRIMARY KEY CHECK (id = 1),
    until_us BIGINT NOT NULL
);

-- blob_lease takes the sweep lock shared (waiting while gc holds it) and
-- then returns the session's pid and how many microseconds, by the
-- server's clock, a sweep fence is still in force (0 or less: none), in
-- one round trip. A VOLATILE function takes a fresh snapshot for each
-- statement, so the fence is read as committed once the lock is granted;
-- a single statement would read it as it was before the lock's wait.
-- +goose StatementBegin
CREATE FUNCTION blob_lease(lock_key BIGINT, OUT pid INTEGER, OUT fence_us BIGINT) AS $$
BEGIN
    PERFORM pg_advisory_lock_shared(lock_key);
    SELECT pg_backend_pid(),
           COALESCE((SELECT until_us FROM sweep_fence WHERE id = 1), 0)
               - (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
      INTO pid, fence_us;
END;
$$ LANGUAGE plpgsql VOLATILE;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION blob_lease(BIGINT);
DROP TABLE sweep_fence;
