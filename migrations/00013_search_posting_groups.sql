-- The search index's posting lists, a row per segment and group of
-- trigrams (their first byte) instead of a row per segment and trigram
-- (see search.GroupWriter). A row a trigram repeated its trigram and
-- segment, about 9 bytes, beside lists that are often a few bytes long:
-- the rows' own cost was most of the index.
--
-- The index is derived from the blobs: the segments of the old form are
-- dropped and their blobs left for the next catch-up (pack, or a grep that
-- finds the lag large) to index again. Until then a search reads them in
-- full, as it reads any lag: it finds the same lines, more slowly. Blobs
-- marked 0 (nothing to index) stay so.

-- +goose Up
CREATE TABLE search_posting_groups (
    grp     INTEGER NOT NULL,  -- the first byte of the group's trigrams
    segment INTEGER NOT NULL,
    data    BLOB    NOT NULL,  -- see search.GroupWriter
    PRIMARY KEY (grp, segment)
) WITHOUT ROWID;
DROP TABLE search_postings;
UPDATE blobs SET search_segment = NULL WHERE search_segment > 0;
DELETE FROM search_segments;
UPDATE search_state SET low = 0;

-- +goose Down
CREATE TABLE search_postings (
    trigram INTEGER NOT NULL,
    segment INTEGER NOT NULL,
    list    BLOB    NOT NULL,
    PRIMARY KEY (trigram, segment)
) WITHOUT ROWID;
DROP TABLE search_posting_groups;
UPDATE blobs SET search_segment = NULL WHERE search_segment > 0;
DELETE FROM search_segments;
UPDATE search_state SET low = 0;
