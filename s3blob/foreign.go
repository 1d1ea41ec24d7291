package s3blob

import (
	"path/filepath"
	"strings"

	"github.com/toolcas/toolcas/cas"
)

// ForeignPath returns the blob whose file p names in another machine's
// cache of the same store. Each machine caches a store in a directory of
// its own choosing, laid out alike (DIR/blobs/3f/3fa9….txt), and a pointer
// shows the path on the machine that wrote it: on any other, that path
// names nothing, yet its last three elements name the blob. So p is taken
// when it is absolute (a Unix path, or a Windows one from either kind of
// machine), holds no "." or ".." element, lies outside this cache (a path
// inside it is this machine's own, which the caller resolves as such), and
// ends in blobs/<shard>/<digest><ext> with the shard the digest's. Nothing
// at p is ever opened: the caller looks the blob up by its name, in the
// store's index, and reads it from the store.
func (c *Cache) ForeignPath(p string) (cas.Blob, bool) {
	if !foreignAbs(p) || strings.ContainsRune(p, 0) {
		return cas.Blob{}, false
	}
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(c.dir, p)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return cas.Blob{}, false
		}
	}
	elems := strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' })
	for _, e := range elems {
		if e == "." || e == ".." {
			return cas.Blob{}, false
		}
	}
	if len(elems) < 3 {
		return cas.Blob{}, false
	}
	b, err := cas.ParseBlobPath(strings.Join(elems[len(elems)-3:], "/"))
	if err != nil {
		return cas.Blob{}, false
	}
	return b, true
}

// ForeignPath returns the blob whose file p names in another machine's
// cache of the store (see Cache.ForeignPath).
func (be *Backend) ForeignPath(p string) (cas.Blob, bool) { return be.cache.ForeignPath(p) }

// foreignAbs reports whether p is an absolute path on some machine: it
// begins with a separator, or with a drive letter and one.
func foreignAbs(p string) bool {
	switch {
	case strings.HasPrefix(p, "/"), strings.HasPrefix(p, `\`):
		return true
	case len(p) >= 3 && p[1] == ':' && (p[2] == '/' || p[2] == '\\'):
		c := p[0] | 0x20
		return 'a' <= c && c <= 'z'
	}
	return false
}
