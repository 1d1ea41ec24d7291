package s3blob

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/cas"
)

// A blob's path in another machine's cache of the store names the blob:
// any absolute path, Unix or Windows, whose last three elements are
// blobs/<shard>/<digest><ext>. A path inside this cache, a relative one,
// one with "." or ".." elements, or one whose tail is no blob is not.
func TestForeignPath(t *testing.T) {
	c, err := NewCache(t.TempDir(), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := cas.Blob{Digest: cas.Sum([]byte("from machine a")), Ext: ".txt"}
	rel := b.RelPath()
	hex := b.Digest.Hex()
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/home/a/.cache/toolcas/bucket/0123456789abcdef/" + rel, true},
		{"/srv/toolcas/" + rel, true},
		{"/" + rel, true},
		{`C:\Users\a\AppData\Local\toolcas\bucket\0123\` + strings.ReplaceAll(rel, "/", `\`), true},
		{"c:/cache/" + rel, true},
		{"cache/" + rel, false},
		{rel, false},
		{"/home/a/../b/" + rel, false},
		{"/home/a/./" + rel, false},
		{"/home/a/blobs/" + hex[:2] + "/../" + hex[:2] + "/" + hex + ".txt", false},
		{"/home/a/blobs/00/" + hex + ".txt", hex[:2] == "00"},
		{"/home/a/blobs/" + hex[:2] + "/" + hex[:40] + ".txt", false},
		{"/home/a/blobs/" + hex[:2] + "/" + hex + ".txt/x", false},
		{"/home/a/tmp/" + hex[:2] + "/" + hex + ".txt", false},
		{"/home/a/index.db", false},
		{"/home/a/blobs/" + hex[:2] + "/" + hex + ".txt\x00", false},
		{filepath.Join(c.Dir(), filepath.FromSlash(rel)), false},
	} {
		got, ok := c.ForeignPath(tc.path)
		if ok != tc.ok || ok && got != b {
			t.Errorf("ForeignPath(%q) = %v, %v; want %v, %v", tc.path, got, ok, b, tc.ok)
		}
	}
	if runtime.GOOS == "windows" {
		return
	}
	// A path inside the cache is this machine's own, however it is
	// spelled: the store resolves it as such.
	if _, ok := c.ForeignPath(c.Dir() + "/x/../" + rel); ok {
		t.Errorf("a path inside the cache was taken for another machine's")
	}
}

// ForeignPath takes only what ends in a blob's path, and gives that blob.
func FuzzForeignPath(f *testing.F) {
	b := cas.Blob{Digest: cas.Sum([]byte("x")), Ext: ".png"}
	f.Add("/home/a/.cache/toolcas/b/h/" + b.RelPath())
	f.Add(`D:\c\` + strings.ReplaceAll(b.RelPath(), "/", `\`))
	f.Add("/a/../blobs/00/00.txt")
	c, err := NewCache(f.TempDir(), 1<<20, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, ok := c.ForeignPath(p)
		if !ok {
			return
		}
		tail := strings.ReplaceAll(p, `\`, "/")
		if !strings.HasSuffix(tail, "/"+got.RelPath()) {
			t.Errorf("ForeignPath(%q) = %v, which the path does not end in", p, got)
		}
		if strings.Contains(tail, "/../") || strings.Contains(tail, "/./") {
			t.Errorf("ForeignPath(%q) took a path with a . or .. element", p)
		}
	})
}
