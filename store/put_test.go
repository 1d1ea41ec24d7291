package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

func TestPutStream(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	// Text longer than what a put holds in memory, with multi-byte
	// characters across every chunk boundary.
	big := strings.Repeat("ünïcödé ", 300_000)
	for _, tc := range []struct {
		name, mime, filename string
		data                 []byte
		kind                 hook.Kind
		ext                  string
		chars                int64
	}{
		{"text", "", "", []byte("héllo\n"), hook.KindText, ".txt", 6},
		{"big text", "", "", []byte(big), hook.KindText, ".txt", int64(len([]rune(big)))},
		{"text/plain", "text/plain", "", []byte("x"), hook.KindText, ".txt", 1},
		{"binary without MIME", "", "", []byte{0, 1, 2, 0xff}, hook.KindFile, ".bin", 0},
		{"sniffed png", "", "", png, hook.KindImage, ".png", 0},
		{"sniffed pdf", "", "", []byte("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj"), hook.KindFile, ".pdf", 0},
		{"image", "image/png", "", png, hook.KindImage, ".png", 0},
		{"UTF-8 as a file", "application/json", "data.json", []byte(`{"a": 1}`), hook.KindFile, ".json", 0},
		{"text MIME but not UTF-8", "text/plain", "", []byte{0xc3, 0x28}, hook.KindFile, ".txt", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := hook.Key{Run: "r", Step: 1, Tool: "put", CallID: tc.name, Part: -1}
			res, err := s.Put(ctx, StreamPart{Key: k, MIME: tc.mime, Filename: tc.filename}, bytes.NewReader(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if res.Kind != tc.kind || filepath.Ext(res.Path) != tc.ext || res.Chars != tc.chars || res.Size != int64(len(tc.data)) {
				t.Errorf("Put = kind %s ext %s chars %d size %d; want %s %s %d %d", res.Kind, filepath.Ext(res.Path), res.Chars, res.Size,
					tc.kind, tc.ext, tc.chars, len(tc.data))
			}
			c, err := s.Read(ctx, "r", res.Key)
			if err != nil || !bytes.Equal(c.Data, tc.data) {
				t.Errorf("reads back %d bytes, %v", len(c.Data), err)
			}
		})
	}
	if _, err := s.Put(ctx, StreamPart{Key: hook.Key{Run: "r", Tool: "t", CallID: "c", Part: -1}, MIME: "not a mime/"}, strings.NewReader("x")); err == nil {
		t.Error("invalid MIME accepted")
	}
}

// TestH17ReadsOnlyKnownBlobs: a read by path accepts only a blob file of the
// store that the index knows, never anything else inside or outside it.
func TestH17ReadsOnlyKnownBlobs(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	st := mustWrite(t, s, item("r", 1, "known"))[0]
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("secret"), 0o644)
	// A symbolic link planted inside blobs/, named as a blob would be.
	secret := []byte("secret")
	planted := filepath.Join(s.Dir(), "blobs")
	link := filepath.Join(planted, "2b", "2b"+strings.Repeat("0", 62)+".txt")
	os.Symlink(outside, link)
	orphan, _ := localOf(s).blobs.PutBytes(ctx, secret, ".txt")
	for _, ref := range []string{
		outside,
		link,
		filepath.Join(s.Dir(), "index.db"),
		filepath.Join(s.Dir(), "toolcas.json"),
		filepath.Join(s.Dir(), "blobs", "..", "index.db"),
		s.Path(orphan.Blob), // a real blob file, but no row: not a part
		"../../etc/passwd",
		st.Digest.Hex()[:7],
	} {
		c, err := s.Read(ctx, "", ref)
		if err == nil {
			t.Errorf("Read(%q) = %q", ref, c.Data)
			continue
		}
		if !errors.Is(err, hook.ErrRefused) && !errors.Is(err, hook.ErrNotFound) {
			t.Errorf("Read(%q) = %v, want a refusal or not found", ref, err)
		}
	}
	if c, err := s.Read(ctx, "r", st.Path); err != nil || string(c.Data) != "known" {
		t.Errorf("Read(known path) = %v", err)
	}
}

func TestShow(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	st := mustWrite(t, s, item("a", 1, "shared"), item("b", 2, "shared"))
	mustWrite(t, s, item("a", 1, "newer"))
	d, err := s.Show(ctx, st[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if d.Part.Key != "b/2_t_c.txt" && d.Part.Key != "a/1_t_c.txt" {
		t.Errorf("Show part = %s", d.Part.Key)
	}
	if len(d.Sharing) != 1 || d.Blob.Parts != 2 || d.OnDiskErr != nil || d.OnDisk.Size != 6 {
		t.Errorf("Show = %+v", d)
	}
	d, err = s.Show(ctx, "a/1_t_c.txt")
	if err != nil || len(d.Versions) != 2 || d.Part.Version != 2 {
		t.Errorf("Show(key) = versions %d, version %d, %v", len(d.Versions), d.Part.Version, err)
	}
}
