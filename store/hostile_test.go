package store

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolcas/toolcas/hook"
	"github.com/toolcas/toolcas/policy"
)

var hostileNames = []string{
	"../", "../../etc/passwd", "/etc/passwd", "a\x00b", "line\nbreak\r\n", "quote'\"`", strings.Repeat("x", 10000),
	"\xff\xfe invalid UTF-8", "\u202eevil\u202c", `C:\Windows\System32`, "..", ".", "", "%2e%2e%2f", "~root", "a_b_c", "call0", "0",
	"\u2028line\u2029separators\u0085", "tab\tand\vothers", strings.Repeat("é", 3000),
}

// snapshot lists every file under dir but those under skip.
func snapshot(t *testing.T, dir, skip string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p == skip {
			return filepath.SkipDir
		}
		out = append(out, p)
		return nil
	})
	sort.Strings(out)
	return out
}

// TestHostileInput feeds the hook and the store hostile names, payloads and
// references: nothing is written outside the store, nothing outside it is
// read, every refusal says what was wrong, and a run's reader never reads
// another run's part, even by digest.
func TestHostileInput(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	root := filepath.Join(base, "store")
	outside := filepath.Join(base, "outside.txt")
	os.WriteFile(outside, []byte("outside the store"), 0o644)
	s, err := Open(ctx, root, WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := snapshot(t, base, root)
	h, err := hook.New(s, policy.MustStrategies(policy.Default(policy.Always)))
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := hook.NewReadTool(s)
	tried := 0

	// Names: every tool name with every call id.
	keys := map[string]string{}
	for i, tool := range hostileNames {
		for j, call := range hostileNames {
			tried++
			text := "tool " + string(rune('A'+i)) + " call " + string(rune('A'+j))
			out, err := h.Offload(ctx, hook.Step{Run: "hostile", Number: i}, []hook.Result{{Tool: tool, CallID: call, Parts: []hook.Part{hook.Text(text)}}})
			if err != nil {
				t.Fatalf("tool %q call %q: %v", tool, call, err)
			}
			ref := hook.References(out[0])[0]
			if len(ref.Key) > 200 || strings.ContainsAny(ref.Key, "\n\r\x00'\"\\") || !utf8.ValidString(ref.Key) || strings.Count(ref.Key, "/") != 1 {
				t.Errorf("tool %q call %q: key %q", tool, call, ref.Key)
			}
			if prev, dup := keys[ref.Key]; dup && prev != text {
				t.Errorf("key %q given to two different calls", ref.Key)
			}
			keys[ref.Key] = text
			if !strings.HasPrefix(ref.Path, root+string(filepath.Separator)) {
				t.Errorf("tool %q call %q: path %s outside the store", tool, call, ref.Path)
			}
			r, err := rt.Read(ctx, "hostile", hook.ReadArgs{Ref: ref.Key})
			if err != nil || !strings.Contains(r.Parts[0].Text, text) {
				t.Errorf("tool %q call %q: read back: %v", tool, call, err)
			}
		}
	}
	// Runs: any UTF-8 up to 256 bytes without NUL is accepted and escaped in
	// the key, which stays one line in one directory, and the run's reader
	// sees its part while another run's does not; anything else is refused
	// with the reason.
	for i, run := range hostileNames {
		if run == "" {
			continue // the default run
		}
		tried++
		text := "run " + string(rune('A'+i))
		out, err := h.Offload(ctx, hook.Step{Run: run}, []hook.Result{{Tool: "t", Parts: []hook.Part{hook.Text(text)}}})
		valid := len(run) <= hook.MaxRunLen && utf8.ValidString(run) && !strings.ContainsRune(run, 0)
		if !valid {
			if err == nil || !strings.Contains(err.Error(), "run name") {
				t.Errorf("run %q: %v, want a refusal naming the run", run, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("run %q: %v", run, err)
			continue
		}
		key := hook.References(out[0])[0].Key
		if strings.ContainsAny(key, "\n\r\x00'\"\\`") || strings.Count(key, "/") != 1 || strings.HasPrefix(key, "./") || strings.HasPrefix(key, "../") ||
			!strings.HasPrefix(key, hook.EscapeRun(run)+"/") || strings.ContainsRune(key, '\u2028') {
			t.Errorf("run %q: key %q", run, key)
		}
		if r, err := rt.Read(ctx, run, hook.ReadArgs{Ref: key}); err != nil || !strings.Contains(r.Parts[0].Text, text) {
			t.Errorf("run %q reading its own %q: %v", run, key, err)
		}
		if _, err := s.Read(ctx, "hostile", key); err == nil {
			t.Errorf("run hostile read run %q's %q", run, key)
		}
	}
	// Payloads: invalid base64, a MIME type with a path, hostile file names.
	for _, b64 := range []string{"not base64!", "AAA", "=====", "QUJD\x00"} {
		tried++
		if _, err := hook.ImageBase64("image/png", b64); err == nil || !strings.Contains(err.Error(), "not valid base64") {
			t.Errorf("ImageBase64(%q) = %v", b64, err)
		}
	}
	for _, p := range []hook.Part{
		hook.Image("image/../../etc/passwd", []byte("x")),
		hook.File("text/plain\nX-Injected: 1", "a.txt", []byte("x")),
		hook.File("application/pdf", "../../x", []byte("%PDF-1.4")),
		hook.File("application/pdf", "/etc/passwd.pdf", []byte("%PDF-1.4")),
		hook.File("", "..\\..\\evil.exe", []byte("MZ")),
		hook.File("", "name\x00.pdf", []byte("x")),
	} {
		tried++
		out, err := h.Offload(ctx, hook.Step{Run: "payloads"}, []hook.Result{{Tool: "t", Parts: []hook.Part{p}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range hook.References(out[0]) {
			if !strings.HasPrefix(ref.Path, filepath.Join(root, "blobs")+string(filepath.Separator)) {
				t.Errorf("part %+v stored at %s", p, ref.Path)
			}
		}
	}

	// References: everything outside the store, or not a part of this run.
	blobsDir := filepath.Join(root, "blobs")
	victim := mustWrite(t, s, item("victim", 1, "outside the store"))[0]
	other := mustWrite(t, s, item("other-run", 1, "another run's secret"), item("hostile", 99, "outside the store"))
	// A symbolic link planted at a blob's name, pointing out of the store at
	// a file with the very same content.
	os.Chmod(victim.Path, 0o644)
	os.Remove(victim.Path)
	os.Symlink(outside, victim.Path)
	for _, ref := range []string{
		"..", "../outside.txt", outside, "/etc/passwd", filepath.Join(root, "..", "outside.txt"),
		filepath.Join(root, IndexFile), filepath.Join(root, "toolcas.json"), filepath.Join(root, LockFile),
		filepath.Join(blobsDir, "..", IndexFile), victim.Path, victim.Key, "abc", "0123456", "blake3:xyz",
		"victim/../../outside.txt", strings.Repeat("a/", 1000), "hostile/\x00", other[0].Key, other[0].Path,
		other[0].Digest.String(), other[0].Digest.Hex()[:10],
	} {
		tried++
		c, err := s.Read(ctx, "hostile", ref)
		if err == nil {
			if string(c.Data) == "outside the store" && c.Key == other[1].Key {
				continue // the run's own part with the same content: its own
			}
			t.Errorf("Read(run hostile, %q) = %s %q", ref, c.Key, c.Data)
			continue
		}
		if msg := err.Error(); len(msg) < 10 {
			t.Errorf("Read(%q): error %q says nothing", ref, msg)
		}
		r := rt.Call(ctx, "hostile", "c", []byte(`{"ref": `+quote(ref)+`}`))
		if !r.Error {
			t.Errorf("read tool on %q: %q", ref, r.Parts[0].Text)
		}
	}
	if after := snapshot(t, base, root); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("files outside the store changed:\nbefore %v\nafter  %v", before, after)
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside the store" {
		t.Error("the file outside the store changed")
	}
	t.Logf("%d hostile inputs tried", tried)
}

func quote(s string) string {
	b := strings.Builder{}
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20:
			b.WriteString(`\u00` + string("0123456789abcdef"[r>>4]) + string("0123456789abcdef"[r&15]))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TestOneHostileResultRefused: a step whose results include one with a
// 100 KB tool name offloads the others and leaves that one in context with
// a warning naming the problem; nothing of it is stored, not even a blob.
// A store write given such a part fails before writing any blob.
func TestOneHostileResultRefused(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	var logged strings.Builder
	h, err := hook.New(s, policy.MustStrategies(policy.Default(policy.Always)),
		hook.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("t", 100_000)
	results := []hook.Result{
		{Tool: huge, CallID: "c1", Parts: []hook.Part{hook.Text("the hostile result's content")}},
		{Tool: "read_file", CallID: "c2", Parts: []hook.Part{hook.Text("a normal result beside it")}},
	}
	out, err := h.Offload(ctx, hook.Step{Run: "r", Number: 1}, results)
	if err != nil {
		t.Fatalf("Offload failed the whole step: %v", err)
	}
	if hook.IsPointer(out[0]) || out[0].Parts[0].Text != "the hostile result's content" {
		t.Errorf("the hostile result was offloaded or changed: %+v", out[0].Parts)
	}
	if !hook.IsPointer(out[1]) {
		t.Error("the normal result beside it was not offloaded")
	}
	if !strings.Contains(logged.String(), "tool name of 100000 bytes") {
		t.Errorf("warning %q does not say what was wrong", logged.String())
	}
	res, err := s.Verify(ctx, VerifyOptions{})
	if err != nil || !res.OK || len(res.Orphans) > 0 || res.Checked != 1 {
		t.Errorf("after the step: verify %+v, %v; want one blob, no orphan", res, err)
	}
	// The store itself refuses the part before writing its blob.
	before := snapshot(t, s.Dir(), "")
	_, err = s.Write(ctx, []hook.Item{
		{Key: hook.Key{Run: "r", Step: 2, Tool: huge, CallID: "c", Part: -1, Ext: ".txt"}, Part: hook.Text("orphan to be")},
		item("r", 3, "fine"),
	})
	if err == nil {
		t.Fatal("Write took a part with a 100 KB tool name")
	}
	if after := snapshot(t, s.Dir(), ""); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("a refused write left files: %v", after[len(before):])
	}
}

// A result part whose file name or MIME type runs to a megabyte stays in
// context with a warning, as one with a huge tool name does; the rest of
// the step is offloaded. Before, the whole step failed on the index's
// column limit.
func TestHugeNamesStayInContext(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	var log bytes.Buffer
	h, err := hook.New(s, policy.MustStrategies(policy.Default(policy.Always)), hook.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 1<<20)
	out, err := h.Offload(ctx, hook.Step{Run: "r", Number: 1}, []hook.Result{
		{Tool: "t", CallID: "name", Parts: []hook.Part{hook.File("application/pdf", huge+".pdf", []byte("%PDF-1.4"))}},
		{Tool: "t", CallID: "mime", Parts: []hook.Part{hook.File("application/x-"+huge, "a.bin", []byte{1, 2, 3})}},
		{Tool: "t", CallID: "fine", Parts: []hook.Part{hook.Text("an ordinary result")}},
	})
	if err != nil {
		t.Fatalf("Offload of a step with huge names: %v", err)
	}
	if hook.IsPointer(out[0]) || hook.IsPointer(out[1]) || !hook.IsPointer(out[2]) {
		t.Errorf("offloaded %v %v %v; want only the ordinary result", hook.IsPointer(out[0]), hook.IsPointer(out[1]), hook.IsPointer(out[2]))
	}
	if !strings.Contains(log.String(), "file name of 1048580 bytes") || !strings.Contains(log.String(), "MIME type of") {
		t.Errorf("the warnings do not say what was wrong: %.300s", log.String())
	}
}
