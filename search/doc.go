// Package search finds lines in stored text without reading all of it: a
// trigram index says which blobs may hold a match, and a line matcher
// reads only those.
//
// The index is a list of postings per trigram: which blocks of a segment
// (a batch of blobs indexed together; a block is one blob, or the blobs
// that one pack frame holds, which are read together anyway) contain the
// trigram, its bytes as they are. A case-insensitive search asks for any
// of a trigram's case variants. A query is a boolean expression of
// trigrams (Query) that every matching line's blob satisfies; a blob that
// satisfies it is a candidate, read and matched line by line (Matcher).
// The index may only ever say "maybe": it never decides a hit, so an entry
// left behind for content that is gone costs a read, never a wrong answer.
//
// The design follows Russ Cox's "Regular Expression Matching with a
// Trigram Index" (the analysis of a regular expression into a trigram
// query), simplified: it keeps the literal strings a pattern must match
// exactly while they stay few, and otherwise only what each part of the
// pattern requires.
package search
