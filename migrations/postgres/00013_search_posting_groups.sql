-- The PostgreSQL form of migrations/00013_search_posting_groups.sql (same
-- tables, columns and meaning). low is 0 here already (see 00011); it is
-- set again all the same, as SQLite's is.

-- +goose Up
CREATE TABLE search_posting_groups (
    grp     BIGINT NOT NULL,
    segment BIGINT NOT NULL,
    data    BYTEA  NOT NULL,
    PRIMARY KEY (grp, segment)
);
DROP TABLE search_postings;
UPDATE blobs SET search_segment = NULL WHERE search_segment > 0;
DELETE FROM search_segments;
UPDATE search_state SET low = 0;

-- +goose Down
CREATE TABLE search_postings (
    trigram BIGINT NOT NULL,
    segment BIGINT NOT NULL,
    list    BYTEA  NOT NULL,
    PRIMARY KEY (trigram, segment)
);
DROP TABLE search_posting_groups;
UPDATE blobs SET search_segment = NULL WHERE search_segment > 0;
DELETE FROM search_segments;
UPDATE search_state SET low = 0;
