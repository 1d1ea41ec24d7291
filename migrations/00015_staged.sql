-- Steps staged by a store without syncs (see index.RecordQueued): the
-- committer of a process that writes without syncs commits its batches
-- here, a row for each run of a batch holding the run's steps encoded,
-- instead of running a part's statements on the writer's pace. The first read or
-- write of the index by any process that may write folds them into
-- parts, blobs and runs (in order, as they would have been recorded), in
-- the transaction that removes them: a staged step is committed, and no
-- read sees the index without it.

-- +goose Up
CREATE TABLE staged (
    id    INTEGER PRIMARY KEY,
    run   TEXT    NOT NULL,  -- the run of every part of the row
    at    INTEGER NOT NULL,  -- its first step's time stamp, Unix nanoseconds
    parts BLOB    NOT NULL   -- see index.encodeStaged
);
-- Whether a run has steps staged, which a writer asks before it reads the
-- run's rows.
CREATE INDEX staged_run ON staged (run);

-- +goose Down
DROP INDEX staged_run;
DROP TABLE staged;
