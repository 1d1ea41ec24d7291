package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/catalog"
	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/index"
	"github.com/toolcas/toolcas/s3blob"
)

var (
	// ErrNotFound is returned when no part matches a reference (in the run,
	// when the lookup is scoped to one). It is hook.ErrNotFound, and the
	// "not found" of every other layer.
	ErrNotFound = hook.ErrNotFound

	// ErrNoVersion is returned by ResolveVersion when the key exists but has
	// no such version.
	ErrNoVersion = errors.New("no such version")

	// ErrInvalidRef is returned by Resolve, with hook.ErrRefused, for text
	// that is no reference.
	ErrInvalidRef = index.ErrInvalidRef

	// ErrOlderSchema is returned by Open, on a store opened ReadOnly, when
	// its index was made by an older toolcas and needs a migration, which
	// takes write access.
	ErrOlderSchema = index.ErrOlderSchema
)

// Resolve returns the part a reference names, scoped to run when it is set:
// a rendered key, a blob's path inside the store, blake3:<hex>, or a unique
// hex prefix of a digest. A store in an object store also takes the path a
// pointer written on another machine shows, in that machine's cache (see
// s3blob.Cache.ForeignPath), by the blob it names. A reference that is no reference, or names
// something outside the store, is hook.ErrRefused; one that matches nothing
// is ErrNotFound.
func (s *Store) Resolve(ctx context.Context, run, ref string) (Part, error) {
	return s.resolve(ctx, run, ref)
}

func (s *Store) resolve(ctx context.Context, run, ref string) (index.Part, error) {
	r, err := index.ParseRef(ref, s.dir)
	if err != nil {
		var ok bool
		if r, ok = s.foreignRef(ref); !ok {
			// The index's message names the reference and what is wrong
			// with it; a package prefix would add nothing for whoever
			// reads it.
			return index.Part{}, refused{err}
		}
	}
	p, err := s.ix.Resolve(ctx, r, run)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return index.Part{}, err
	}
	return p, err
}

// foreignPaths is a blob backend whose blob files' paths differ from one
// machine to the next: the caches of a store in an object store. It tells
// the blob that a path names on another machine (s3blob.Cache.ForeignPath).
type foreignPaths interface {
	ForeignPath(path string) (cas.Blob, bool)
}

var _ foreignPaths = (*s3blob.Backend)(nil)

// foreignRef is the reference, by its blob's path inside the store, that
// ref names when it is the path of the blob's file on another machine
// sharing the store: a pointer written there names that machine's cache.
// The blob is then looked up in the index like any path, scoped to the
// run; the file at ref is never opened.
func (s *Store) foreignRef(ref string) (index.Ref, bool) {
	fp, ok := s.eng.backend().(foreignPaths)
	if !ok {
		return index.Ref{}, false
	}
	b, ok := fp.ForeignPath(ref)
	if !ok {
		return index.Ref{}, false
	}
	r, err := index.ParseRef(b.RelPath(), s.dir)
	return r, err == nil
}

// refused is an error of a reference the store refuses: its own message,
// and hook.ErrRefused.
type refused struct{ err error }

func (r refused) Error() string   { return r.err.Error() }
func (r refused) Unwrap() []error { return []error{r.err, hook.ErrRefused} }

// ResolveVersion returns version n (from 1) of a key, scoped to run when it
// is set. A key with no part is ErrNotFound; a version it does not have is
// ErrNoVersion, saying which it has.
func (s *Store) ResolveVersion(ctx context.Context, run, key string, n int) (Part, error) {
	vs, err := s.ix.Versions(ctx, key)
	if err != nil {
		return Part{}, err
	}
	if run != "" {
		vs = slices.DeleteFunc(vs, func(p index.Part) bool { return p.Run != run })
	}
	if len(vs) == 0 {
		return Part{}, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	for _, p := range vs {
		if p.Version == n {
			return p, nil
		}
	}
	have := make([]string, len(vs))
	for i, p := range vs {
		have[len(vs)-1-i] = strconv.Itoa(p.Version)
	}
	versions := "versions"
	if len(have) == 1 {
		versions = "version"
	}
	return Part{}, fmt.Errorf("%s@%d: %w: it has %s %s", key, n, ErrNoVersion, versions, strings.Join(have, ", "))
}

// Read returns the part a reference names, its bytes checked against its
// digest. It implements hook.Store.
func (s *Store) Read(ctx context.Context, run, ref string) (*hook.Content, error) {
	p, err := s.resolve(ctx, run, ref)
	if err != nil {
		return nil, err
	}
	data, err := cas.ReadBlob(ctx, s.eng.backend(), p.Blob)
	if err != nil {
		return nil, blobError("read", p, err)
	}
	c := contentOf(s.Path(p.Blob), p)
	c.Data = data
	c.Packed = s.PackOf(ctx, p.Blob)
	return c, nil
}

// OpenRead returns the part a reference names, without its bytes, and a
// reader of them that checks them against their digest at the end. It
// implements hook.StreamStore.
func (s *Store) OpenRead(ctx context.Context, run, ref string) (*hook.Content, io.ReadCloser, error) {
	p, err := s.resolve(ctx, run, ref)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.eng.backend().Open(ctx, p.Blob)
	if err != nil {
		return nil, nil, blobError("read", p, err)
	}
	c := contentOf(s.Path(p.Blob), p)
	c.Size = r.Size()
	c.Packed = r.Pack()
	return c, r, nil
}

// contentOf describes a part read back, without its bytes.
func contentOf(path string, p index.Part) *hook.Content {
	return &hook.Content{
		Key: p.Key, Path: path, Run: p.Run, Digest: p.Blob.Digest, Version: p.Version,
		Kind: p.Kind, MIME: p.MIME, Filename: p.Filename, Chars: p.Chars,
	}
}

// blobError is the error of an op on a part's blob. A blob missing for a
// part that names it is damage, not a reference that matches nothing: it
// says so, and is ErrMissingBlobs, not ErrNotFound.
func blobError(op string, p index.Part, err error) error {
	if errors.Is(err, cas.ErrNotFound) {
		return fmt.Errorf("%s %s: %w: %s (run casctl verify)", op, p.Key, ErrMissingBlobs, p.Blob)
	}
	return fmt.Errorf("%s %s: %w", op, p.Key, err)
}

// Copy writes a part's bytes to w, but only once they are checked: a
// corrupt blob is an error and nothing is written.
func (s *Store) Copy(ctx context.Context, w io.Writer, p Part) (int64, error) {
	ip := index.Part{Key: p.Key, Blob: p.Blob}
	r, err := s.eng.openChecked(ctx, p.Blob)
	if err != nil {
		return 0, blobError("copy", ip, err)
	}
	defer r.Close()
	n, err := io.Copy(w, r)
	if err != nil {
		return n, fmt.Errorf("copy %s: %w", p.Key, err)
	}
	return n, nil
}

// VerifyBlob re-hashes a blob, returning an error wrapping cas.ErrCorrupt
// when it does not hash to its name. On an object store the copy checked
// is the one reads use: the cached file, fetched (and checked) if absent.
func (s *Store) VerifyBlob(ctx context.Context, b cas.Blob) error {
	r, err := s.eng.openChecked(ctx, b)
	if err != nil {
		return err
	}
	return r.Close()
}

// OpenBlob opens a blob for a read checked against its digest as it goes,
// from the store's blobs (for an object store, through the cache).
func (s *Store) OpenBlob(ctx context.Context, b cas.Blob) (*cas.Reader, error) {
	return s.eng.backend().Open(ctx, b)
}

// List lists parts, newest first.
func (s *Store) List(ctx context.Context, o ListOptions) ([]Part, error) {
	return s.ix.List(ctx, o.index())
}

// Stats summarises the store, or one run of it.
func (s *Store) Stats(ctx context.Context, run string) (Stats, error) {
	st, err := s.ix.Stats(ctx, run)
	if err == nil && run == "" {
		st.Removals, st.RemovedParts, st.LastRemoval, err = s.ix.RemovalTotals(ctx)
	}
	return st, err
}

// StatsReport is Stats as scripts and agents read it, as JSON.
type StatsReport = catalog.StatsReport

// ToolReport is one tool's share in a StatsReport.
type ToolReport = catalog.ToolReport

// Sharing lists the parts, of any run and version, stored in blob b.
func (s *Store) Sharing(ctx context.Context, b cas.Blob) ([]Part, error) {
	return s.ix.Sharing(ctx, b)
}

// Runs lists the runs whose names start with prefix, in order, at most
// limit of them (0: all).
func (s *Store) Runs(ctx context.Context, prefix string, limit int) ([]string, error) {
	return s.ix.Runs(ctx, prefix, limit)
}

// Tools lists the tools whose names start with prefix, as Runs does.
func (s *Store) Tools(ctx context.Context, prefix string, limit int) ([]string, error) {
	return s.ix.Tools(ctx, prefix, limit)
}

// Keys lists the keys that start with prefix, as Runs does.
func (s *Store) Keys(ctx context.Context, prefix string, limit int) ([]string, error) {
	return s.ix.Keys(ctx, prefix, limit)
}

// HasRun reports whether any part is of the run.
func (s *Store) HasRun(ctx context.Context, run string) (bool, error) { return s.ix.HasRun(ctx, run) }

// HasTool reports whether any part is of the tool.
func (s *Store) HasTool(ctx context.Context, tool string) (bool, error) {
	return s.ix.HasTool(ctx, tool)
}

// Prune removes parts; gc then frees the blobs no part uses.
func (s *Store) Prune(ctx context.Context, o PruneOptions) (PruneResult, error) {
	e, err := s.writer("prune")
	if err != nil {
		return PruneResult{}, err
	}
	done, short := e.freeSpace()
	defer done()
	io := index.PruneOptions{Run: o.Run, Before: o.Before, KeepRuns: o.KeepRuns, DryRun: o.DryRun}
	if short {
		// Little room: a batch at a time, each within the reserve.
		io.Batch = pruneBatchShort
	}
	r, err := s.ix.Prune(ctx, io)
	if err != nil {
		// What the failed transaction logged goes back to the disk.
		s.ix.Checkpoint(context.WithoutCancel(ctx))
	}
	return PruneResult(r), err
}

// pruneBatchShort is how many parts a prune removes per transaction on a
// disk with little room: what MinReserve leaves room for.
const pruneBatchShort = 32

// DeleteVersion removes one version of a key (0: every version); gc then
// frees the blob if no other part uses it. It returns how many parts it
// removed.
func (s *Store) DeleteVersion(ctx context.Context, key string, version int) (int64, error) {
	if _, err := s.writer("delete"); err != nil {
		return 0, err
	}
	return s.ix.DeleteKey(ctx, key, version)
}

// Detail is everything known about one part.
type Detail struct {
	Part Part
	Path string
	Blob BlobRow
	// Sharing lists the other parts, of any run and version, stored in the
	// same blob: all of them, or the first few for ShowPartFirst.
	Sharing []Part
	// SharingTotal counts all the other parts stored in the same blob.
	SharingTotal int64
	// Versions lists every version of the part's key, newest first.
	Versions []Part
	// OnDisk is the blob file's state: its size, or the error finding it.
	OnDisk    cas.BlobInfo
	OnDiskErr error
}

// Show returns everything known about the part a reference names.
func (s *Store) Show(ctx context.Context, ref string) (Detail, error) {
	p, err := s.Resolve(ctx, "", ref)
	if err != nil {
		return Detail{}, err
	}
	return s.ShowPart(ctx, p)
}

// ShowPart returns everything known about a part already resolved.
func (s *Store) ShowPart(ctx context.Context, p Part) (Detail, error) {
	return s.ShowPartFirst(ctx, p, 0)
}

// ShowPartFirst is ShowPart listing at most most of the parts sharing the
// blob (0: all, oldest first), by run and oldest first within a run, and
// counting the rest: a blob that tens of thousands of parts share is shown
// as fast as any.
func (s *Store) ShowPartFirst(ctx context.Context, p Part, most int) (Detail, error) {
	d := Detail{Part: p, Path: s.Path(p.Blob)}
	row, err := s.ix.Blob(ctx, p.Blob)
	if err != nil {
		return Detail{}, err
	}
	d.Blob = row
	limit := 0
	if most > 0 {
		limit = most + 1 // the part itself may be among them
	}
	all, err := s.ix.SharingFirst(ctx, p.Blob, limit)
	if err != nil {
		return Detail{}, err
	}
	for _, o := range all {
		if o.ID != p.ID && (most <= 0 || len(d.Sharing) < most) {
			d.Sharing = append(d.Sharing, o)
		}
	}
	d.SharingTotal = max(d.Blob.Parts-1, int64(len(d.Sharing)))
	vs, err := s.ix.Versions(ctx, p.Key)
	if err != nil {
		return Detail{}, err
	}
	d.Versions = vs
	d.OnDisk, d.OnDiskErr = s.eng.backend().Stat(ctx, p.Blob)
	return d, nil
}

// PackOf returns the name of the pack file holding b, or "" when b is a
// loose file (whose path file tools can read) or cannot be found.
func (s *Store) PackOf(ctx context.Context, b cas.Blob) string {
	info, err := s.eng.backend().Stat(ctx, b)
	if err != nil {
		return ""
	}
	return info.Pack
}
