package hook

import "context"

// A Searcher is a Store that can find lines in the text parts it holds,
// for the read-back tool's search across a run.
type Searcher interface {
	Store
	// Search calls fn with each line of the run's text parts (the newest
	// version of each key) that matches q, the lines of one part together
	// and in order, until fn returns an error, which Search returns. Only
	// the run's parts are searched, never another run's; run is never
	// empty. A pattern that does not compile is an error wrapping
	// ErrBadPattern.
	Search(ctx context.Context, run string, q SearchQuery, fn func(SearchHit) error) error
}

// SearchQuery is what a Searcher looks for.
type SearchQuery struct {
	// Pattern is a regular expression (RE2 syntax), or with Fixed a plain
	// string, matched against each line.
	Pattern    string
	Fixed      bool
	IgnoreCase bool
	// Tool, when set, searches only that tool's parts.
	Tool string
	// Width cuts each line to about this many bytes around its match,
	// marking the cut; 0 keeps lines whole.
	Width int
}

// A SearchHit is one matching line.
type SearchHit struct {
	// Key is the part's rendered key.
	Key string
	// Line is the line's number in the part, from 1.
	Line int64
	// Text is the line, without its line break, cut to the query's Width.
	Text string
}
