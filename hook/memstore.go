package hook

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/toolcas/toolcas/cas"
)

// MemStore keeps offloaded parts in memory: for tests, and for agents whose
// results need not outlive the process. Identical bytes are held once;
// writing a key again adds a version; a key another call of the run already
// uses gets a "~2" suffix, as a toolcas store's does. Paths look like
// mem://blobs/<shard>/<digest hex><ext>.
type MemStore struct {
	textOnly bool

	mu    sync.RWMutex
	parts []memPart           // every version, in write order
	byKey map[string][]int    // indexes into parts, oldest version first
	blobs map[cas.Blob][]byte // content, once per digest and extension
}

type memPart struct {
	key     string
	owner   Key // the call that wrote it
	run     string
	version int
	blob    cas.Blob
	part    Part // without its bytes
}

// MemPathPrefix starts the paths of a MemStore.
const MemPathPrefix = "mem://"

// A MemOption configures NewMemStore.
type MemOption func(*MemStore)

// TextOnly makes the store refuse binary content, as a store that can hold
// only text does: the hook leaves image and file results in context.
func TextOnly() MemOption { return func(m *MemStore) { m.textOnly = true } }

// NewMemStore returns an empty in-memory store.
func NewMemStore(opts ...MemOption) *MemStore {
	m := &MemStore{byKey: map[string][]int{}, blobs: map[cas.Blob][]byte{}}
	for _, o := range opts {
		o(m)
	}
	return m
}

var _ Store = (*MemStore)(nil)

// Name is the store's name in warnings.
func (m *MemStore) Name() string {
	if m.textOnly {
		return "MemStore (text only)"
	}
	return "MemStore"
}

// AcceptsBinary reports whether the store takes image and file parts.
func (m *MemStore) AcceptsBinary() bool { return !m.textOnly }

func memPath(b cas.Blob) string { return MemPathPrefix + b.RelPath() }

// Write stores the items, all or none.
func (m *MemStore) Write(ctx context.Context, items []Item) ([]Stored, error) {
	for _, it := range items {
		if err := it.Key.Check(); err != nil {
			return nil, fmt.Errorf("memstore: %w", err)
		}
		if m.textOnly && it.Part.Kind != KindText {
			return nil, fmt.Errorf("memstore: %w: key %s holds binary content and the store takes text only", ErrRefused, it.Key)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Stored, len(items))
	for i, it := range items {
		data, err := readAll(it.Part)
		if err != nil {
			return nil, fmt.Errorf("memstore: key %s: %w", it.Key, err)
		}
		b := cas.Blob{Digest: cas.Sum(data), Ext: it.Key.Ext}
		_, dedup := m.blobs[b]
		if !dedup {
			m.blobs[b] = append([]byte(nil), data...)
		}
		key, err := m.freeKey(it.Key)
		if err != nil {
			return nil, err
		}
		p := it.Part
		p.Text, p.Data, p.Source = "", nil, nil
		mp := memPart{key: key, owner: it.Key, run: it.Key.Run, version: len(m.byKey[key]) + 1, blob: b, part: p}
		sameAs := ""
		for _, q := range m.parts {
			if q.run == mp.run && q.blob == b && q.key != key {
				sameAs = q.key
				break
			}
		}
		m.byKey[key] = append(m.byKey[key], len(m.parts))
		m.parts = append(m.parts, mp)
		out[i] = Stored{Key: key, Path: memPath(b), Digest: b.Digest, Version: mp.version, SameAs: sameAs, Dedup: dedup}
	}
	return out, nil
}

// freeKey returns the first of k's renderings, k, k~2, k~3, …, that no part
// uses or that k's own call uses.
func (m *MemStore) freeKey(k Key) (string, error) {
	for n := 1; n <= 1000; n++ {
		key := k.Render(n)
		idx := m.byKey[key]
		if len(idx) == 0 || m.parts[idx[0]].owner.SameCall(k) {
			return key, nil
		}
	}
	return "", fmt.Errorf("memstore: %w: key %s: 1000 other calls of the run use it", ErrRefused, k)
}

// Read returns the part a reference names: a key (its newest version), a
// mem:// path, blake3:<hex>, or a hex prefix of at least 8 digits; for the
// last three, the newest part with those bytes.
func (m *MemStore) Read(ctx context.Context, run, ref string) (*Content, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	match, err := m.matcher(run, ref)
	if err != nil {
		return nil, err
	}
	var found *memPart
	for i := len(m.parts) - 1; i >= 0; i-- {
		p := &m.parts[i]
		if (run == "" || p.run == run) && match(p) {
			found = p
			break
		}
	}
	if found == nil {
		if run != "" {
			return nil, fmt.Errorf("memstore: %s: %w in run %s", clip(ref), ErrNotFound, run)
		}
		return nil, fmt.Errorf("memstore: %s: %w", clip(ref), ErrNotFound)
	}
	return &Content{
		Key: found.key, Path: memPath(found.blob), Run: found.run, Digest: found.blob.Digest, Version: found.version,
		Kind: found.part.Kind, MIME: found.part.MIME, Filename: found.part.Filename,
		Data: append([]byte(nil), m.blobs[found.blob]...),
	}, nil
}

func (m *MemStore) matcher(run, ref string) (func(*memPart) bool, error) {
	switch {
	case strings.HasPrefix(ref, MemPathPrefix):
		b, err := cas.ParseBlobPath(strings.TrimPrefix(ref, MemPathPrefix))
		if err != nil {
			return nil, fmt.Errorf("memstore: %w: %q is not a path of this store", ErrRefused, clip(ref))
		}
		return func(p *memPart) bool { return p.blob == b }, nil
	case strings.HasPrefix(ref, cas.DigestPrefix):
		d, err := cas.ParseDigest(ref)
		if err != nil {
			return nil, fmt.Errorf("memstore: %w", err)
		}
		return func(p *memPart) bool { return p.blob.Digest == d }, nil
	case cas.IsHexPrefix(ref):
		if len(ref) < 8 {
			return nil, fmt.Errorf("memstore: digest prefix %q is shorter than 8 hex digits", ref)
		}
		var candidates []cas.Digest
		for _, p := range m.parts {
			if (run == "" || p.run == run) && strings.HasPrefix(p.blob.Digest.Hex(), ref) && !containsDigest(candidates, p.blob.Digest) {
				candidates = append(candidates, p.blob.Digest)
			}
		}
		if len(candidates) > 1 {
			return nil, fmt.Errorf("memstore: prefix %s matches %d blobs", ref, len(candidates))
		}
		return func(p *memPart) bool { return strings.HasPrefix(p.blob.Digest.Hex(), ref) }, nil
	case strings.Contains(ref, "/") && !strings.HasPrefix(ref, "/"):
		return func(p *memPart) bool { return p.key == ref }, nil
	}
	return nil, fmt.Errorf("memstore: %w: %q is not a key, a mem:// path or a digest", ErrRefused, clip(ref))
}

func containsDigest(ds []cas.Digest, d cas.Digest) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}

var _ Searcher = (*MemStore)(nil)

// Search calls fn with each line of run's text parts that q matches, the
// newest version of each key, keys in the order they were first written
// (see Searcher). It reads every text part of the run; fn runs without the
// store's lock held.
func (m *MemStore) Search(ctx context.Context, run string, q SearchQuery, fn func(SearchHit) error) error {
	match, err := compileSearch(run, q)
	if err != nil {
		return fmt.Errorf("memstore: search: %w", err)
	}
	type found struct {
		key  string
		data []byte
	}
	var parts []found
	m.mu.RLock()
	seen := map[string]bool{}
	for _, p := range m.parts {
		if p.run != run || seen[p.key] {
			continue
		}
		seen[p.key] = true
		idx := m.byKey[p.key]
		cur := m.parts[idx[len(idx)-1]]
		if cur.part.Kind != KindText || (q.Tool != "" && cur.owner.Tool != q.Tool) {
			continue
		}
		// Stored bytes are never changed: they are safe to read unlocked.
		parts = append(parts, found{cur.key, m.blobs[cur.blob]})
	}
	m.mu.RUnlock()
	var fold []byte
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := scanBytes(ctx, match, p.key, p.data, q.Width, &fold, fn); err != nil {
			return err
		}
	}
	return nil
}
