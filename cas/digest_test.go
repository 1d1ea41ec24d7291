package cas

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseDigest(t *testing.T) {
	d := Sum([]byte("hello"))
	for _, tc := range []struct {
		in   string
		want Digest
		ok   bool
	}{
		{d.String(), d, true},
		{strings.ToUpper(d.String()), Digest{}, false},
		{d.Hex(), Digest{}, false},
		{"blake3:" + d.Hex()[:63], Digest{}, false},
		{"blake3:" + d.Hex() + "0", Digest{}, false},
		{"blake3:" + strings.Replace(d.Hex(), d.Hex()[:1], "g", 1), Digest{}, false},
		{"sha256:" + d.Hex(), Digest{}, false},
		{"", Digest{}, false},
		{"blake3:", Digest{}, false},
	} {
		got, err := ParseDigest(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseDigest(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidDigest) {
			t.Errorf("ParseDigest(%q) error %v does not wrap ErrInvalidDigest", tc.in, err)
		}
	}
	if got := d.Short(); got != d.Hex()[:12] {
		t.Errorf("Short() = %q, want %q", got, d.Hex()[:12])
	}
	b, _ := d.MarshalText()
	var back Digest
	if err := back.UnmarshalText(b); err != nil || back != d {
		t.Errorf("text round trip = %v, %v", back, err)
	}
}

func FuzzParseDigest(f *testing.F) {
	f.Add(Sum(nil).String())
	f.Add(Sum([]byte("x")).Hex())
	f.Add("blake3:")
	f.Add("blake3:zz")
	f.Add("BLAKE3:" + Sum(nil).Hex())
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDigest(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidDigest) {
				t.Fatalf("ParseDigest(%q) error %v does not wrap ErrInvalidDigest", s, err)
			}
			if strings.Contains(err.Error(), "\n") && !strings.Contains(s, "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		// Only the canonical form parses, and it round-trips exactly.
		if d.String() != s {
			t.Fatalf("ParseDigest(%q) = %v, which prints differently", s, d)
		}
		h, err := ParseHex(d.Hex())
		if err != nil || h != d {
			t.Fatalf("ParseHex(%q) = %v, %v", d.Hex(), h, err)
		}
	})
}

func TestCheckExt(t *testing.T) {
	for _, tc := range []struct {
		ext string
		ok  bool
	}{
		{".txt", true},
		{".PNG", true},
		{".7z", true},
		{".a", true},
		{".abcdefghij123456", true},
		{".abcdefghij1234567", false},
		{"", false},
		{".", false},
		{"txt", false},
		{"..", false},
		{"./", false},
		{"../x", false},
		{".tar.gz", false},
		{".t t", false},
		{".t\x00", false},
		{".t\n", false},
		{".é", false},
		{".t/", false},
		{".t\\", false},
		{"/etc/passwd", false},
		{".-x", false},
		{"._", false},
	} {
		err := CheckExt(tc.ext)
		if (err == nil) != tc.ok {
			t.Errorf("CheckExt(%q) = %v, want ok=%v", tc.ext, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidExt) {
			t.Errorf("CheckExt(%q) error does not wrap ErrInvalidExt", tc.ext)
		}
	}
}

func FuzzCheckExt(f *testing.F) {
	for _, s := range []string{".txt", "../../x", ".a.b", ".é", "", ".0123456789abcdef"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ext string) {
		if CheckExt(ext) != nil {
			return
		}
		if len(ext) < 2 || len(ext) > 17 || ext[0] != '.' {
			t.Fatalf("CheckExt accepted %q", ext)
		}
		for _, c := range []byte(ext[1:]) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
				t.Fatalf("CheckExt accepted %q with byte %q", ext, c)
			}
		}
		// An accepted extension keeps a blob in its shard.
		b := Blob{Digest: Sum([]byte(ext)), Ext: ext}
		if got, err := ParseBlobPath(b.RelPath()); err != nil || got != b {
			t.Fatalf("ParseBlobPath(%q) = %v, %v", b.RelPath(), got, err)
		}
	})
}

func TestParseBlobPath(t *testing.T) {
	b := Blob{Digest: Sum([]byte("x")), Ext: ".txt"}
	h := b.Digest.Hex()
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{b.RelPath(), true},
		{"blobs/" + h[:2] + "/../" + h[:2] + "/" + h + ".txt", false},
		{"blobs/00/" + h + ".txt", h[:2] == "00"},
		{"blobs/" + h + ".txt", false},
		{"/blobs/" + h[:2] + "/" + h + ".txt", false},
		{"blobs/" + h[:2] + "/" + h, false},
		{"blobs/" + h[:2] + "/" + h + ".txt/x", false},
		{"index.db", false},
		{"blobs/" + h[:2] + "/.tmp-1", false},
		{"blobs\\" + h[:2] + "\\" + h + ".txt", false},
	} {
		got, err := ParseBlobPath(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != b) {
			t.Errorf("ParseBlobPath(%q) = %v, %v; want ok=%v", tc.in, got, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrNotBlobPath) {
			t.Errorf("ParseBlobPath(%q) error does not wrap ErrNotBlobPath: %v", tc.in, err)
		}
	}
}

// Path builds in one go what filepath.Join makes of the store's directory
// and the blob's path, for every directory Open can give (the root too),
// and leaves an extension the store never writes to Join.
func TestPathIsJoin(t *testing.T) {
	for _, dir := range []string{"/", "/tmp/store", "/a b/tool_results"} {
		s := &Store{dir: dir}
		for i, ext := range []string{".txt", ".png", ".0123456789abcdef", "/../../x", "", ".a/b"} {
			b := Blob{Digest: Sum([]byte{byte(i)}), Ext: ext}
			want := filepath.Join(dir, filepath.FromSlash(b.RelPath()))
			if got := s.Path(b); got != want {
				t.Errorf("Path(%v) in %s = %q, want %q", b, dir, got, want)
			}
		}
	}
	b := Blob{Digest: Sum([]byte("x")), Ext: ".txt"}
	if want := "blobs/" + b.Digest.Hex()[:2] + "/" + b.Digest.Hex() + ".txt"; b.RelPath() != want {
		t.Errorf("RelPath = %q, want %q", b.RelPath(), want)
	}
}
