// Package storetest is the conformance suite every hook.Store passes: what
// the hook and the read-back tool rely on, run against any implementation.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) hook.Store { return mystore.New(t.TempDir()) }, storetest.Options{})
//	}
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolcas/toolcas/hook"
)

// Options say what a store does differently from the default contract.
type Options struct {
	// Overwrites marks a store that overwrites a key written again, as
	// Haystack's file store does, instead of adding a version; an old path
	// then shows the new content.
	Overwrites bool
	// NoDedupReport marks a store that does not report dedup hits and
	// "same content as".
	NoDedupReport bool
}

// Run runs the suite; newStore returns an empty store for each subtest.
func Run(t *testing.T, newStore func(t *testing.T) hook.Store, o Options) {
	t.Run("RoundTripText", func(t *testing.T) { roundTripText(t, newStore(t)) })
	t.Run("Batch", func(t *testing.T) { batch(t, newStore(t)) })
	t.Run("NotFound", func(t *testing.T) { notFound(t, newStore(t)) })
	t.Run("RunScope", func(t *testing.T) { runScope(t, newStore(t)) })
	t.Run("Rewrite", func(t *testing.T) { rewrite(t, newStore(t), o) })
	t.Run("Dedup", func(t *testing.T) { dedup(t, newStore(t), o) })
	t.Run("Refusals", func(t *testing.T) { refusals(t, newStore(t)) })
	t.Run("Concurrent", func(t *testing.T) { concurrent(t, newStore(t)) })
}

func key(run string, step int, tool, call string, ext string) hook.Key {
	return hook.Key{Run: run, Step: step, Tool: tool, CallID: call, Part: -1, Ext: ext}
}

func write(t *testing.T, s hook.Store, items ...hook.Item) []hook.Stored {
	t.Helper()
	st, err := s.Write(context.Background(), items)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if len(st) != len(items) {
		t.Fatalf("Write returned %d results for %d items", len(st), len(items))
	}
	return st
}

func read(t *testing.T, s hook.Store, run, ref string) *hook.Content {
	t.Helper()
	c, err := s.Read(context.Background(), run, ref)
	if err != nil {
		t.Fatalf("Read(run %q, %q): %v", run, ref, err)
	}
	return c
}

func roundTripText(t *testing.T, s hook.Store) {
	text := "Fusion startups reported… ünïcode\nsecond line\n"
	k := key("run-1", 2, "search", "call-123", ".txt")
	st := write(t, s, hook.Item{Key: k, Part: hook.Text(text)})[0]
	if st.Key != k.String() {
		t.Errorf("Stored.Key = %q, want %q", st.Key, k.String())
	}
	if st.Path == "" || st.Digest.IsZero() {
		t.Errorf("Stored = %+v: no path or digest", st)
	}
	for _, ref := range []string{st.Key, st.Path} {
		c := read(t, s, "run-1", ref)
		if string(c.Data) != text || !c.IsText() {
			t.Errorf("Read(%q) = %q (text %v), want %q", ref, c.Data, c.IsText(), text)
		}
		if c.Key != st.Key || c.Digest != st.Digest {
			t.Errorf("Read(%q) key, digest = %q, %v; want %q, %v", ref, c.Key, c.Digest, st.Key, st.Digest)
		}
		if c.Kind != hook.KindText {
			t.Errorf("Read(%q).Kind = %q, want text", ref, c.Kind)
		}
	}
	// Unscoped reads see it too.
	if c := read(t, s, "", st.Key); string(c.Data) != text {
		t.Errorf("unscoped Read = %q", c.Data)
	}
}

func batch(t *testing.T, s hook.Store) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR fake image bytes \xff\xfe")
	items := []hook.Item{
		{Key: hook.Key{Run: "r", Step: 1, Tool: "t", CallID: "c", Part: 0, Ext: ".txt"}, Part: hook.Text("first")},
		{Key: hook.Key{Run: "r", Step: 1, Tool: "t", CallID: "c", Part: 1, Ext: ".txt"}, Part: hook.Text("")},
	}
	if s.AcceptsBinary() {
		items = append(items,
			hook.Item{Key: hook.Key{Run: "r", Step: 1, Tool: "t", CallID: "c", Part: 2, Ext: ".png"}, Part: hook.Image("image/png", png)},
			hook.Item{Key: hook.Key{Run: "r", Step: 1, Tool: "t", CallID: "c", Part: 3, Ext: ".pdf"}, Part: hook.File("application/pdf", "q3.pdf", []byte("%PDF-1.4 \x00\x01\x02"))},
		)
	}
	st := write(t, s, items...)
	seen := map[string]bool{}
	for i, it := range items {
		if seen[st[i].Key] {
			t.Errorf("two parts share key %q", st[i].Key)
		}
		seen[st[i].Key] = true
		c := read(t, s, "r", st[i].Path)
		want := []byte(it.Part.Text)
		if it.Part.Kind != hook.KindText {
			want = it.Part.Data
		}
		if !bytes.Equal(c.Data, want) {
			t.Errorf("part %d reads back %q, want %q", i, c.Data, want)
		}
		if it.Part.Kind == hook.KindImage && (c.IsText() || c.Kind != hook.KindImage) {
			t.Errorf("image reads back as text %v, kind %q", c.IsText(), c.Kind)
		}
		if it.Part.Kind == hook.KindImage && !strings.HasPrefix(c.MIME, "image/png") {
			t.Errorf("image reads back with MIME %q", c.MIME)
		}
	}
}

func notFound(t *testing.T, s hook.Store) {
	write(t, s, hook.Item{Key: key("r", 1, "t", "c", ".txt"), Part: hook.Text("x")})
	for _, ref := range []string{"r/9_t_none.txt", "other/1_t_c.txt"} {
		if c, err := s.Read(context.Background(), "", ref); !errors.Is(err, hook.ErrNotFound) {
			t.Errorf("Read(%q) = %v, %v; want ErrNotFound", ref, c, err)
		}
	}
}

func runScope(t *testing.T, s hook.Store) {
	a := write(t, s, hook.Item{Key: key("run-a", 1, "t", "c", ".txt"), Part: hook.Text("secret of a")})[0]
	b := write(t, s, hook.Item{Key: key("run-b", 1, "t", "c", ".txt"), Part: hook.Text("secret of b")})[0]
	if c := read(t, s, "run-a", a.Key); string(c.Data) != "secret of a" {
		t.Errorf("run-a reads %q", c.Data)
	}
	for _, ref := range []string{a.Key, a.Path} {
		c, err := s.Read(context.Background(), "run-b", ref)
		if err == nil {
			t.Errorf("run-b read run-a's %q: %q", ref, c.Data)
		} else if !errors.Is(err, hook.ErrNotFound) && !errors.Is(err, hook.ErrRefused) {
			t.Errorf("run-b reading %q: %v, want ErrNotFound or ErrRefused", ref, err)
		}
	}
	if c := read(t, s, "run-b", b.Path); string(c.Data) != "secret of b" {
		t.Errorf("run-b reads %q", c.Data)
	}
}

func rewrite(t *testing.T, s hook.Store, o Options) {
	k := key("r", 1, "read_file", "c", ".txt")
	old := write(t, s, hook.Item{Key: k, Part: hook.Text("old content")})[0]
	cur := write(t, s, hook.Item{Key: k, Part: hook.Text("new content")})[0]
	if c := read(t, s, "r", k.String()); string(c.Data) != "new content" {
		t.Errorf("key reads %q after rewrite, want the new content", c.Data)
	}
	c := read(t, s, "r", old.Path)
	if o.Overwrites {
		if string(c.Data) != "new content" {
			t.Errorf("overwriting store: old path reads %q", c.Data)
		}
		return
	}
	if cur.Version != old.Version+1 {
		t.Errorf("versions %d then %d, want consecutive", old.Version, cur.Version)
	}
	if string(c.Data) != "old content" {
		t.Errorf("old pointer's path reads %q after rewrite, want what it showed", c.Data)
	}
}

func dedup(t *testing.T, s hook.Store, o Options) {
	st := write(t, s,
		hook.Item{Key: key("r1", 2, "search", "call-123", ".txt"), Part: hook.Text("same")},
		hook.Item{Key: key("r1", 5, "search", "call-9", ".txt"), Part: hook.Text("same")},
	)
	other := write(t, s, hook.Item{Key: key("r2", 1, "search", "x", ".txt"), Part: hook.Text("same")})[0]
	if st[0].Digest != st[1].Digest || st[0].Digest != other.Digest {
		t.Error("identical content has different digests")
	}
	if other.SameAs != "" && !strings.HasPrefix(other.SameAs, "r2/") {
		t.Errorf("SameAs names another run's key: %q", other.SameAs)
	}
	if o.NoDedupReport {
		return
	}
	if st[0].SameAs != "" {
		t.Errorf("first part SameAs = %q", st[0].SameAs)
	}
	if st[1].SameAs != st[0].Key {
		t.Errorf("SameAs = %q, want %q", st[1].SameAs, st[0].Key)
	}
	if !other.Dedup {
		t.Error("third write of the same bytes not reported as dedup")
	}
}

func refusals(t *testing.T, s hook.Store) {
	ctx := context.Background()
	write(t, s, hook.Item{Key: key("r", 1, "t", "c", ".txt"), Part: hook.Text("x")})
	outside := filepath.Join(os.TempDir(), "toolcas-storetest-outside.txt")
	os.WriteFile(outside, []byte("outside"), 0o644)
	defer os.Remove(outside)
	for _, ref := range []string{"", "/etc/passwd", outside, "../../etc/passwd", "r/../../../etc/passwd", "r/1_t_c.txt\x00"} {
		c, err := s.Read(ctx, "", ref)
		if err == nil {
			t.Errorf("Read(%q) = %q, want an error", ref, c.Data)
		}
	}
	for _, k := range []hook.Key{
		{Run: "../x", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"},
		{Run: "r", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: "/../../x"},
		{Run: "r", Step: -1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"},
		{Run: "", Step: 1, Tool: "t", CallID: "c", Part: -1, Ext: ".txt"},
	} {
		if _, err := s.Write(ctx, []hook.Item{{Key: k, Part: hook.Text("x")}}); err == nil {
			t.Errorf("Write(%+v) accepted", k)
		} else if !strings.Contains(err.Error(), "invalid key") {
			t.Errorf("Write(%+v) = %v, want an error saying the key is invalid", k, err)
		}
	}
}

func concurrent(t *testing.T, s hook.Store) {
	const runs, steps = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, runs*steps)
	for r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := fmt.Sprint("run-", r)
			for i := range steps {
				k := key(run, i, "t", "c", ".txt")
				want := fmt.Sprintf("%s step %d", run, i)
				st, err := s.Write(context.Background(), []hook.Item{{Key: k, Part: hook.Text(want)}})
				if err != nil {
					errs <- err
					return
				}
				c, err := s.Read(context.Background(), run, st[0].Key)
				if err != nil {
					errs <- err
					return
				}
				if string(c.Data) != want {
					errs <- fmt.Errorf("%s read %q, want %q", st[0].Key, c.Data, want)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
