package hook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/search"
)

// DirStore writes each part to a plain file named by its key under a root
// directory, as Haystack's FileSystemToolResultStore does: the same file
// names, the same checks that nothing resolves outside the root, and, like
// it, writing a key again overwrites the file, so an old pointer then shows
// the new content. Having no index, it cannot tell two calls whose keys
// render alike apart either: the later overwrites the earlier, as in
// Haystack. It is for users who want plain files, and the baseline the
// benchmarks measure toolcas against.
//
// Like Haystack's store, it creates its root on the first write; building
// or loading one creates nothing.
type DirStore struct {
	root    string
	dir     string // root as given, for configuration
	durable bool
}

var _ Store = (*DirStore)(nil)

// A DirOption configures NewDirStore.
type DirOption func(*DirStore)

// Durable makes every write durable: temp file, fsync, rename, directory
// fsync. Haystack's store, and the default, write the file in place without
// syncing.
func Durable() DirOption { return func(d *DirStore) { d.durable = true } }

// NewDirStore returns a store writing under root. Nothing is created until
// the first write, which creates root if it does not exist. A relative root
// is resolved against the working directory now, and kept as given in the
// store's configuration.
func NewDirStore(root string, opts ...DirOption) (*DirStore, error) {
	if root == "" {
		return nil, errors.New("dirstore: empty root")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("dirstore: %w", err)
	}
	d := &DirStore{root: abs, dir: root}
	for _, o := range opts {
		o(d)
	}
	return d, nil
}

// Root returns the store's root directory.
func (d *DirStore) Root() string { return d.root }

// Name is the store's name in warnings.
func (d *DirStore) Name() string { return "DirStore" }

// AcceptsBinary reports true: files hold any bytes.
func (d *DirStore) AcceptsBinary() bool { return true }

// local returns the path, relative to the root, that a key or reference
// names, refusing anything that resolves outside the root.
func (d *DirStore) local(what, ref string) (string, error) {
	rel := ref
	if filepath.IsAbs(ref) {
		r, err := filepath.Rel(d.root, filepath.Clean(ref))
		if err != nil {
			return "", fmt.Errorf("dirstore: %w: %s %q resolves outside the store root %s", ErrRefused, what, clip(ref), d.root)
		}
		rel = r
	}
	if !filepath.IsLocal(rel) || strings.ContainsRune(rel, 0) {
		return "", fmt.Errorf("dirstore: %w: %s %q resolves outside the store root %s", ErrRefused, what, clip(ref), d.root)
	}
	return filepath.Clean(rel), nil
}

// Write writes each item to <root>/<key>.
func (d *DirStore) Write(ctx context.Context, items []Item) ([]Stored, error) {
	type plan struct {
		rel  string
		data []byte
	}
	plans := make([]plan, len(items))
	for i, it := range items {
		if err := it.Key.Check(); err != nil {
			return nil, fmt.Errorf("dirstore: %w", err)
		}
		rel, err := d.local("key", it.Key.String())
		if err != nil {
			return nil, err
		}
		data, err := readAll(it.Part)
		if err != nil {
			return nil, fmt.Errorf("dirstore: key %s: %w", it.Key, err)
		}
		plans[i] = plan{rel, data}
	}
	root, err := os.OpenRoot(d.root)
	if errors.Is(err, fs.ErrNotExist) {
		// The first write creates the root.
		if err := os.MkdirAll(d.root, 0o755); err != nil {
			return nil, fmt.Errorf("dirstore: create %s: %w", d.root, err)
		}
		root, err = os.OpenRoot(d.root)
	}
	if err != nil {
		return nil, fmt.Errorf("dirstore: %w", err)
	}
	defer root.Close()
	out := make([]Stored, len(items))
	for i, p := range plans {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := d.writeFile(root, p.rel, p.data); err != nil {
			return nil, err
		}
		out[i] = Stored{Key: items[i].Key.String(), Path: filepath.Join(d.root, p.rel), Digest: cas.Sum(p.data), Version: 1}
	}
	return out, nil
}

func (d *DirStore) writeFile(root *os.Root, rel string, data []byte) error {
	dir := filepath.Dir(rel)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dirstore: create %s: %w", filepath.Join(d.root, dir), err)
	}
	if !d.durable {
		if err := root.WriteFile(rel, data, 0o644); err != nil {
			return fmt.Errorf("dirstore: write %s: %w", filepath.Join(d.root, rel), err)
		}
		return nil
	}
	tmp := filepath.Join(dir, ".tmp-"+filepath.Base(rel)+"-"+randomName())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("dirstore: write %s: %w", filepath.Join(d.root, rel), err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err == nil {
		var df *os.File
		if df, err = root.Open(dir); err == nil {
			err = df.Sync()
			df.Close()
		}
	}
	if err != nil {
		root.Remove(tmp)
		return fmt.Errorf("dirstore: write %s: %w", filepath.Join(d.root, rel), err)
	}
	return nil
}

// Read reads the file a reference names: a key or a path relative to the
// root, or an absolute path inside it. A reference resolving outside the
// root, through ".." or a symbolic link, is refused. With run set, only
// files under <root>/<run>/ are visible.
func (d *DirStore) Read(ctx context.Context, run, ref string) (*Content, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rel, err := d.local("reference", ref)
	if err != nil {
		return nil, err
	}
	slash := filepath.ToSlash(rel)
	if run != "" && !strings.HasPrefix(slash, EscapeRun(run)+"/") {
		return nil, fmt.Errorf("dirstore: %s: %w in run %s", clip(ref), ErrNotFound, run)
	}
	root, err := os.OpenRoot(d.root)
	if errors.Is(err, fs.ErrNotExist) {
		// Nothing was written yet.
		return nil, fmt.Errorf("dirstore: %s: %w", clip(ref), ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("dirstore: %w", err)
	}
	defer root.Close()
	data, err := root.ReadFile(rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("dirstore: %s: %w", clip(ref), ErrNotFound)
		}
		if throughLink(d.root, rel) {
			return nil, fmt.Errorf("dirstore: %w: reference %q resolves outside the store root %s", ErrRefused, clip(ref), d.root)
		}
		return nil, fmt.Errorf("dirstore: read %s: %w", clip(ref), err)
	}
	c := &Content{Key: slash, Path: filepath.Join(d.root, rel), Digest: cas.Sum(data), Version: 1, Data: data}
	if i := strings.IndexByte(slash, '/'); i > 0 {
		c.Run = slash[:i]
		if r, err := url.PathUnescape(c.Run); err == nil {
			c.Run = r
		}
	}
	ext := filepath.Ext(rel)
	c.MIME = mime.TypeByExtension(ext)
	switch {
	case ext == ".txt":
		c.Kind, c.MIME = KindText, "text/plain; charset=utf-8"
	case strings.HasPrefix(c.MIME, "image/"):
		c.Kind = KindImage
	default:
		c.Kind = KindFile
	}
	return c, nil
}

// throughLink reports whether the path rel under root passes through a
// symbolic link: the store writes none, and os.Root refuses one that leads
// out of the root.
func throughLink(root, rel string) bool {
	p := root
	for _, name := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
		p = filepath.Join(p, name)
		fi, err := os.Lstat(p)
		if err != nil {
			return false
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return true
		}
	}
	return false
}

var _ Searcher = (*DirStore)(nil)

// wholeSearch is the largest file DirStore.Search reads at once; a larger
// one is matched as it streams.
const wholeSearch = 1 << 20

// Search calls fn with each line of run's text parts (the .txt files under
// <root>/<run>/) that q matches, files in the order of their steps (see
// Searcher). Having no index, it reads every text file of the run, and
// tells a file's tool by its name alone: q.Tool "a" finds the files of a
// tool "a_b" too, whose names begin alike. A file is read through the
// root, as Read does: a symbolic link is never followed.
func (d *DirStore) Search(ctx context.Context, run string, q SearchQuery, fn func(SearchHit) error) error {
	match, err := compileSearch(run, q)
	if err != nil {
		return fmt.Errorf("dirstore: search: %w", err)
	}
	root, err := os.OpenRoot(d.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing was written yet
	}
	if err != nil {
		return fmt.Errorf("dirstore: search: %w", err)
	}
	defer root.Close()
	dir := EscapeRun(run)
	names, err := d.textFiles(root, dir, q.Tool)
	if err != nil {
		return err
	}
	var fold []byte
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := d.searchFile(ctx, root, dir, name, match, q.Width, &fold, fn); err != nil {
			return err
		}
	}
	return nil
}

// textFiles returns the names of the text parts in the run directory dir,
// of tool when it is set, ordered by step, then name.
func (d *DirStore) textFiles(root *os.Root, dir, tool string) ([]string, error) {
	f, err := root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no part of the run
	}
	if err != nil {
		return nil, fmt.Errorf("dirstore: search: %w", err)
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("dirstore: search %s: %w", filepath.Join(d.root, dir), err)
	}
	type file struct {
		step int
		name string
	}
	var files []file
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || filepath.Ext(name) != ".txt" || strings.HasPrefix(name, ".tmp-") {
			continue
		}
		digits := len(name) - len(strings.TrimLeft(name, "0123456789"))
		step, err := strconv.Atoi(name[:digits])
		if err != nil || digits == len(name) || name[digits] != '_' {
			continue // not a part's name
		}
		if tool != "" && !strings.HasPrefix(name[digits+1:], renderTool(tool)+"_") {
			continue
		}
		files = append(files, file{step, name})
	}
	slices.SortFunc(files, func(a, b file) int {
		return cmp.Or(cmp.Compare(a.step, b.step), strings.Compare(a.name, b.name))
	})
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.name
	}
	return names, nil
}

// searchFile matches the lines of one file: a small one read whole, a
// large one as it streams.
func (d *DirStore) searchFile(ctx context.Context, root *os.Root, dir, name string, match *search.Matcher, width int, fold *[]byte, fn func(SearchHit) error) error {
	rel := filepath.Join(dir, name)
	f, err := root.Open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed since the directory was listed
	}
	if err != nil {
		return fmt.Errorf("dirstore: search %s: %w", filepath.Join(d.root, rel), err)
	}
	defer f.Close()
	key := dir + "/" + name
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("dirstore: search %s: %w", filepath.Join(d.root, rel), err)
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Size() > wholeSearch {
		return scanReader(ctx, match, key, f, width, fn)
	}
	data, err := io.ReadAll(io.LimitReader(f, wholeSearch+1))
	if err != nil {
		return fmt.Errorf("dirstore: search %s: %w", filepath.Join(d.root, rel), err)
	}
	return scanBytes(ctx, match, key, data, width, fold, fn)
}
