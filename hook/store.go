package hook

import (
	"context"
	"errors"
	"io"
	"time"
	"unicode/utf8"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/policy"
	"github.com/toolcas/toolcas/search"
)

var (
	// ErrNotFound is wrapped by Store.Read when no stored part matches a
	// reference (in the run, when the read is scoped to one). It is
	// cas.ErrNotFound, the one "not found" of every layer, and an
	// fs.ErrNotExist.
	ErrNotFound = cas.ErrNotFound

	// ErrRefused is wrapped by Store.Read and Store.Write for a reference or
	// key that names something outside the store, or outside what the caller
	// may see.
	ErrRefused = errors.New("refused")

	// ErrLocked is wrapped by Store.Write when the store stayed locked (by
	// its garbage collector, say) past the caller's deadline or the store's
	// own, rather than wait for ever.
	ErrLocked = errors.New("store locked")

	// ErrBadPattern is wrapped by Searcher.Search and the read-back tool
	// for a search pattern that cannot be used. It is search.ErrPattern.
	ErrBadPattern = search.ErrPattern
)

// Item is one part to store under its key.
type Item struct {
	Key  Key
	Part Part
	// RunTTL is the run's own retention (Step.TTL), for a store that
	// keeps one; 0 when the step gave none.
	RunTTL time.Duration
	// Chars is a text part's length in code points when its writer counted
	// them already (the hook does, for its policy), so that a store need not
	// count them again; 0 when not counted. A store uses it only when it is
	// a length the text's bytes can have (see CharsOf).
	Chars int
}

// CharsOf returns the length of a text part in code points: it.Chars when
// that is set and within what the text's bytes allow (a code point takes one
// to four bytes), else counted (policy.TextSize).
func CharsOf(it Item) int {
	n := len(it.Part.Text)
	if c := it.Chars; c > 0 && c <= n && c >= (n+3)/4 {
		return c
	}
	return policy.TextSize(it.Part.Text)
}

// Stored says where one item went.
type Stored struct {
	// Key is the rendered key.
	Key string
	// Path is where the bytes are: an absolute file path for stores on disk.
	Path   string
	Digest cas.Digest
	// Version counts the writes of the key, from 1.
	Version int
	// SameAs is another key of the same run already holding identical
	// content, or "". Never a key of another run.
	SameAs string
	// Dedup reports that the bytes were already stored, and nothing was
	// written.
	Dedup bool
}

// Content is a stored part read back.
type Content struct {
	Key      string
	Path     string
	Run      string
	Digest   cas.Digest
	Version  int
	Kind     Kind
	MIME     string
	Filename string
	Data     []byte
	// Size is the part's size in bytes; a streamed read sets it and leaves
	// Data nil.
	Size int64
	// Chars counts a text part's code points, when the store knows it
	// without reading the bytes (a toolcas store's index does); 0 when it
	// does not.
	Chars int64
	// Packed names the pack file that holds the part, for a store that
	// packs cold blobs: Path then names no file, and file tools cannot
	// read it there. Empty for a part that is a file of its own.
	Packed string
}

// IsText reports whether the bytes are UTF-8, and so read back as text.
func (c *Content) IsText() bool { return utf8.Valid(c.Data) }

// A Store keeps offloaded parts. Implementations are safe for concurrent use.
type Store interface {
	// Write stores the items of one step and returns, in order, where each
	// went. It is all or none: on error nothing the call wrote is
	// referenced. Writing a key that exists adds a new version (or, for a
	// store that says so, overwrites it).
	Write(ctx context.Context, items []Item) ([]Stored, error)
	// Read returns the part a reference names: a rendered key, a path the
	// store returned, or another form the store documents. With run set,
	// only that run's parts are visible; anything else is ErrNotFound.
	// A reference outside the store is ErrRefused.
	Read(ctx context.Context, run, ref string) (*Content, error)
	// AcceptsBinary reports whether the store takes image and file parts.
	AcceptsBinary() bool
}

// A StreamStore is a Store that can also hand a part's bytes out as a
// stream, so that the read-back tool reads parts of any size in bounded
// memory.
type StreamStore interface {
	Store
	// OpenRead returns the part a reference names as Read does, its Data nil
	// and its Size set, and a reader of its bytes whose read at the end
	// fails if they do not match the part's digest.
	OpenRead(ctx context.Context, run, ref string) (*Content, io.ReadCloser, error)
}

// storeKey is the context key of a per-run store.
type storeKey struct{}

// WithStore returns a context that makes the hook write this run's results
// to s instead of the store it was built with, as Haystack's
// hook_context["tool_result_store"] does.
func WithStore(ctx context.Context, s Store) context.Context {
	return context.WithValue(ctx, storeKey{}, s)
}

// StoreFrom returns the store WithStore put in ctx, or nil.
func StoreFrom(ctx context.Context) Store {
	s, _ := ctx.Value(storeKey{}).(Store)
	return s
}
