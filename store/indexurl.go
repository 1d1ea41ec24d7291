package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolcas/toolcas/cas"
	"github.com/toolcas/toolcas/index"
)

// IndexRecordFile, at the store root, records where a store keeps its
// index when that is not IndexFile beside the blobs: the URL of a
// PostgreSQL database, without its password. Open reads it, so that a
// store opened without WithIndexURL opens the index it was created with,
// never an empty IndexFile.
const IndexRecordFile = "index.json"

// ErrIndexMismatch is returned by Open when the index it is told to use is
// not the one the store keeps its keys in.
var ErrIndexMismatch = errors.New("store keeps its index elsewhere")

// indexRecord is the content of IndexRecordFile.
type indexRecord struct {
	URL string `json:"url"`
}

// indexURLShown checks that raw names a PostgreSQL database and returns it
// without its password, for the record and for messages.
func indexURLShown(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url's error repeats the text, password and all.
		return "", fmt.Errorf("%w: the index URL is not a URL; want postgres://USER@HOST:PORT/DB", index.ErrInvalidURL)
	}
	shown := withoutSecrets(u)
	db := strings.TrimPrefix(u.Path, "/")
	switch {
	case !index.IsPostgresURL(raw):
		return "", fmt.Errorf("%w %s: an index URL is postgres://USER@HOST:PORT/DB (a SQLite index is the store's own %s)",
			index.ErrInvalidURL, shown, IndexFile)
	case u.Hostname() == "":
		return "", fmt.Errorf("%w %s: no host", index.ErrInvalidURL, shown)
	case db == "" || strings.Contains(db, "/"):
		return "", fmt.Errorf("%w %s: want one database name after the host", index.ErrInvalidURL, shown)
	}
	return shown, nil
}

// withoutSecrets returns u as text without the password of its userinfo
// and without the query parameters that hold passwords.
func withoutSecrets(u *url.URL) string {
	v := *u
	if v.User != nil {
		v.User = url.User(v.User.Username())
	}
	q := v.Query()
	hid := false
	for _, k := range []string{"password", "sslpassword"} {
		if _, ok := q[k]; ok {
			q.Del(k)
			hid = true
		}
	}
	if hid {
		v.RawQuery = q.Encode()
	}
	return v.String()
}

// readIndexRecord returns the index URL the store at dir records, or ""
// when it records none (its index is IndexFile).
func readIndexRecord(dir string) (string, error) {
	file := filepath.Join(dir, IndexRecordFile)
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", file, err)
	}
	url, err := parseIndexRecord(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return url, nil
}

// parseIndexRecord returns the URL an IndexRecordFile's content names.
func parseIndexRecord(b []byte) (string, error) {
	var r indexRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return "", fmt.Errorf("damaged (want {\"url\": \"postgres://…\"}): %w", err)
	}
	if r.URL == "" {
		return "", errors.New(`damaged (want {"url": "postgres://…"}): it names no URL`)
	}
	if _, err := indexURLShown(r.URL); err != nil {
		return "", err
	}
	return r.URL, nil
}

// writeIndexRecord records shown as the store's index, atomically and
// durably: several processes creating one store at once write identical
// bytes.
func writeIndexRecord(dir, shown string) error {
	b, _ := json.MarshalIndent(indexRecord{URL: shown}, "", "  ")
	file := filepath.Join(dir, IndexRecordFile)
	f, err := os.CreateTemp(dir, ".tmp-"+IndexRecordFile+"-*")
	if err != nil {
		return fmt.Errorf("record the index: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("record the index in %s: %w", file, err)
	}
	return nil
}

// indexLocation decides where the store at dir keeps its index: the path
// or URL to open, the URL to record once it is open ("" for none), or an
// error when what the caller asks for is not what the store uses.
func indexLocation(dir string, c *config) (open, record string, err error) {
	rec, err := readIndexRecord(dir)
	if err != nil {
		return "", "", err
	}
	file := filepath.Join(dir, IndexFile)
	if c.indexURL == "" {
		if rec != "" {
			return rec, "", nil
		}
		return file, "", nil
	}
	shown, _ := indexURLShown(c.indexURL)
	if rec != "" {
		if rec != shown {
			return "", "", fmt.Errorf("%w: %s keeps its index at %s (recorded in %s), not at %s",
				ErrIndexMismatch, dir, rec, IndexRecordFile, shown)
		}
		return c.indexURL, "", nil
	}
	if _, err := os.Lstat(file); err == nil {
		return "", "", fmt.Errorf("%w: %s keeps its index in %s, not at %s", ErrIndexMismatch, dir, file, shown)
	}
	if !c.create {
		return "", "", fmt.Errorf("%w: %s records no index at %s (create the store with it: casctl init --index URL)",
			ErrIndexMismatch, dir, shown)
	}
	return c.indexURL, shown, nil
}

// ErrNoIndex is returned by Open for a store whose index is missing or
// empty: a SQLite file deleted or cut to nothing, a record of a PostgreSQL
// index removed, a database whose tables were dropped. Open never makes a
// new index for a store that holds blobs, since an empty index would tell
// gc that no blob is used; the index must be restored.
var ErrNoIndex = index.ErrNoIndex

// newIndexAllowed reports whether Open may make a new, empty index: only
// when it creates the store and the store holds no blob, loose or packed
// (walk lists them, packed says whether there are packs). Anything it
// cannot look at counts as a blob.
func newIndexAllowed(ctx context.Context, c *config, walk func(context.Context, func(cas.Entry) error) error,
	packed func(context.Context) (bool, error)) bool {
	if !c.create || c.readOnly {
		return false
	}
	errBlob := errors.New("a blob")
	if err := walk(ctx, func(e cas.Entry) error {
		if e.Kind == cas.EntryBlob {
			return errBlob
		}
		return nil
	}); err != nil {
		return false
	}
	if packed != nil {
		if some, err := packed(ctx); err != nil || some {
			return false
		}
	}
	return true
}

// indexError is the error of an index of the store at loc, at where, that
// did not open; a missing one says how it is restored.
func indexError(loc, where string, err error) error {
	if !errors.Is(err, ErrNoIndex) {
		return err
	}
	if index.IsPostgresURL(where) {
		where, _ = indexURLShown(where)
	}
	return fmt.Errorf("%w: %s holds blobs, but its index %s is missing or empty; restore it from a copy (an index in "+
		"PostgreSQL: record it again with casctl --store %s init --index URL). Nothing makes a new index for a store "+
		"that holds blobs: gc would take every blob for unused", ErrNoIndex, loc, where, loc)
}
