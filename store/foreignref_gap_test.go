package store

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// Two machines share a store on S3 and its PostgreSQL index, each with a
// cache directory of its own: the path in a pointer written on one
// resolves on the other, by the blob it names, scoped to the run as any
// reference is; the file it names is never opened there. A path whose
// tail names no blob of the store, or with a ".." in it, does not.
func TestForeignCachePathResolves(t *testing.T) {
	ctx := context.Background()
	e := startRemote(t)
	a := mustOpenRemote(t, e)
	b, err := Open(ctx, e.url, e.options(t.TempDir())...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Dir() == b.Dir() {
		t.Fatalf("both machines cache in %s", a.Dir())
	}
	st := mustWrite(t, a, item("r1", 1, "written on machine a"))
	path := st[0].Path
	if !strings.HasPrefix(path, a.Dir()+string(filepath.Separator)) {
		t.Fatalf("pointer path %s is not in a's cache %s", path, a.Dir())
	}

	p, err := b.Resolve(ctx, "", path)
	if err != nil {
		t.Fatalf("b.Resolve(a's path) = %v", err)
	}
	if p.Key != st[0].Key || p.Blob.Digest != st[0].Digest {
		t.Errorf("b.Resolve(a's path) = %s %s, want %s %s", p.Key, p.Blob, st[0].Key, st[0].Digest)
	}
	c, err := b.Read(ctx, "r1", path)
	if err != nil || string(c.Data) != "written on machine a" {
		t.Fatalf("b.Read(r1, a's path) = %v, %v", c, err)
	}
	if !strings.HasPrefix(c.Path, b.Dir()) {
		t.Errorf("read back at %s, want b's own cache %s", c.Path, b.Dir())
	}
	_, r, err := b.OpenRead(ctx, "r1", path)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := io.ReadAll(r); err != nil || string(data) != "written on machine a" {
		t.Errorf("b.OpenRead(a's path) reads %q, %v", data, err)
	}
	r.Close()

	// Scoped to another run, the path resolves to nothing, as by any other
	// reference.
	if _, err := b.Read(ctx, "r2", path); !errors.Is(err, ErrNotFound) {
		t.Errorf("b.Read(r2, a's path) = %v, want ErrNotFound", err)
	}
	// The same tail under any other root (another machine's cache, a
	// Windows one) names the same blob.
	rel := strings.TrimPrefix(filepath.ToSlash(path), filepath.ToSlash(a.Dir())+"/")
	for _, other := range []string{"/home/c/.cache/toolcas/x/y/" + rel, `C:\Users\d\cache\` + strings.ReplaceAll(rel, "/", `\`)} {
		if p, err := b.Resolve(ctx, "r1", other); err != nil || p.Key != st[0].Key {
			t.Errorf("b.Resolve(%q) = %s, %v; want %s", other, p.Key, err, st[0].Key)
		}
	}
	// A blob the index does not know is not found; what is no blob's path,
	// or climbs out with "..", is refused.
	unknown := filepath.Join(filepath.Dir(filepath.Dir(path)), "00", strings.Repeat("0", 64)+".txt")
	if _, err := b.Resolve(ctx, "", unknown); !errors.Is(err, ErrNotFound) {
		t.Errorf("b.Resolve(unknown blob's path) = %v, want ErrNotFound", err)
	}
	for _, bad := range []string{
		filepath.Join(filepath.Dir(a.Dir()), "index.db"),
		"/home/c/../" + rel,
		"/home/c/" + rel + "/x",
	} {
		if _, err := b.Resolve(ctx, "", bad); !errors.Is(err, hook.ErrRefused) {
			t.Errorf("b.Resolve(%q) = %v, want refused", bad, err)
		}
	}
}

// A store in a directory takes only paths inside its root: another
// store's blob path, whatever its tail, stays refused.
func TestLocalStoreRefusesOtherRoot(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	st := mustWrite(t, s, item("r1", 1, "local"))
	rel := strings.TrimPrefix(filepath.ToSlash(st[0].Path), filepath.ToSlash(s.Dir())+"/")
	other := filepath.Join(t.TempDir(), filepath.FromSlash(rel))
	if _, err := s.Resolve(ctx, "", other); !errors.Is(err, hook.ErrRefused) {
		t.Errorf("Resolve(another root's blob path) = %v, want refused", err)
	}
	if p, err := s.Resolve(ctx, "", st[0].Path); err != nil || p.Key != st[0].Key {
		t.Errorf("Resolve(own path) = %s, %v", p.Key, err)
	}
}
