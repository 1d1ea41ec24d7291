-- The search index: which blobs hold which trigrams (see package search).
-- Blobs are indexed in batches, a segment each: the segment lists its
-- blobs' ids, and each trigram of its blobs has one posting list of the
-- positions, in that list, of the blobs holding it. A blob row names the
-- segment that indexed it; a posting counts only for blobs whose row still
-- names its segment, so that rows deleted by gc or prune, or an id used
-- again, never make a hit: the index says "maybe", reads decide. Blobs not
-- indexed yet are the index's lag, which searches read in full.
--
-- Finding the lag must cost writers nothing: an index of the blobs not
-- covered would add a page to every step's write-ahead log. Instead
-- search_state.low says that every blob with an id up to it is covered
-- (a blob that cannot be read stays NULL, and low stays below it), so that
-- the lag is the rows above low whose search_segment is NULL: a range of
-- the table's own key. SQLite
-- gives a new row the largest id plus one: when the rows with the largest
-- ids are deleted, an id at or below low could be given again, so a
-- trigger lowers low to the largest id left.

-- +goose Up
CREATE TABLE search_segments (
    id         INTEGER PRIMARY KEY,
    blob_ids   BLOB    NOT NULL,  -- unsigned varints: the first blob id, then each gap
    blobs      INTEGER NOT NULL,  -- how many blob ids
    bytes      INTEGER NOT NULL,  -- the text bytes indexed
    created_at INTEGER NOT NULL
);

CREATE TABLE search_postings (
    trigram INTEGER NOT NULL,
    segment INTEGER NOT NULL,
    list    BLOB    NOT NULL,  -- see search.EncodePosting
    PRIMARY KEY (trigram, segment)
) WITHOUT ROWID;

-- The segment that indexed the blob; 0 when it has nothing to index (no
-- text part uses it, or its bytes are binary); NULL until indexed.
ALTER TABLE blobs ADD COLUMN search_segment INTEGER;

CREATE TABLE search_state (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    low INTEGER NOT NULL
);
INSERT INTO search_state (id, low) VALUES (1, 0);

-- +goose StatementBegin
CREATE TRIGGER blobs_search_low AFTER DELETE ON blobs
WHEN OLD.id > (SELECT coalesce(max(id), 0) FROM blobs) BEGIN
    UPDATE search_state SET low = (SELECT coalesce(max(id), 0) FROM blobs)
        WHERE low > (SELECT coalesce(max(id), 0) FROM blobs);
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER blobs_search_low;
DROP TABLE search_state;
ALTER TABLE blobs DROP COLUMN search_segment;
DROP TABLE search_postings;
DROP TABLE search_segments;
